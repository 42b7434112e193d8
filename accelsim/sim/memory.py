"""The memory a model holds on a device while it runs (inference): liveness over its graph (compiler.train.memory, the
same count a training step's memory is), with every tensor at the dtype the compiled program holds it in.

A graph built in fp32 and run in fp16 holds 2-byte weights and activations; int64 ids and ternary weights keep theirs
(compiler.passes.quantize decides, and the IR's operands carry its decision); a tensor made and read inside one kernel
(compiler.passes.fuse: a convolution's output before its BatchNorm, attention's scores) never reaches the device's
memory and holds none; one written in place (a KV cache's new token, compiler.ir.Move.in_place) is the buffer it
writes into. `inputs` is the model's inputs held on
the device (a decode step's KV cache, a batch of images), a part of what the run needs whether or not live at the peak.
Invariant: peak == weights + activations (a forward pass holds no gradients, optimizer state or workspace).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from accelsim.arch import Arch
from accelsim.results.table import binary
from compiler.dtypes import DType
from compiler.frozen import but
from compiler.graph import Graph
from compiler.ir import IR, Move
from compiler.train.memory import liveness


def footprint(graph: Graph, ir: IR, arch: Arch, inputs: Iterable[str] | None = None) -> dict:
    """The run's memory on `arch` (compiler.train.memory.Memory.to_dict() at the run's dtypes), with `inputs` (the
    bytes of those of the graph's inputs that are the model's: all, unless named) and the capacity of the arch's
    outermost memory level (`capacity`, `capacity_level`)."""
    held = at_dtypes(graph, dtypes(ir), {op.output.tensor for op in ir.ops if op.output.fused})
    written = {op.output.tensor: op.inputs[0].tensor for op in ir.ops if isinstance(op, Move) and op.in_place}
    memory = liveness(held, {node.name: "forward" for node in held.nodes}, set(), set(), in_place=written).to_dict()
    memory["inputs"] = sum(held.tensors[name].nbytes for name in (held.inputs if inputs is None else inputs))
    return against(memory, arch)


def against(memory: dict, arch: Arch) -> dict:
    """`memory` with the capacity of the arch's outermost level (`capacity`, `capacity_level`) it must fit."""
    memory["capacity"] = arch.memory[0].capacity_total
    memory["capacity_level"] = arch.memory[0].name
    return memory


def dtypes(ir: IR) -> dict[str, DType]:
    """Tensor -> the dtype the compiled program holds it in: its operands' (after compiler.passes.quantize)."""
    return {operand.tensor: operand.dtype for op in ir.ops for operand in (*op.inputs, op.output)}


def at_dtypes(graph: Graph, held: dict[str, DType], on_chip: set[str] | frozenset[str] = frozenset()) -> Graph:
    """`graph` as liveness should count it: each tensor `held` names at that dtype, one `on_chip` (fused) with no
    elements, the others as they are; nodes and arrays shared. Only its sizes mean anything: never run it."""
    tensors = {}
    for name, t in graph.tensors.items():
        dtype = held.get(name, t.dtype)
        if name in on_chip:
            tensors[name] = but(t, shape=(0,), dtype=dtype)
        else:
            tensors[name] = but(t, dtype=dtype) if dtype != t.dtype else t
    return replace(graph, tensors=tensors)


def fits(memory: dict) -> bool:
    return memory["peak"] <= memory["capacity"]


def note(memory: dict, arch_name: str) -> list[str]:
    """Why a run does not fit, in words (none when it does): its peak, the capacity and the largest tensors."""
    if fits(memory):
        return []
    largest = ", ".join(f"{t['tensor']} ({t['category']}, {binary(t['bytes'])})" for t in memory["largest"][:3])
    return [f"the run needs {binary(memory['peak'])} at its peak (node {memory['peak_node']!r}: weights "
            f"{binary(memory['weights'])}, activations {binary(memory['activations'])}) but {arch_name}'s "
            f"{memory['capacity_level']} holds {binary(memory['capacity'])}: it does not fit; largest: {largest}"]
