"""Fuse: group ops into kernels the way production runtimes do on the target, and say which launch each pays.

A kernel is an anchor (an Einsum, a Map or a row-wise Reduce) and the element-wise ops after it over the same
output shape: a GEMM or convolution with its bias, activation, normalising scale and shift and requantisation
(the epilogue; on a systolic array, its output stage), or a chain of element-wise ops (GeLU's five Maps, a
residual add and its ReLU); or, where the target runs it so, a whole attention (compiler.passes.attention:
scores, masks, softmax and weighted sum, FlashAttention's kernel). A tensor made and read only inside one kernel
(and not a model output) is fused: it never leaves the chip. Every op stays in the IR with its own work and
numerics; only bytes and launches change.
Invariant: no kernel reads what depends on its own tensors, so kernels run in IR order with no cycle (an
element-wise member reads nothing made after its anchor; an attention's V may be, but never from its scores);
on a captured graph (`launch="graph"`) one launch is paid for the whole model, else one per kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from operator import is_

from compiler.errors import UserError
from compiler.frozen import but
from compiler.hardware import Arch
from compiler.hardware.profiles import profile
from compiler.ir import IR, Einsum, IROp, Map, Operand, Reduce
from compiler.passes import PassOptions
from compiler.passes.attention import attention_groups

LAUNCHES = ("eager", "graph")
# runtime: GEMM epilogues and element-wise chains, as inference runtimes fuse (TensorRT, onnxruntime, XLA, vLLM);
# chains: element-wise chains only, as a training framework's fused kernels do (Megatron's bias-GeLU and
# bias-dropout-add after a cuBLAS GEMM that writes its output); none: every op a kernel of its own.
FUSIONS = ("runtime", "chains", "none")



@dataclass(frozen=True)
class Rules:
    """What one kernel may take: an Einsum's element-wise consumers (its epilogue), and whether that epilogue reads
    any tensor; a row for a normalisation or a softmax; a whole attention. With `--fusion runtime`, as the arch
    kind's runtimes do (compiler.hardware.profiles: a GPU's CUTLASS, cuBLASLt or Inductor epilogue, or a CPU's
    oneDNN post-ops, reads any tensor, a residual too; a systolic array's output stage, TPU v1's activation
    pipeline, only its own small operands: per-channel scale, shift and bias, scalars)."""

    epilogues: bool
    epilogue_reads_tensors: bool
    row_kernels: bool
    attention: bool


# --fusion chains: element-wise chains only, whatever the arch
CHAINS = Rules(epilogues=False, epilogue_reads_tensors=True, row_kernels=False, attention=False)


def rules(arch: Arch, fusion: str) -> Rules:
    """The Rules of `fusion` ("runtime" or "chains") on `arch`."""
    if fusion != "runtime":
        return CHAINS
    kind = profile(arch.kind)
    return Rules(True, kind.epilogue_reads_tensors, kind.row_kernels, kind.attention_kernel)


def fuse(ir: IR, options: PassOptions) -> IR:
    """The IR with each op's kernel, fused operands and launch set for `options.arch` as `options.fuse` says
    (FUSIONS; unchanged without an arch)."""
    arch, fusion = getattr(options, "arch", None), getattr(options, "fuse", "runtime")
    if fusion not in FUSIONS:
        raise UserError(f"fusion {fusion!r} is not a fusion mode; choose from {', '.join(FUSIONS)}")
    if arch is None or fusion == "none":
        return _launches(ir, getattr(options, "launch", "eager"))
    may = rules(arch, fusion)
    made_by = {op.output.tensor: i for i, op in enumerate(ir.ops)}
    attention = {m: g.scores for g in attention_groups(ir) for m in g.members} if may.attention else {}
    anchor: list[int] = []                 # per op: the index of its kernel's anchor
    for i, op in enumerate(ir.ops):
        anchor.append(attention[i] if i in attention else _kernel_to_join(i, op, ir.ops, anchor, made_by, may))
    reader: dict[str, int] = {}            # tensor -> the kernel that reads it, -1 where several kernels do
    for i, op in enumerate(ir.ops):
        for o in op.inputs:
            reader[o.tensor] = anchor[i] if reader.get(o.tensor, anchor[i]) == anchor[i] else -1
    outputs = set(ir.outputs)
    # tensor -> the kernel it is fused in: made in that kernel, read by it alone, and no model output
    inside = {t: k for t, k in reader.items() if k >= 0 and t in made_by and anchor[made_by[t]] == k
              and t not in outputs}
    ops = []
    for i, op in enumerate(ir.ops):
        k = anchor[i]
        inputs = tuple([but(o, fused=True) if not o.fused and inside.get(o.tensor) == k else o for o in op.inputs])
        output = op.output
        if not output.fused and inside.get(output.tensor) == k:
            output = but(output, fused=True)
        kernel, launch = "" if k == i else ir.ops[k].name, k == i
        same = (output is op.output and all(map(is_, inputs, op.inputs)) and kernel == op.kernel
                and launch == op.launch)
        ops.append(op if same else but(op, inputs=inputs, output=output, kernel=kernel, launch=launch))
    return _launches(replace(ir, ops=ops), getattr(options, "launch", "eager"))


def _kernel_to_join(i: int, op: IROp, ops: list[IROp], anchor: list[int], made_by: dict[str, int],
                    may: Rules) -> int:
    """The anchor of the kernel op `i` joins: a kernel that made one of its inputs, in full shape; else `i`."""
    if not isinstance(op, (Map, Reduce)) or (isinstance(op, Reduce) and not _row_wise(op)):
        return i
    for o in op.inputs:
        if o.tensor not in made_by or o.shape != op.output.shape:
            continue
        k = anchor[made_by[o.tensor]]
        head = ops[k]
        if head.output.shape != op.output.shape or not isinstance(head, (Einsum, Map, Reduce)):
            continue
        if isinstance(head, Einsum) and not may.epilogues:
            continue
        if isinstance(op, Reduce) and (not may.row_kernels or isinstance(head, Einsum)):
            continue
        if isinstance(head, Reduce) and not may.row_kernels:
            continue
        for x in op.inputs:
            if not _readable(x, k, op, head, anchor, made_by, may):
                break
        else:
            return k
    return i


def _readable(x: Operand, k: int, op: IROp, head: IROp, anchor: list[int], made_by: dict[str, int],
              may: Rules) -> bool:
    """Whether a member of kernel `k` may read `x`: made in the kernel, or before it began (a weight, a model
    input, an earlier op's output), and, in a systolic output stage, only what no op makes (a weight, a constant)
    or a tensor smaller than the output (a bias, a per-channel scale: not a second activation)."""
    if x.tensor in made_by and anchor[made_by[x.tensor]] == k:
        return True
    if x.tensor in made_by and made_by[x.tensor] > k:
        return False
    if isinstance(head, Einsum) and not may.epilogue_reads_tensors:
        return x.tensor not in made_by or x.elements < op.output.elements
    return True


def _row_wise(op: Reduce) -> bool:
    """A Reduce that gives back its input's shape (softmax, a normalisation): it reduces rows in place."""
    return op.output.shape == op.inputs[0].shape


def _launches(ir: IR, launch: str) -> IR:
    """On a captured graph only the first kernel that computes pays a launch (a copy pays none, accelsim's
    vector pricing); eagerly every kernel's anchor does."""
    if launch == "eager":
        return ir
    if launch not in LAUNCHES:
        raise UserError(f"launch {launch!r} is not a launch mode; choose from {', '.join(LAUNCHES)}")
    first = next((i for i, op in enumerate(ir.ops) if op.launch and (op.macs or op.ops)), None)
    return replace(ir, ops=[op if i == first else replace(op, launch=False) for i, op in enumerate(ir.ops)])
