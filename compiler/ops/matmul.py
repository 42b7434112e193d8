"""MatMul (numpy broadcasting, 1-D operands) and MatMulInteger (int8/uint8/ternary, zero points) -> Einsum.

Invariant: one Einsum over loops (batch..., m, n, k) whose MACs are batch*M*N*K; weight dtypes (ternary)
are kept from the graph tensor so the hardware sees 2-bit weights.
"""
from __future__ import annotations

import numpy as np

from compiler.dtypes import DType
from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Map, Operand, Role
from compiler.ops.base import OpDef, broadcast, fail, given, operand, out, output_operand, register, require

INTEGER_INPUTS = (DType.int8, DType.uint8, DType.ternary)


def accumulator(dtype: DType) -> DType:
    """The MAC accumulator type: int32 for narrow integers, fp64 for fp64, fp32 for other floats."""
    if dtype.is_float:
        return DType.fp64 if dtype == DType.fp64 else DType.fp32
    return DType.int64 if dtype == DType.int64 else DType.int32


def matmul_shape(node: Node, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy.matmul's output shape: a 1-D operand gains a unit axis that the result then drops."""
    if not a or not b:
        raise fail(node, f"operands must have rank >= 1, got shapes {list(a)} and {list(b)}")
    a2 = a if len(a) > 1 else (1,) + a
    b2 = b if len(b) > 1 else b + (1,)
    if a2[-1] != b2[-2]:
        raise fail(node, f"inner dimensions differ: A {list(a)} has K={a2[-1]}, B {list(b)} has "
                         f"K={b2[-2]}; A's last axis must equal B's second-to-last")
    batch = broadcast(node, a2[:-2], b2[:-2])
    return batch + a2[-2:-1] * (len(a) > 1) + b2[-1:] * (len(b) > 1)


def matmul_einsum(node: Node, a: Operand, b: Operand, result: Operand, acc: DType) -> Einsum:
    """The batched product as one Einsum; a batch axis of size 1 facing a larger one is a fixed index."""
    out_shape = matmul_shape(node, a.shape, b.shape)
    k = a.shape[-1]
    nbatch = len(out_shape) - (len(a.shape) > 1) - (len(b.shape) > 1)
    batch = [(f"b{i}", out_shape[i]) for i in range(nbatch)]

    def batch_axes(shape: tuple[int, ...]) -> tuple[Axis, ...]:
        lead = shape[:-2]
        first = nbatch - len(lead)  # numpy aligns batch axes on the right
        return tuple(Axis.of(f"b{first + i}") if d == out_shape[first + i] else Axis((), 0)
                     for i, d in enumerate(lead))

    loops = list(batch)
    a_axes: tuple[Axis, ...] = (Axis.of("k"),)
    b_axes: tuple[Axis, ...] = (Axis.of("k"),)
    if len(a.shape) > 1:
        loops.append(("m", a.shape[-2]))
        a_axes = batch_axes(a.shape) + (Axis.of("m"), Axis.of("k"))
    if len(b.shape) > 1:
        loops.append(("n", b.shape[-1]))
        b_axes = batch_axes(b.shape) + (Axis.of("k"), Axis.of("n"))
    out_dims = tuple(d for d, _ in loops)
    return Einsum(name=node.name, node=node.name, op=node.op, inputs=(a, b), output=result,
                  loops=tuple(loops) + (("k", k),), in_axes=(a_axes, b_axes), out_dims=out_dims, acc=acc)


@register("MatMul")
class MatMul(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        a, b = require(node, ins, 2)
        if a.dtype != b.dtype:
            raise fail(node, f"A is {a.dtype.value} but B is {b.dtype.value}; MatMul needs one type "
                             f"(use MatMulInteger for int8 with int32 results)")
        return [out(node, matmul_shape(node, a.shape, b.shape), a.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = given(node, args, 2)
        work = np.float32 if a.dtype in (np.dtype(np.float16), np.dtype(np.float32)) else a.dtype
        return [np.matmul(a.astype(work), b.astype(work)).astype(a.dtype)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        a, b = operand(graph, node.inputs[0]), operand(graph, node.inputs[1])
        return [matmul_einsum(node, a, b, output_operand(node, graph), accumulator(a.dtype))]


@register("MatMulInteger")
class MatMulInteger(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        a, b = require(node, ins, 2, 4)
        for name, t in (("A", a), ("B", b)):
            if t.dtype not in INTEGER_INPUTS:
                raise fail(node, f"{name} is {t.dtype.value}; MatMulInteger takes int8 or uint8 "
                                 f"(or ternary int8)")
        shape = matmul_shape(node, a.shape, b.shape)
        rows, cols = (a.shape[-2] if len(a.shape) > 1 else 1), (b.shape[-1] if len(b.shape) > 1 else 1)
        for index, name, allowed in ((2, "a_zero_point", (rows,)), (3, "b_zero_point", (cols,))):
            zp = ins[index] if len(ins) > index else None
            if zp is not None and zp.shape not in ((), (1,), allowed):
                raise fail(node, f"{name} has shape {list(zp.shape)}; allowed: a scalar, [1] or "
                                 f"{list(allowed)}")
        return [out(node, shape, DType.int32)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        a, b = _centered(node, args)
        return [np.matmul(a, b).astype(np.int32)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        ops: list[IROp] = []
        sides = []
        for index, zp_index, tag in ((0, 2, "a"), (1, 3, "b")):
            source = operand(graph, node.inputs[index])
            zp_name = node.inputs[zp_index] if len(node.inputs) > zp_index else ""
            known = graph.value(zp_name) if zp_name else None
            if not zp_name or (known is not None and not np.any(known)):
                sides.append(source)  # no zero point: the int8 (or ternary) operand feeds the MACs as is
                continue
            # A zero point is subtracted first (int16 holds int8 - int8), so the MACs stay one Einsum.
            centered = Operand(f"{node.name}:{tag}_centered", source.shape, DType.int16, Role.output)
            column = tag == "a"
            ops.append(Map(name=f"{node.name}:{tag}_zero_point", node=node.name, op=node.op,
                           inputs=(source, operand(graph, zp_name)), output=centered, ops_per_element=1,
                           fn=lambda x, zp, column=column: _subtract(x, zp, column)))
            sides.append(Operand(centered.tensor, centered.shape, centered.dtype, source.role))
        ops.append(matmul_einsum(node, sides[0], sides[1], output_operand(node, graph), DType.int32))
        return ops


def _subtract(x: np.ndarray, zp: np.ndarray, per_row: bool) -> np.ndarray:
    """x - zero point; A's 1-D zero point is per row (M), B's per column (N)."""
    zp = np.asarray(zp).astype(np.int32)
    if per_row and zp.ndim == 1 and zp.size > 1:
        zp = zp.reshape(-1, 1)
    centered: np.ndarray = x.astype(np.int32) - zp
    return centered


def _centered(node: Node, args: list[np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
    a, b = (x.astype(np.int64) for x in given(node, args, 2))
    if len(args) > 2 and args[2] is not None:
        a = _subtract(a, args[2], True)
    if len(args) > 3 and args[3] is not None:
        b = _subtract(b, args[3], False)
    return a.astype(np.int64), b.astype(np.int64)
