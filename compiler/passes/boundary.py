"""Boundary: where a model's own inputs and outputs lie when it runs, as `caches` says.

Activations between ops live in the innermost shared level with room for them (compiler.targeting.placement). When the
caches are warm, a call repeated in a loop finds last call's inputs and outputs still on chip, in the largest shared
level inside DRAM (a GPU's L2, a CPU's last-level cache), as many as fit there together: smallest first (ties in the
order the program first touches them), while their sum fits that level's capacity; a tensor larger than the level is
never resident, and a 1 GiB KV cache is not in a 40 MiB L2. The rest, and
all of them when the caches are cold (the first call, or a benchmark that flushes the caches before each call, as
DeepGEMM's and `accelsim validate cuda`'s do), come from and go back to the outermost level that holds activations,
DRAM: each is marked external and placement serves it from there. An in-place write's output is its buffer (a KV
cache's present is its past), one tensor to place.
Invariant: only operands named by the IR's inputs or outputs change; the resident ones' bytes sum to at most the
capacity of that last level.
"""
from __future__ import annotations

from dataclasses import replace
from operator import is_

from compiler.errors import UserError
from compiler.frozen import but
from compiler.ir import IR, Move, Operand, Role
from compiler.passes import PassOptions
from compiler.hardware import Arch

CACHES = ("warm", "cold")


def boundary(ir: IR, options: PassOptions) -> IR:
    """The IR with every model input or output that does not stay resident marked external: all of them with
    `options.caches` "cold", those that do not fit together in the activations' level with "warm"."""
    if options.caches not in CACHES:
        raise UserError(f"caches {options.caches!r}: choose from {', '.join(CACHES)}")
    written = _written_into(ir)
    buffers = _buffers(ir, written)
    kept = resident(buffers, options.arch) if options.caches == "warm" else set()
    away = buffers.keys() - kept
    if not away:
        return ir
    outside = away | {name for name, buffer in written.items() if buffer in away}

    def mark(operand: Operand) -> Operand:
        if operand.tensor in outside and operand.role != Role.weight and not operand.external:
            return but(operand, external=True)
        return operand

    ops = []
    for op in ir.ops:
        inputs, output = tuple([mark(o) for o in op.inputs]), mark(op.output)
        same = output is op.output and all(map(is_, inputs, op.inputs))
        ops.append(op if same else but(op, inputs=inputs, output=output))
    return replace(ir, ops=ops)


def resident(buffers: dict[str, int], arch: Arch | None) -> set[str]:
    """The buffers (name -> bytes, in the order the program first touches them) a repeated call finds on chip:
    smallest first while their sum fits the largest shared level inside DRAM that activations may live in (a
    CPU's last-level cache, not its 32 KiB L1; a GPU's L2), all of them without an arch or such a level."""
    cache = last_level(arch) if arch is not None else None
    if cache is None or arch is None:
        return set(buffers)
    room = arch.memory[cache].capacity_total
    kept = set()
    for name in sorted(buffers, key=buffers.__getitem__):     # a stable sort: ties stay in order of first touch
        if buffers[name] <= room:
            kept.add(name)
            room -= buffers[name]
    return kept


def last_level(arch: Arch) -> int | None:
    """The outermost shared level inside the outermost one (DRAM) that holds inputs and outputs: where a repeated
    call's data stays warm. activation_home(arch, 0) is the innermost such level, a CPU's L1, too small to say."""
    shared = [i for i, lv in enumerate(arch.memory) if i > 0 and Role.input in lv.holds and Role.output in lv.holds
              and lv.instances == 1]
    return shared[0] if shared else None


def _written_into(ir: IR) -> dict[str, str]:
    """An in-place write's output -> the buffer it writes into (its first input's, through earlier in-place writes);
    every other tensor is a buffer of its own."""
    written: dict[str, str] = {}
    for op in ir.ops:
        if isinstance(op, Move) and op.in_place:
            source = op.inputs[0].tensor
            written[op.output.tensor] = written.get(source, source)
    return written


def _buffers(ir: IR, written: dict[str, str]) -> dict[str, int]:
    """The model's input and output buffers that are not weights, with their bytes, in the order of first touch
    (`written`: _written_into(ir))."""
    boundary = set(ir.inputs) | set(ir.outputs)
    found: dict[str, int] = {}

    def touch(operand: Operand) -> None:
        name = written.get(operand.tensor, operand.tensor)
        found[name] = max(found.get(name, 0), operand.nbytes)

    for op in ir.ops:
        for operand in op.inputs:
            if operand.tensor in boundary and operand.role != Role.weight:
                touch(operand)
        if op.output.tensor in boundary and op.output.role != Role.weight:
            touch(op.output)
    return found
