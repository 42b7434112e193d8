"""Fold QDQ: DequantizeLinear -> Conv / MatMul / Gemm (-> bias) (-> Relu) -> QuantizeLinear becomes one integer
Einsum over the stored int8 (uint8, int4) values with an int32 accumulator (fp8 values: an fp32 one), and one
requantising epilogue Map. DequantizeLinear per block of k on both operands -> MatMul (no QuantizeLinear after)
becomes one block-scaled Einsum over the stored values and their scales. DequantizeLinear -> a vector op (an
Add, a pooling) -> QuantizeLinear becomes that op over the stored values, dequantizing and quantizing inside
(the same float arithmetic, one pass over memory).

Invariant: the folded ops compute what onnxruntime's fused QLinearConv / QLinearMatMul / QGemm compute (exact
integer sums, then float32(acc + bias) * (sx * sw / sy), rounded half to even, plus the output zero point,
saturated), which differs from the unfolded float reference by at most one step of the output scale; fp8
sums are scaled, biased and quantized as the float reference does, in another order of summation; a
block-scaled Einsum computes the MatMul of the dequantized operands (each product scaled by both its blocks'
scales, summed in fp32). The pass folds only what it can prove: per-tensor data scales, weights known at
compile time with zero (or no) zero point, per-tensor or per-output-channel weight scales, an int32 bias whose
scale is sx * sw; blocks along the reduced axis only. Anything else stays as it was and runs in float. Every
tensor the model quantized keeps its own dtype, whatever dtype the quantize pass gave the float ones.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from compiler.dtypes import DType
from compiler.ir import IR, Einsum, IROp, Map, Move, Operand, Reduce, Role
from compiler.ops.qlinear import Requantize, as_input, pad_with_zero_point, weight_sums
from compiler.ops.quantize import NARROW_FLOATS, Dequantize, Quantize
from compiler.passes import PassOptions

FOLDED = ("Conv", "MatMul", "Gemm")


def fold_qdq(ir: IR, options: PassOptions) -> IR:
    """Fold every provable QDQ pattern around an Einsum, then around a vector op (an Add between dequantized
    inputs, a pooling), then restore the model's quantized dtypes; a model with no quantize, dequantize or
    requantize op has nothing to fold or restore."""
    if not any(isinstance(op, Map) and isinstance(op.fn, (Quantize, Dequantize, Requantize, QuantizedOp))
               for op in ir.ops):
        return ir
    graph = _Index(ir)
    ops, dropped, added = list(ir.ops), set(), {}
    for op in ir.ops:
        if isinstance(op, Einsum) and op.op in FOLDED and op.name not in dropped:
            fold = _match(op, graph)
            if fold is not None:
                dropped |= {o.name for o in fold.replaced}
                added[fold.replaced[-1].name] = _rewrite(fold, graph)
            elif (scaled := _block_scaled(op, graph)) is not None:
                dropped.add(op.name)
                added[op.name] = [scaled]
    if not added:
        return _restore_dtypes(_fold_vector_ops(ir), graph)
    out: list[IROp] = []
    for op in ops:
        if op.name in added:
            out += added[op.name]
        elif op.name not in dropped:
            out.append(op)
    folded = replace(ir, ops=_without_unread_dequantize(out, ir.outputs))
    return _restore_dtypes(_fold_vector_ops(folded), graph)


def _without_unread_dequantize(ops: list[IROp], outputs: list[str]) -> list[IROp]:
    """The ops less every DequantizeLinear whose result nothing reads any more (folded away)."""
    read = {o.tensor for op in ops for o in op.inputs} | set(outputs)
    return [op for op in ops if not (isinstance(op, Map) and isinstance(op.fn, Dequantize)
                                     and op.output.tensor not in read)]


class _Index:
    """Who writes and who reads each tensor, and the values known at compile time."""

    def __init__(self, ir: IR):
        self.ir = ir
        self.producer = {op.output.tensor: op for op in ir.ops}
        self.readers: dict[str, list[IROp]] = {}
        for op in ir.ops:
            for o in op.inputs:
                self.readers.setdefault(o.tensor, []).append(op)
        self.outputs = set(ir.outputs)

    def value(self, name: str) -> np.ndarray | None:
        if name in self.ir.constants:
            return np.asarray(self.ir.constants[name])
        value = self.ir.weights.get(name)
        return None if value is None else np.asarray(value)

    def known(self, name: str) -> np.ndarray:
        """The value of a tensor already found to have one."""
        value = self.value(name)
        assert value is not None, f"tensor {name!r} has no value known at compile time"
        return value

    def constant(self, name: str) -> bool:
        """Known at compile time, though maybe not loaded (a shape-only model's weights)."""
        return name in self.ir.constants or name in self.ir.weights

    def only_reader(self, tensor: str) -> IROp | None:
        readers = self.readers.get(tensor, [])
        return readers[0] if len(readers) == 1 and tensor not in self.outputs else None

    def dequantize(self, tensor: str) -> Map | None:
        op = self.producer.get(tensor)
        return op if isinstance(op, Map) and isinstance(op.fn, Dequantize) else None


@dataclass
class _Fold:
    einsum: Einsum
    data: Map                  # the DequantizeLinear of the data (input 0)
    weight: Map                # the DequantizeLinear of the weights (input 1)
    view: Move | None          # a grouped conv's view back to (N, K, P, Q)
    bias: Map | Operand | None  # the DequantizeLinear of an int32 bias, or a float bias (fp8 models)
    relu: bool
    quantize: Map              # the QuantizeLinear closing the pattern
    channel: int               # the output axis per-channel weight scales run along
    replaced: list[IROp]       # every op the fold takes the place of, in order


def _scalar(graph: _Index, operand: Operand | None) -> np.ndarray | None:
    """A per-tensor scale or zero point's value (absent zero point: 0); None if unknown or per axis."""
    if operand is None:
        return np.zeros(())
    value = graph.value(operand.tensor)
    return value.reshape(()) if value is not None and value.size == 1 else None


def _dequantizer(dq: Map) -> Dequantize:
    """The Dequantize a DequantizeLinear's Map applies (one _Index.dequantize found)."""
    assert isinstance(dq.fn, Dequantize), f"{dq.name} is no DequantizeLinear"
    return dq.fn


def _quantizer(q: Map) -> Quantize:
    """The Quantize a QuantizeLinear's Map applies (one the pattern matched by its fn)."""
    assert isinstance(q.fn, Quantize), f"{q.name} is no QuantizeLinear"
    return q.fn


def _zero_point(dq: Map) -> Operand | None:
    return dq.inputs[2] if len(dq.inputs) > 2 else None


def _match(op: Einsum, graph: _Index) -> _Fold | None:
    data, weight = graph.dequantize(op.inputs[0].tensor), graph.dequantize(op.inputs[1].tensor)
    if data is None or weight is None or len(op.inputs) != 2:
        return None
    x_fn, w_fn = _dequantizer(data), _dequantizer(weight)
    integer = x_fn.source in (DType.int8, DType.uint8) and w_fn.source in (DType.int8, DType.uint8, DType.int4)
    if not integer and not (x_fn.source in NARROW_FLOATS and w_fn.source in NARROW_FLOATS):
        return None
    if _scalar(graph, data.inputs[1]) is None or _scalar(graph, _zero_point(data)) is None or x_fn.block:
        return None
    if not graph.constant(weight.inputs[0].tensor) or w_fn.block:
        return None
    w_zero = _zero_point(weight)
    if w_zero is not None and (graph.value(w_zero.tensor) is None or np.any(graph.value(w_zero.tensor))):
        return None
    channel = _channel(op, weight, graph)
    if channel is None:
        return None
    replaced: list[IROp] = [op]
    view: Move | None = None
    bias: Map | Operand | None = None
    relu = False
    tensor = op.output.tensor
    while True:
        reader = graph.only_reader(tensor)
        if reader is None:
            return None
        if isinstance(reader, Move) and reader.view and reader.node == op.node:
            view = reader
        elif isinstance(reader, Map) and reader.node == op.node and reader.name.endswith(":bias") \
                and reader.ops_per_element == 1 and bias is None:
            bias = graph.dequantize(reader.inputs[1].tensor)
            if bias is None and not integer and graph.constant(reader.inputs[1].tensor):
                bias = reader.inputs[1]      # an fp8 model's float bias, added after the scales
            elif bias is None or not _bias_fits(bias, data, weight, graph):
                return None
        elif isinstance(reader, Map) and reader.op == "Relu" and not relu:
            relu = True
        elif isinstance(reader, Map) and isinstance(reader.fn, Quantize):
            if reader.inputs[0].tensor != tensor or _scalar(graph, reader.inputs[1]) is None \
                    or _scalar(graph, _zero_point(reader)) is None or _quantizer(reader).block:
                return None
            return _Fold(op, data, weight, view, bias, relu, reader, channel, replaced + [reader])
        else:
            return None
        replaced.append(reader)
        tensor = reader.output.tensor


def _channel(op: Einsum, weight: Map, graph: _Index) -> int | None:
    """The output axis the weight scale and the bias run along (1 for Conv, -1 for MatMul and Gemm); None if
    the scale runs along a reduced axis, which no epilogue can undo."""
    scale = graph.value(weight.inputs[1].tensor)
    if scale is None:
        return None
    if op.op == "Conv":
        return 1 if scale.size == 1 or _dequantizer(weight).axis == 0 else None
    if scale.size == 1:
        return -1
    axis = op.in_axes[1][_dequantizer(weight).axis]
    return -1 if len(axis.terms) == 1 and axis.terms[0][0] == "n" and axis.offset == 0 else None


def _bias_fits(bias: Map, data: Map, weight: Map, graph: _Index) -> bool:
    """An int32 bias with no zero point, quantized with the scale sx * sw (as onnxruntime's quantizer does)."""
    if _dequantizer(bias).source != DType.int32 or graph.value(bias.inputs[1].tensor) is None:
        return False
    zero = _zero_point(bias)
    if zero is not None and (graph.value(zero.tensor) is None or np.any(graph.value(zero.tensor))):
        return False
    want = (graph.known(data.inputs[1].tensor).astype(np.float32).reshape(())
            * graph.known(weight.inputs[1].tensor).astype(np.float32).reshape(-1))
    have = graph.known(bias.inputs[1].tensor).astype(np.float32).reshape(-1)
    return bool(np.allclose(have, want, rtol=1e-6, atol=0))


def _operand(graph: _Index, dq: Map, index: int, role: Role | None = None) -> Operand:
    """A DequantizeLinear's input (the stored values, scale or zero point) as an operand of a folded op."""
    source = dq.inputs[index]
    dtype = _dequantizer(dq).source if index != 1 else source.dtype
    role = role or (Role.weight if graph.value(source.tensor) is not None else Role.input)
    return Operand(source.tensor, source.shape, dtype, role)


def _rewrite(fold: _Fold, graph: _Index) -> list[IROp]:
    op, node = fold.einsum, fold.einsum.node
    x, w = _operand(graph, fold.data, 0), _operand(graph, fold.weight, 0, Role.weight)
    shape = fold.view.output.shape if fold.view else op.output.shape
    kind = DType.fp32 if x.dtype in NARROW_FLOATS else DType.int32     # fp8 products sum in fp32
    acc = Operand(f"{node}:acc_{kind.value}", shape, kind, Role.output)
    product = Operand(f"{node}:grouped_{kind.value}", op.output.shape, kind, Role.output) if fold.view else acc
    einsum = replace(op, inputs=(x, w), output=product, acc=kind)
    ops: list[IROp] = []
    x_zero = _zero_point(fold.data)
    corrected = kind == DType.int32 and x_zero is not None and bool(np.any(graph.value(x_zero.tensor)))
    sums = None
    if corrected:
        weights = graph.value(fold.weight.inputs[0].tensor)
        if weights is not None:
            k_axis = next(i for i, a in enumerate(op.in_axes[1]) if a.terms and a.terms[0][0] == "k") \
                if op.op != "Conv" else 0
            sums = weight_sums(weights, op.op == "Conv", len(shape), k_axis)
        if op.op == "Conv":
            ops, einsum = pad_with_zero_point(einsum, _operand(graph, fold.data, 2))
    ops.append(einsum)
    if fold.view:
        ops.append(replace(fold.view, inputs=(as_input(product),), output=acc))
    roles, inputs = ["x_scale"], [_operand(graph, fold.data, 1)]
    if corrected:
        roles.append("x_zero_point")
        inputs.append(_operand(graph, fold.data, 2))
    roles.append("w_scale")
    inputs.append(_operand(graph, fold.weight, 1))
    q = fold.quantize
    roles.append("y_scale")
    inputs.append(q.inputs[1])
    if len(q.inputs) > 2:
        roles.append("y_zero_point")
        inputs.append(q.inputs[2])
    if isinstance(fold.bias, Operand):
        roles.append("bias_float")
        inputs.append(fold.bias)
    elif fold.bias is not None:
        roles.append("bias")
        inputs.append(_operand(graph, fold.bias, 0, Role.weight))
    fn = Requantize(tuple(roles), _quantizer(q).dtype, fold.channel, sums, fold.relu, kind)
    output = replace(q.output, dtype=_quantizer(q).dtype)
    ops.append(Map(name=f"{node}:requantize", node=node, op=op.op, inputs=(as_input(acc), *inputs),
                   output=output, fn=fn, ops_per_element=fn.ops_per_element))
    return ops


# -- DequantizeLinear with blocks along k on both operands -> MatMul: one block-scaled Einsum ----------------------

def _block_scaled(op: Einsum, graph: _Index) -> Einsum | None:
    """A MatMul of two operands dequantized per block along the reduced axis (fp8 activations with a scale per
    token and 128 channels, fp8 weights with one per 128 input channels and output channel: DeepSeek-V3's
    scheme in ONNX's DequantizeLinear, opset 21) as one Einsum over the stored values and both scales, read per
    block (sx[m, k/128]); its float output is what the MatMul of the dequantized operands gives. None unless both
    are blocked along a reduced loop, integer ones with no zero point, both narrow floats or both integers."""
    if op.op == "Conv" or len(op.inputs) != 2:
        return None
    found = [graph.dequantize(o.tensor) for o in op.inputs]
    dqs = [dq for dq in found if dq is not None]
    if len(dqs) != len(found) or any(not _dequantizer(dq).block for dq in dqs):
        return None
    if (_dequantizer(dqs[0]).source in NARROW_FLOATS) != (_dequantizer(dqs[1]).source in NARROW_FLOATS):
        return None
    scale_axes = []
    for dq, axes in zip(dqs, op.in_axes):
        fn = _dequantizer(dq)
        axis = axes[fn.axis]
        zero = _zero_point(dq)
        if len(axis.terms) != 1 or axis.offset or axis.terms[0][1] != 1 or axis.terms[0][0] not in op.reduction_dims:
            return None
        if zero is not None and (graph.value(zero.tensor) is None or np.any(graph.value(zero.tensor))):
            return None
        scale_axes.append(tuple(replace(a, block=fn.block) if i == fn.axis else a for i, a in enumerate(axes)))

    def role(dq: Map, index: int) -> Role:       # weights known at compile time, if not loaded (shape-only models)
        return Role.weight if graph.constant(dq.inputs[index].tensor) else Role.input
    stored = tuple(_operand(graph, dq, 0, role(dq, 0)) for dq in dqs)
    # the scales as the model stored them (fp32), whatever dtype the quantize pass gave the float tensors
    scales = tuple(replace(_operand(graph, dq, 1, role(dq, 1)), dtype=_dequantizer(dq).dtype) for dq in dqs)
    return replace(op, inputs=stored + scales, in_axes=(*op.in_axes, *scale_axes), acc=DType.fp32)


# -- DequantizeLinear -> a vector op (Add, pooling...) -> QuantizeLinear: one op over the stored values ------------

@dataclass(frozen=True, eq=False)
class QuantizedOp:
    """A float vector op run on quantized inputs: those that were dequantized are dequantized inside (`plan[i]`:
    the Dequantize and its per-tensor scale and zero point, or None), the op applies, and its result is
    quantized. The same float arithmetic as the ops it replaces, so the same numbers, in one pass over memory;
    the per-tensor scales and zero points (a few bytes) travel with the op."""

    plan: tuple[tuple[Any, ...] | None, ...]
    inner: Callable[..., np.ndarray]
    quantize: tuple[Any, ...]

    @property
    def dtype(self) -> DType:
        quantizer: Quantize = self.quantize[0]
        return quantizer.dtype

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        values = [step[0](a, *step[1:]) if step is not None else a for step, a in zip(self.plan, arrays)]
        result: np.ndarray = self.quantize[0](self.inner(*values), *self.quantize[1:])
        return result


def _fold_vector_ops(ir: IR) -> IR:
    graph = _Index(ir)
    replaced: dict[str, IROp] = {}
    dropped: set[str] = set()
    for op in ir.ops:
        fused = _fuse_vector(op, graph) if isinstance(op, (Map, Reduce)) else None
        if fused is not None:
            replaced[op.name] = fused
            reader = graph.only_reader(op.output.tensor)
            assert reader is not None, f"{op.name} is fused with its one reader"
            dropped.add(reader.name)
    if not replaced:
        return ir
    ops = [replaced.get(op.name, op) for op in ir.ops if op.name not in dropped]
    return replace(ir, ops=_without_unread_dequantize(ops, ir.outputs))


def _constants(graph: _Index, op: Map) -> tuple[Any, ...] | None:
    """A per-tensor Quantize or Dequantize with its scale and zero point values; None if any is unknown."""
    values = [_scalar(graph, o) for o in op.inputs[1:]]
    assert isinstance(op.fn, (Quantize, Dequantize)), f"{op.name} is no QuantizeLinear or DequantizeLinear"
    if any(v is None for v in values) or op.fn.block:
        return None
    return (op.fn, *values)


def _fuse_vector(op: Map | Reduce, graph: _Index) -> IROp | None:
    if isinstance(op.fn, (Quantize, Dequantize, Requantize, QuantizedOp)):
        return None
    sources = [graph.dequantize(o.tensor) for o in op.inputs]
    plan = tuple(_constants(graph, dq) if dq is not None else None for dq in sources)
    if not any(sources) or any(dq is not None and step is None for dq, step in zip(sources, plan)):
        return None
    q = graph.only_reader(op.output.tensor)
    if not (isinstance(q, Map) and isinstance(q.fn, Quantize) and q.inputs[0].tensor == op.output.tensor):
        return None
    quantize = _constants(graph, q)
    if quantize is None:
        return None
    inputs = tuple(_operand(graph, dq, 0) if dq is not None else o for o, dq in zip(op.inputs, sources))
    fn = QuantizedOp(plan, op.fn, quantize)
    output = replace(q.output, dtype=_quantizer(q).dtype)
    # per element: 2 ops to dequantize each input, the op's own, 4 to quantize the result (a Reduce counts per
    # input element, so the quantizing is spread over the elements it reduces)
    dequantizing = 2 * sum(dq is not None for dq in sources)
    if isinstance(op, Map):
        return replace(op, inputs=inputs, output=output, fn=fn, ops_per_element=op.ops_per_element + dequantizing + 4)
    share = -(-4 * output.elements // max(op.inputs[0].elements, 1))
    return replace(op, inputs=inputs, output=output, fn=fn, ops_per_element=op.ops_per_element + dequantizing + share)


def _restore_dtypes(ir: IR, graph: _Index) -> IR:
    """Every quantized tensor (a QuantizeLinear's output, a DequantizeLinear's input, a requantised result) and
    every accumulator a requantisation reads in its own dtype: the quantize pass may have given it the target's
    dtype, but the model stored it narrower (or the hardware accumulates it wider)."""
    quantized: dict[str, DType] = {}
    accumulators: dict[str, DType] = {}
    for op in ir.ops:
        if isinstance(op, Map) and isinstance(op.fn, (Quantize, Requantize, QuantizedOp)):
            quantized[op.output.tensor] = op.fn.dtype
        if isinstance(op, Map) and isinstance(op.fn, Dequantize):
            quantized[op.inputs[0].tensor] = op.fn.source
        if isinstance(op, Map) and isinstance(op.fn, Requantize):
            quantized[op.inputs[0].tensor] = accumulators[op.inputs[0].tensor] = op.fn.accumulator

    for op in reversed(ir.ops):     # a grouped conv's accumulator reaches the requantisation through a view
        if isinstance(op, Move) and op.view and op.output.tensor in accumulators:
            quantized[op.inputs[0].tensor] = accumulators[op.inputs[0].tensor] = accumulators[op.output.tensor]

    def fix(o: Operand) -> Operand:
        dtype = quantized.get(o.tensor)
        return o if dtype is None or dtype == o.dtype else replace(o, dtype=dtype)
    if not quantized:
        return ir
    ops = []
    for op in ir.ops:
        op = replace(op, inputs=tuple(fix(o) for o in op.inputs), output=fix(op.output))
        if isinstance(op, Einsum) and op.output.tensor in accumulators:
            op = replace(op, acc=accumulators[op.output.tensor])
        ops.append(op)
    return replace(ir, ops=ops)
