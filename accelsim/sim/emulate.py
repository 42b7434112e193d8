"""A model's numerics at a Precision (accelsim.sim.precision), beside its reference.

A reference run records the absolute maximum of each product's operands and output (the calibration, on the inputs
given; at int8 on the graph as deployed, accelsim.sim.deploy); a second run rounds every product's operands to the
precision, accumulates exactly as wide as the hardware and rounds or requantises its result. Between products, int8
runs the other ops in fp32 on the dequantised values; bf16, fp16 and fp8 store what an op computes on rounded results
in the dtype, except the ops autocast keeps in fp32.
Invariant: at fp32 the second run is the reference, value for value.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from accelsim.sim.deploy import fold_batchnorm
from accelsim.sim.precision import (FP8_MAX, INT8_MAX, INT8_MIN, OutputError, Precision, native, output_error,
                                   precision)
from compiler.dtypes import DType
from compiler.graph import Graph
from compiler.ops.interpret import run_graph
from compiler.ops.room import Budget
from compiler.ops.shapes import opdef
from compiler.hardware import Arch

PRODUCTS = ("MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum")
# What PyTorch's autocast runs in fp32 whatever its inputs (its fp32 list, by ONNX names): the results stay fp32, and
# so does what computes on them, until the next product rounds its operands again.
FP32_OPS = frozenset({
    "Softmax", "LogSoftmax", "LayerNormalization", "GroupNormalization", "InstanceNormalization", "RMSNormalization",
    "LpNormalization", "MeanVarianceNormalization", "Exp", "Log", "Pow", "Reciprocal", "Softplus", "Acos", "Asin",
    "Cosh", "Sinh", "Tan", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceSumSquare", "CumSum", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "Cast"})


@dataclass(frozen=True)
class Emulation:
    """Both runs' outputs, and which ops ran how: products at the precision, other ops stored in the dtype (`low`,
    floats only) or kept in fp32."""

    precision: Precision
    reference: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    products: Counter
    low: Counter
    fp32: Counter
    fused: Counter = field(default_factory=Counter)   # int8: activations applied to the sums, then requantised
    folded: int = 0                 # int8: BatchNormalizations folded into the Conv before them

    @property
    def errors(self) -> list[OutputError]:
        return [output_error(name, self.reference[name], self.outputs[name]) for name in self.reference]

    def summary(self) -> str:
        """What ran at which precision, by op type: the lines printed before the error table."""
        lines = [f"--dtype {self.precision.dtype.value}: {self.precision.describe()}"]
        if not self.precision.exact:
            rounded = "int8" if self.precision.integer else self.precision.operands.value
            lines.append(f"  products at {rounded}: {_counts(self.products)}")
            if self.folded:
                lines.append(f"  folded into the Conv before them: BatchNormalization {self.folded}")
            if self.fused:
                lines.append(f"  fused into the requantisation: {_counts(self.fused)}")
            if self.low:
                lines.append(f"  stored in {self.precision.outputs.value}: {_counts(self.low)}")
            lines.append(f"  in fp32: {_counts(self.fp32)}")
        return "\n".join(lines) + "\n"


def _counts(counter: Counter) -> str:
    return ", ".join(f"{op} {n}" for op, n in counter.most_common()) or "none"


def evaluate_at(model: str | os.PathLike | Graph, at: str | DType | None = None,
                arch: str | os.PathLike[str] | Arch | None = None, inputs: dict[str, np.ndarray] | None = None,
                seed: int = 0, batch: int | None = None,
                **model_options) -> Emulation:
    """`model`'s outputs at dtype `at` (by default `arch`'s native one; accumulated as `arch`'s matrix units do, if
    given) and in its own dtypes, on `inputs` (random, seeded, where none given); the scales int8 and fp8 need
    come from these inputs. `model_options` are the model's own (dtype=fp16 builds a zoo model in fp16)."""
    from accelsim.sim.api import eval_inputs
    from accelsim.sim.inputs import eval_budget
    from accelsim.sim.model import load_arch

    hw = load_arch(arch) if arch is not None else None
    chosen = precision(at if at is not None or hw is None else native(hw), hw)
    budget = eval_budget()
    graph, feeds = eval_inputs(model, inputs, seed, batch, budget, **model_options)
    return emulate(graph, feeds, chosen, budget)


def emulate(graph: Graph, feeds: dict[str, np.ndarray], chosen: Precision, budget: Budget | None = None) -> Emulation:
    """`graph` run as given (the reference) and at `chosen`; int8 runs it as deployed: BatchNormalization folded into
    the Conv before it (accelsim.sim.deploy), scales measured on that graph in fp32."""
    deployed, folded = fold_batchnorm(graph) if chosen.integer else (graph, 0)
    amax: dict[str, float] = {}

    def calibrating(node, args):
        results = opdef(deployed, node).reference(node, args)
        named = list(zip(node.outputs, results))
        if is_product(deployed, node):
            named += [(node.inputs[0], args[0]), (node.inputs[1], args[1])]
        for name, value in named:
            value = np.asarray(value)
            if name and value.dtype.kind == "f":
                amax[name] = float(np.max(np.abs(value))) if value.size else 0.0
        return results

    if deployed is graph:
        reference = run_graph(graph, feeds, budget, calibrating)
    else:                      # the error is against the model as given, the scales are the deployed graph's
        reference = run_graph(graph, feeds, budget)
        run_graph(deployed, feeds, budget, calibrating)
    run = _Run(deployed, chosen, amax)
    outputs = run_graph(deployed, feeds, budget, run.step)
    return Emulation(chosen, reference, outputs, run.products, run.low_ops, run.fp32_ops, run.fused_ops, folded)


def is_product(graph: Graph, node) -> bool:
    """A node whose multiply-accumulates run on a matrix unit, on two float operands (an integer product is
    already at its precision)."""
    if node.op not in PRODUCTS or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return False
    if node.op == "Einsum" and len(node.inputs) != 2:
        return False
    return all(name and graph.tensor(name).dtype.is_float for name in node.inputs[:2])


class _Run:
    """The second run's step: a product at the precision, any other node as its reference (then stored in the
    dtype where autocast would)."""

    def __init__(self, graph: Graph, chosen: Precision, amax: dict[str, float]):
        self.graph, self.precision, self.amax = graph, chosen, amax
        self.low: set[str] = set()          # tensors held in the dtype (floats)
        self.products, self.low_ops, self.fp32_ops, self.fused_ops = Counter(), Counter(), Counter(), Counter()
        self.fused = fused_relus(graph) if chosen.integer else {}

    def step(self, node, args) -> list[np.ndarray]:
        if not self.precision.exact and is_product(self.graph, node):
            self.products[node.op] += 1
            self.low.add(node.outputs[0])
            return [self._product(node, args)]
        results = opdef(self.graph, node).reference(node, args)
        if node.inputs and self.fused.get(node.inputs[0]) == node.outputs[0]:
            self.fused_ops[node.op] += 1                # applied before the requantisation: nothing left to do
            return results
        floats = [i for i, name in enumerate(node.outputs) if name and self.graph.tensor(name).dtype.is_float]
        if not floats:
            return results
        if self.precision.exact or self.precision.integer or not self._stays_low(node):
            self.fp32_ops[node.op] += 1
            return results
        self.low_ops[node.op] += 1
        results = list(results)
        for i in floats:
            results[i] = round_to(results[i], self.precision.outputs)
            self.low.add(node.outputs[i])
        return results

    def _stays_low(self, node) -> bool:
        """Autocast's rule: an op not on the fp32 list computes in the dtype of its inputs, fp32 if any is fp32.
        Runtime inputs are fp32; weights and constants make no op fp32 (a Python scalar under autocast)."""
        if node.op in FP32_OPS:
            return False
        acts = [name for name in node.inputs if name and name not in self.graph.weights
                and name not in self.graph.constants and self.graph.tensor(name).dtype.is_float]
        return bool(acts) and all(name in self.low for name in acts)

    def _product(self, node, args) -> np.ndarray:
        p = self.precision
        qa, scale_a = self._operand(node, 0, args[0])
        qb, scale_b = self._operand(node, 1, args[1], qa.ndim)
        acc = _raw_product(self.graph, node, qa, qb)
        scale = scale_a * scale_b * float(node.attr("alpha", 1.0) if node.op == "Gemm" else 1.0)
        bias = _bias(node, args, acc.ndim)
        if p.integer:
            acc = np.rint(acc).astype(np.int64)         # exact: float64 holds these sums of int8 products
            if bias is not None:                       # the bias enters the accumulator at its scale, as int32
                acc = acc + np.rint(bias.astype(np.float64) / scale).astype(np.int64)
            acc = wrap(acc, p.accumulator_bits)
            relu = self.fused.get(node.outputs[0])
            if relu:                                   # requantised after the ReLU, at its output's scale
                acc = np.maximum(acc, 0)
            out_scale = _scale(self.amax[relu or node.outputs[0]], INT8_MAX)
            return np.clip(np.rint(acc * (scale / out_scale)), INT8_MIN, INT8_MAX) * out_scale
        y = acc if np.all(scale == 1.0) else acc * np.asarray(scale, dtype=acc.dtype)
        if bias is not None:        # autocast casts the bias too; the epilogue adds it to the sums in fp32
            y = y + round_to(bias, p.outputs).astype(acc.dtype)
        return round_to(y, p.outputs)

    def _operand(self, node, index: int, value: np.ndarray, a_rank: int = 0) -> tuple[np.ndarray, np.ndarray | float]:
        """The operand rounded to the precision, in the type the sum is exact or fp32/fp64 in, and the scale its
        values carry (broadcast to the product's output for a per-channel weight)."""
        p = self.precision
        work = np.float64 if p.integer or p.accumulator_bits == 64 else np.float32
        value = np.asarray(value, dtype=work)
        if p.integer:
            weight = index == 1 and self.graph.value(node.inputs[1]) is not None
            channels = channel_scales(node, value, a_rank) if weight else None
            divide, carried = channels if channels is not None else (_scale(self.amax[node.inputs[index]],
                                                                            INT8_MAX),) * 2
            return np.clip(np.rint(value / divide), INT8_MIN, INT8_MAX), carried
        if p.scaled:
            limit = FP8_MAX[p.operands]
            scale = _scale(self.amax[node.inputs[index]], limit)
            return round_to(np.clip(value / work(scale), -limit, limit), p.operands).astype(work), scale
        return round_to(value, p.operands).astype(work), 1.0


def fused_relus(graph: Graph) -> dict[str, str]:
    """A product's output read only by a Relu -> the Relu's output: an int8 kernel applies the ReLU to its sums and
    requantises at the ReLU's output scale, as deployments fuse them."""
    uses = Counter(name for node in graph.nodes for name in node.inputs if name) + Counter(graph.outputs)
    producers = graph.producers()
    return {node.inputs[0]: node.outputs[0] for node in graph.nodes
            if node.op == "Relu" and uses[node.inputs[0]] == 1 and node.inputs[0] in producers
            and is_product(graph, producers[node.inputs[0]])}


def channel_scales(node, w: np.ndarray, a_rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """A weight's int8 scales per output channel: (shaped to divide the weight, shaped to scale the product's
    output); None where the op's output has no channel axis eval knows (ConvTranspose, Einsum, a vector operand)."""
    if node.op == "Conv":
        divide = _scale(np.max(np.abs(w), axis=tuple(range(1, w.ndim)), keepdims=True), INT8_MAX)
        return divide, divide.reshape((-1,) + (1,) * (w.ndim - 2))      # [M, 1, ...] against [N, M, ...]
    if node.op == "MatMul" and w.ndim >= 2 and a_rank >= 2:
        divide = _scale(np.max(np.abs(w), axis=-2, keepdims=True), INT8_MAX)   # [..., 1, N]
        return divide, divide
    if node.op == "Gemm":
        axis = 1 if node.attr("transB", 0) else 0                       # B is [K, N], or [N, K] transposed
        divide = _scale(np.max(np.abs(w), axis=axis, keepdims=True), INT8_MAX)
        return divide, divide.reshape(1, -1)
    return None


def _raw_product(graph: Graph, node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sums of products of the rounded operands, without bias, alpha or scales."""
    if node.op == "Gemm":
        return np.matmul(a.T if node.attr("transA", 0) else a, b.T if node.attr("transB", 0) else b)
    return np.asarray(opdef(graph, node).reference(node, [a, b])[0])


def _bias(node, args, rank: int) -> np.ndarray | None:
    """What is added to the sums: Conv's and ConvTranspose's bias per channel, Gemm's beta * C."""
    if len(args) < 3 or args[2] is None:
        return None
    if node.op in ("Conv", "ConvTranspose"):
        return np.asarray(args[2]).reshape((-1,) + (1,) * (rank - 2))
    if node.op == "Gemm" and float(node.attr("beta", 1.0)) != 0:
        return float(node.attr("beta", 1.0)) * np.asarray(args[2], dtype=np.float64)
    return None


def _scale(amax, limit: float):
    """The symmetric scale mapping `amax` onto `limit` (1 where the values are all zero)."""
    amax = np.asarray(amax, dtype=np.float64)
    scale = np.where(amax > 0, amax / limit, 1.0)
    return float(scale) if scale.ndim == 0 else scale


def wrap(acc: np.ndarray, bits: int) -> np.ndarray:
    """Integer sums as a `bits`-wide two's-complement accumulator holds them: modulo 2**bits, whatever the order
    of the additions (an adder wraps; a saturating accumulator is not emulated)."""
    if bits >= 53:         # float64 held the sums exactly, so they lie within 2**53: nothing wraps
        return acc
    half = 1 << (bits - 1)
    return (acc + half) % (1 << bits) - half


def round_to(value: np.ndarray, dtype: DType) -> np.ndarray:
    """`value` rounded to `dtype` (round to nearest, ties to even; fp16 and bf16 overflow to inf), held in float32."""
    value = np.asarray(value)
    if dtype == DType.fp16:
        return value.astype(np.float16).astype(np.float32)
    if dtype.narrow is not None:
        return value.astype(dtype.narrow).astype(np.float32)
    return value.astype(np.float32)
