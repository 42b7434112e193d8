"""Sharding layouts of tensors across a tensor-parallel group, and the rule per op that propagates them.

A tensor is replicated (R: every rank holds it whole and alike), split (S(a): rank r holds slice r of axis a), a
partial sum (P: the ranks' tensors add up to it, as a row-parallel matmul leaves it), or local (L: a per-rank value
that is no slice of a whole one, such as a quantiser's scale computed from the rank's own shard).
Invariant: a rule only ever returns layouts in which every rank's op, run on its local inputs, computes its part of
the op's output (the slice, the partial sum, or the whole); when no such layout exists it asks for replicated inputs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from compiler.graph import Node
from compiler.ops.base import normalize_axis
from compiler.ops.einsum import parse


@dataclass(frozen=True)
class Layout:
    kind: str                    # "R", "S", "P" or "L"
    axis: int | None = None      # the split axis of an S

    def __str__(self) -> str:
        return f"S({self.axis})" if self.kind == "S" else self.kind

    @property
    def split_axis(self) -> int:
        """The split axis of an S (a rule asks only once it knows the kind)."""
        assert self.axis is not None, f"layout {self} has no split axis"
        return self.axis

    @property
    def sharded(self) -> bool:
        """Each rank holds a different part (a slice or a partial sum)."""
        return self.kind in ("S", "P")


R, P, L = Layout("R"), Layout("P"), Layout("L")


def S(axis: int) -> Layout:
    return Layout("S", axis)


ELEMENTWISE = frozenset({
    "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Floor",
    "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "LeakyRelu", "Less", "LessOrEqual",
    "Log", "Max", "Mean", "Min", "Mod", "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "Relu", "Round", "Selu",
    "Sigmoid", "Sign", "Softplus", "Sqrt", "Sub", "Sum", "Tanh", "Where", "Xor"})
VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"})
PRODUCTS = frozenset({"MatMul", "Gemm", "Einsum", "MatMulInteger"})
REDUCTIONS = frozenset({"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"})
LINEAR_REDUCTIONS = frozenset({"ReduceSum", "ReduceMean"})
BATCH_LETTERS = "ABCDEFGHIJ"


@dataclass
class Site:
    """What a rule sees of one node: its inputs' layouts and global shapes, and the questions only the pass answers."""

    node: Node
    ins: list[Layout]                         # per input ('' inputs: R)
    in_shapes: list[tuple[int, ...] | None]
    out_shapes: list[tuple[int, ...]]
    static: list[bool]                        # per input: computed from weights and constants alone
    value_inputs: tuple[int, ...]             # inputs read for their values at compile time (shapes, axes)
    tp: int
    sequence: bool                            # sequence parallelism: token-wise ops run on S(token axis)
    opset: int
    value: Callable[[str], np.ndarray | None]
    scale: Callable[[str], bool]              # the tensor is (or leads to) a quantiser's scale
    column: Callable[[Node, int], bool]       # whether to split this product's output features (may refuse)
    grouped: bool = False                     # the model's channel groups are the split (AlexNet's two GPUs)

    def token_axis(self, shape: tuple[int, ...]) -> int | None:
        """Sequence parallelism's axis for an activation [batch, tokens, width]: the tokens, else the batch (a
        class token makes ViT's token count odd), when the degree divides it."""
        if not self.sequence or len(shape) != 3:
            return None
        return next((a for a in (1, 0) if shape[a] > 1 and shape[a] % self.tp == 0), None)

    def in_shape(self, i: int) -> tuple[int, ...]:
        """Input `i`'s global shape (a rule reads only the inputs that are given)."""
        shape = self.in_shapes[i]
        assert shape is not None, f"{self.node.name}: input {i} is not given"
        return shape


@dataclass
class Decision:
    wants: Sequence[Layout | None]    # per input, the layout it must arrive in (None: as it is)
    outs: list[Layout]
    attrs: dict[str, Any] = field(default_factory=dict)   # what the rank's node takes instead (a grouped Conv's group)


def decide(site: Site) -> Decision:
    op = site.node.op
    if op in PRODUCTS:
        return product(site)
    rule = RULES.get(op, replicated) if op not in ELEMENTWISE else elementwise
    return rule(site)


def replicated(site: Site) -> Decision:
    """Every input whole, every output whole: correct for any op, and parallel in nothing."""
    wants = [None if i in site.value_inputs or not name else R for i, name in enumerate(site.node.inputs)]
    return Decision(wants, [R] * len(site.out_shapes))


def _present(site: Site) -> list[int]:
    return [i for i, name in enumerate(site.node.inputs) if name and i not in site.value_inputs]


def _aligned(shape: tuple[int, ...], out: tuple[int, ...], axis: int) -> int | None:
    """The input axis under output `axis` by numpy broadcasting, or None where the input is broadcast along it."""
    a = axis - (len(out) - len(shape))
    return a if a >= 0 and shape[a] == out[axis] else None


def _keeps_partial(site: Site) -> bool:
    """Ops linear in their partial-sum inputs: sum_r f(x_r) = f(sum_r x_r)."""
    kinds = [site.ins[i].kind for i in _present(site)]
    op = site.node.op
    if op in ("Identity", "Cast", "Neg"):
        return kinds[0] == "P"
    if op == "Mul":
        return kinds.count("P") == 1 and all(k in "PRL" for k in kinds)
    if op == "Div":
        return kinds[0] == "P" and all(k in "RL" for k in kinds[1:])
    if op in ("Add", "Sub"):
        return all(k == "P" for k in kinds)
    return False


def elementwise(site: Site) -> Decision:
    out = site.out_shapes[0]
    present = _present(site)
    if any(site.ins[i].kind == "P" for i in present) and _keeps_partial(site):
        return Decision([None] * len(site.ins), [P] * len(site.out_shapes))
    split = [site.ins[i].split_axis + len(out) - len(site.in_shape(i)) for i in present if site.ins[i].kind == "S"]
    target = split[0] if split else None
    if target is None and any(site.ins[i].kind == "P" for i in present):
        target = site.token_axis(out)
    elif target is None and _starts_sequence(site, present):
        target = site.token_axis(out)
    if target is None:
        wants: list[Layout | None] = [R if i in present and site.ins[i].kind in "SP" else None
                                      for i in range(len(site.ins))]
        local = any(site.ins[i].kind == "L" for i in present)
        return Decision(wants, [L if local else R] * len(site.out_shapes))
    wants = [None] * len(site.ins)
    for i in present:
        a = _aligned(site.in_shape(i), out, target)
        if site.ins[i].kind == "L":
            if a is not None:
                return _whole(site)
            continue
        wants[i] = S(a) if a is not None else R
    return Decision(wants, [S(target)] * len(site.out_shapes))


def _whole(site: Site) -> Decision:
    """Gather every split input and compute whole (a local value meets a split axis it does not broadcast along)."""
    wants = [R if site.ins[i].sharded else None for i in range(len(site.ins))]
    return Decision(wants, [L if any(x.kind == "L" for x in site.ins) else R] * len(site.out_shapes))


def _starts_sequence(site: Site, present: list[int]) -> bool:
    """A token-wise op on replicated activations under sequence parallelism: it runs on 1/tp of the tokens (the
    embeddings' sum and the first norm, where Megatron scatters the sequence)."""
    out = site.out_shapes[0]
    axis = site.token_axis(out)
    if axis is None:
        return False
    return all(site.ins[i].kind in "RL" for i in present) and any(
        not site.static[i] and _aligned(site.in_shape(i), out, axis) is not None for i in present)


def reshape_axis(source: tuple[int, ...], target: tuple[int, ...], axis: int, tp: int) -> int | None:
    """Where split axis `axis` of `source` lands in `target` after a reshape (row-major order kept): the first target
    axis of size > 1 after the same number of leading elements, if the degree divides it; else None."""
    before = math.prod(source[:axis])
    for b in range(len(target)):
        if math.prod(target[:b]) == before and target[b] > 1:
            return b if target[b] % tp == 0 else None
        if math.prod(target[:b]) > before:
            return None
    return None


def view(site: Site) -> Decision:
    x = site.ins[0]
    wants: list[Layout | None] = [None] * len(site.ins)
    if x.kind != "S":
        return Decision(wants, [x])
    if site.node.op == "Transpose":
        rank = len(site.in_shape(0))
        perm = [int(p) for p in site.node.attr("perm", list(range(rank))[::-1])]
        return Decision(wants, [S(perm.index(x.split_axis))])
    b = reshape_axis(site.in_shape(0), site.out_shapes[0], x.split_axis, site.tp)
    if b is None:
        wants[0] = R
        return Decision(wants, [R])
    return Decision(wants, [S(b)])


def keep_split(site: Site, free: Callable[[int], bool], shift: Callable[[int], int] = lambda a: a) -> Decision:
    """An op that works along some axes: a split on any other axis carries through (moved by `shift`)."""
    x = site.ins[0]
    wants: list[Layout | None] = [None] * len(site.ins)
    for i in _present(site)[1:]:
        wants[i] = R
    if x.kind == "S" and free(x.split_axis):
        return Decision(wants, [S(shift(x.split_axis))] * len(site.out_shapes))
    if x.kind in "RL":
        return Decision(wants, [x] * len(site.out_shapes))
    wants[0] = R
    return Decision(wants, [R] * len(site.out_shapes))


def softmax(site: Site) -> Decision:
    rank = len(site.in_shape(0))
    axis = normalize_axis(site.node, int(site.node.attr("axis", -1 if site.opset >= 13 else 1)), rank)
    return keep_split(site, lambda a: a != axis if site.opset >= 13 else a < axis)


def layer_norm(site: Site) -> Decision:
    rank = len(site.in_shape(0))
    axis = normalize_axis(site.node, int(site.node.attr("axis", -1)), rank)
    x = site.ins[0]
    if x.kind in "RP":
        token = site.token_axis(site.in_shape(0))
        if token is not None and token < axis and (x.kind == "P" or not site.static[0]):
            return Decision([S(token)] + [R] * (len(site.ins) - 1), [S(token)] * len(site.out_shapes))
    return keep_split(site, lambda a: a < axis)


def reduction(site: Site) -> Decision:
    node, shape = site.node, site.in_shape(0)
    listed = node.attr("axes")
    if listed is None and len(node.inputs) > 1 and node.inputs[1]:
        listed = np.asarray(site.value(node.inputs[1])).reshape(-1).tolist()
    if not listed and node.attr("noop_with_empty_axes", 0):
        return Decision([None] * len(site.ins), [site.ins[0]])
    axes = sorted({normalize_axis(node, int(a), len(shape)) for a in listed}) if listed else list(range(len(shape)))
    keep = bool(node.attr("keepdims", 1))
    x = site.ins[0]
    wants: list[Layout | None] = [None] * len(site.ins)
    if x.kind == "P" and node.op in LINEAR_REDUCTIONS:
        return Decision(wants, [P])
    if x.kind == "S" and x.axis not in axes:
        return Decision(wants, [S(x.split_axis if keep else x.split_axis - sum(a < x.split_axis for a in axes))])
    if x.kind == "S" and node.op == "ReduceSum":
        return Decision(wants, [P])
    if x.kind == "S" and site.scale(node.outputs[0]):
        return Decision(wants, [L])       # a quantiser's scale over the rank's own shard (BitNet's absmean)
    if x.kind in "RL":
        return Decision(wants, [x])
    wants[0] = R
    return Decision(wants, [R])


def gather(site: Site) -> Decision:
    data, indices = site.ins[0], site.ins[1]
    axis = normalize_axis(site.node, int(site.node.attr("axis", 0)), len(site.in_shape(0)))
    if data.kind == "S" and data.axis != axis:
        shifted = data.split_axis if data.split_axis < axis else data.split_axis + len(site.in_shape(1)) - 1
        return Decision([None, R], [S(shifted)])
    if data.kind == "R" and indices.kind == "S":
        return Decision([None, None], [S(axis + indices.split_axis)])
    if _vocabulary(site, axis):
        return Decision([S(axis), R], [P])
    return Decision([R, R], [R])


def _vocabulary(site: Site, axis: int) -> bool:
    """A lookup of ids the model is given (not constant positions) in a weight table whose rows the degree divides
    and which has at least as many rows as each row has entries (a vocabulary, not BERT's two token types): split
    by its rows, each rank looking up its own (compiler/parallel/vocab.py), as Megatron's VocabParallelEmbedding."""
    data, shape = site.ins[0], site.in_shape(0)
    rows = shape[axis]
    return (site.static[0] and not site.static[1] and site.ins[1].kind == "R" and data in (R, S(axis))
            and rows % site.tp == 0 and rows * rows >= math.prod(shape))


def concat(site: Site) -> Decision:
    axis = normalize_axis(site.node, int(site.node.attr("axis")), len(site.out_shapes[0]))
    split = [x.split_axis for x in site.ins if x.kind == "S" and x.axis != axis]
    if not split or any(x.kind == "L" for x in site.ins):
        return Decision([R] * len(site.ins), [R])
    return Decision([S(split[0])] * len(site.ins), [S(split[0])])


def slice_(site: Site) -> Decision:
    node, rank = site.node, len(site.in_shape(0))
    if "starts" in node.attrs:
        listed, count = node.attrs.get("axes"), len(node.attrs["starts"])
    else:
        given = node.inputs[3] if len(node.inputs) > 3 and node.inputs[3] else ""
        listed = None if not given else np.asarray(site.value(given)).reshape(-1).tolist()
        count = np.asarray(site.value(node.inputs[1])).size
    axes = {normalize_axis(node, int(a), rank) for a in (listed if listed is not None else range(count))}
    return keep_split(site, lambda a: a not in axes)


def split(site: Site) -> Decision:
    axis = normalize_axis(site.node, int(site.node.attr("axis", 0)), len(site.in_shape(0)))
    return keep_split(site, lambda a: a != axis)


def expand(site: Site) -> Decision:
    shift = len(site.out_shapes[0]) - len(site.in_shape(0))
    return keep_split(site, lambda a: True, lambda a: a + shift)


def tensor_scatter(site: Site) -> Decision:
    """A KV-cache write: the cache and the update split alike on an axis other than the batch's and the one written
    along (a decoder's heads) keep that split; the write positions are per batch entry, whole."""
    axis = normalize_axis(site.node, int(site.node.attr("axis", -2)), len(site.out_shapes[0]))
    update = site.ins[1]
    if update.kind != "S" or update.axis in (0, axis):
        return replicated(site)
    wants: list[Layout] = [S(update.split_axis), S(update.split_axis)] + [R] * (len(site.ins) - 2)
    return Decision(wants, [S(update.split_axis)])


RULES: dict[str, Callable[[Site], Decision]] = {
    **{op: view for op in VIEWS}, "Softmax": softmax, "LogSoftmax": softmax, "LayerNormalization": layer_norm,
    **{op: reduction for op in REDUCTIONS}, "Gather": gather, "Concat": concat, "Slice": slice_, "Split": split,
    "Expand": expand, "TensorScatter": tensor_scatter}


# -- products: MatMul, Gemm, two-operand Einsum, MatMulInteger -------------------------------------------------------

def terms(site: Site) -> tuple[list[Sequence[str | None]], list[str]] | None:
    """Per product operand a letter per axis (None: broadcast along an output axis), and the output's letters."""
    node, (a, b), y = site.node, site.in_shapes[:2], site.out_shapes[0]
    if node.op == "Gemm":
        ta = ["k", "m"] if node.attr("transA", 0) else ["m", "k"]
        tb = ["n", "k"] if node.attr("transB", 0) else ["k", "n"]
        return [ta, tb], ["m", "n"]
    if node.op == "Einsum" and len([i for i in node.inputs if i]) != 2:
        return None
    assert a is not None and b is not None, f"{node.name}: a product's operands are given"
    if node.op == "Einsum":
        letters, result, _ = parse(node, [a, b])
        return [list(letters[0]), list(letters[1])], list(result)
    batch = BATCH_LETTERS[:len(y) - (len(a) > 1) - (len(b) > 1)]

    def side(shape: tuple[int, ...], tail: list[str | None]) -> list[str | None]:
        if len(shape) == 1:
            return ["k"]
        lead = [c if shape[i] == y[len(batch) - (len(shape) - 2) + i] else None
                for i, c in enumerate(batch[len(batch) - (len(shape) - 2):])]
        return lead + tail
    return [side(a, ["m", "k"]), side(b, ["k", "n"])], list(batch) + ["m"] * (len(a) > 1) + ["n"] * (len(b) > 1)


def product(site: Site) -> Decision:
    named = terms(site)
    if named is None or len(site.ins) < 2:
        return replicated(site)
    letters, result = named
    lay = [R if x.kind == "P" else x for x in site.ins[:2]]
    if any(x.kind == "L" for x in lay):
        return replicated(site)
    if site.static[0] != site.static[1]:
        return _with_weight(site, letters, result, lay, w=0 if site.static[0] else 1)
    split = {letters[i][x.split_axis] for i, x in enumerate(lay) if x.kind == "S"}
    if len(split) != 1:
        return replicated(site)
    c = split.pop()
    wants = [S(t.index(c)) if c in t else R for t in letters]
    out = S(result.index(c)) if c in result else P
    return _finish(site, wants, out, result, c)


def _with_weight(site: Site, letters: list[Sequence[str | None]], result: list[str], lay: list[Layout],
                 w: int) -> Decision:
    """A product with a weight operand: row-parallel when the activation is split on a summed letter the weight
    has (the weight is split alike and the output is a partial sum), else column-parallel on the weight's own
    output letter (the activation whole, the output split), else replicated."""
    x = 1 - w
    extents = dict(zip(letters[w], site.in_shape(w)))
    if lay[x].kind == "S":
        c = letters[x][lay[x].split_axis]
        if c not in result and c in letters[w] and not _has_bias(site):
            wants: list[Layout | None] = [None, None]
            wants[w] = S(letters[w].index(c))
            return _finish(site, wants, P, result, c)
    features = [c for c in result if c in letters[w] and c not in letters[x]]
    if features and site.column(site.node, extents[features[-1]]):
        c = features[-1]
        wants = [None, None]
        wants[w], wants[x] = S(letters[w].index(c)), R
        return _finish(site, wants, S(result.index(c)), result, c)
    return replicated(site)


def _has_bias(site: Site) -> bool:
    return site.node.op == "Gemm" and len(site.node.inputs) > 2 and bool(site.node.inputs[2])


def _finish(site: Site, wants: Sequence[Layout | None], out: Layout, result: list[str], c: str | None) -> Decision:
    """The product's decision with its other inputs: Gemm's C split with the output or broadcast along it (added
    once per rank, so never to a partial sum), MatMulInteger's zero points whole."""
    rest: list[Layout | None] = [R if name else None for name in site.node.inputs[2:]]
    if _has_bias(site):
        if out.kind == "P":
            return replicated(site)
        a = _aligned(site.in_shape(2), site.out_shapes[0], out.split_axis)
        rest[0] = S(a) if a is not None else R
    return Decision(list(wants) + rest, [out])
