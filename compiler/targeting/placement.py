"""Where operands live on a target: the memory levels each role passes through, outermost first.

Shared by the roofline and the tiling compiler so both count bytes at the same levels. Weights are
served from the outermost level holding weights; activations live between ops in the innermost level
that holds inputs and outputs, is shared by the whole chip (one instance: per-SM or per-core scratch
does not outlive an op) and has room for them; else in the outermost such level. An op whose output
stays on chip for the next op is fused in effect: its DRAM traffic is gone. A fused operand (passed inside one
kernel, compiler.passes.fuse) crosses no level, except that an Einsum's fused output is still formed where its
tiles accumulate (the innermost level on its path: accumulators, registers) for the epilogue to read.
`arch` is any object with `.memory`, a sequence of levels with `.holds`, `.instances`, `.capacity_total`.
"""
from __future__ import annotations

from compiler.ir import Einsum, IROp, Move, Role
from compiler.hardware import Arch


def activation_home(arch: Arch, activation_bytes: int) -> int | None:
    both = [i for i, lv in enumerate(arch.memory) if Role.input in lv.holds and Role.output in lv.holds]
    fits = [i for i in both if arch.memory[i].instances == 1 and arch.memory[i].capacity_total >= activation_bytes]
    return fits[-1] if fits else both[0] if both else None


def role_path(arch: Arch, role: Role, home: int | None) -> list[int]:
    """Indices of the levels an operand of `role` crosses, from where it is served inward."""
    holding = [i for i, lv in enumerate(arch.memory) if role in lv.holds]
    if not holding:
        return []
    source = holding[0] if role == Role.weight or home is None else home
    return [i for i in holding if i >= source]


def operand_path(arch: Arch, op: IROp, index: int, home: int | None) -> list[int]:
    """The levels operand `index` of `op` (its inputs, then the output) crosses, from where it is served inward."""
    operand = op.output if index == len(op.inputs) else op.inputs[index]
    copied = isinstance(op, Move) and index < len(op.inputs)
    role = Role.input if copied else operand.role
    if operand.external or (copied and operand.role == Role.weight and home is not None
                            and arch.memory[home].capacity_total < operand.nbytes):
        home = None     # a model input or output when cold; a weight a copy reads that its home cannot hold
    path = role_path(arch, role, home)
    if not operand.fused:
        return path
    return path[-1:] if isinstance(op, Einsum) and index == len(op.inputs) else []


def op_home(arch: Arch, op: IROp) -> int | None:
    # All of the op's bytes must fit: a LayerNorm's gamma and beta pass through the same L2 as its
    # activations (BERT's embeddings on a GTX 580's 768 KiB L2 missed by 16 bytes). So must every activation
    # it reads, whole: it lives there, and the footprints count it whole where it is served from. A gather
    # moves only what it keeps, but BERT's [CLS] token at batch 8 is 24 KiB of a 3 MiB tensor in DRAM.
    # (Weights are served from the outermost level wherever the op's home is.)
    whole = sum(o.nbytes for o in op.inputs if o.role != Role.weight) + op.output.nbytes
    return activation_home(arch, max(whole, sum(op.bytes_by_role().values())))


def vector_paths(arch: Arch, op: IROp) -> list[list[int]]:
    """Per operand of a Map, Reduce or Move (inputs, then the output), the levels it crosses: a copy (Move) reads
    even a weight as an activation, from where activations live."""
    home = op_home(arch, op)
    return [operand_path(arch, op, i, home) for i in range(len(op.inputs) + 1)]
