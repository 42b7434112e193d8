"""Tensor parallelism, Megatron-LM style (Shoeybi et al. 2019; sequence parallelism: Korthikanti et al. 2022): one
rank's share of a model, with the collectives that share implies, found by propagating layouts over the Graph.

Every tensor is replicated (R), split on an axis (S(a)) or a partial sum (P) (compiler/parallel/layout.py). A product
with a weight whose activation is whole is column-parallel (weight and bias split on the output features); one whose
activation is split on the summed axis is row-parallel (the weight split on its input features) and leaves a partial
sum, all-reduced before anything that is not linear in it. Element-wise ops, head reshapes, transposes, attention's
batched products and softmax keep the split; convolutional layers split by channel (compiler/parallel/channels.py:
AlexNet's two-GPU split, with `groups`); anything else runs replicated (correct, not parallel). A replicated
tensor read by split computations enters through ParallelEnter (its gradient is all-reduced). With sequence
parallelism the all-reduce becomes a reduce-scatter over the tokens and ParallelEnter an all-gather of them, so norms
and residuals run on 1/tp of the tokens (of the batch where tp does not divide the tokens, ViT's 197; where it divides
neither, that tensor stays as without sequence parallelism).
A token embedding (a lookup of the model's ids in a table with at least as many rows as columns, rows the degree
divides) is split by vocabulary rows, Megatron's VocabParallelEmbedding (compiler/parallel/vocab.py): each rank looks
up the ids in its range, zeros elsewhere, and one all-reduce (reduce-scatter over the tokens) sums the ranks' rows.
A weight is stored split when every node reading it wants the same split, else whole and sliced by a Shard (GPT-2's
tied embedding is split by rows for both its lookup and its LM head). A quantiser's scale over a split tensor is
the rank's own (BitNet's absmean of a weight shard, the absmax of a row-parallel input's features), so a BitNet split
this way computes close to, not exactly, what it computes whole. Graph outputs are gathered whole (the logits over
the vocabulary, a pooler's features; a training step's cross-entropy reads the logits' shards instead and drops the
gather, compiler/train/step.py), except per-head tensors [batch, heads, tokens, head_dim] (a decoder's KV
cache): a rank keeps its own heads, as Megatron's inference keeps its cache, and a per-head input the ranks read split
(the past keys and values) is given to each rank as its own heads, never whole. A head or classifier whose outputs tp
does not divide stays whole; heads or an MLP width it does not divide are an error that names them.
Invariant: the tp ranks' graphs (the same nodes, weights sliced by rank, the lookup's first row the rank's own), run
together on the model's inputs (a per-head input sliced by rank), compute the model's outputs, and their training
steps compute its gradients, each parameter's sliced as the parameter is (with `groups`, those of the model with
each LRN applied to each rank's channels alone, as cuda-convnet ran AlexNet).
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.shapes import infer_node, opdef
from compiler.parallel.channels import decide
from compiler.parallel.layout import ELEMENTWISE, PRODUCTS, REDUCTIONS, Layout, R, S, Site
from compiler.parallel.vocab import lookup
from compiler.train.autodiff import quantiser_scales
from compiler.train.step import parameters

GROUP = "tp"
PASS_THROUGH = ELEMENTWISE | REDUCTIONS | {"Softmax", "Transpose"}   # ops the column-parallel lookahead walks past


def partition(graph: Graph, tp: int, sequence_parallel: bool = False, rank: int = 0, groups: bool = False) -> Graph:
    """Rank `rank`'s graph of `graph` split `tp` ways (every rank's has the same nodes; weights differ by slice).
    `groups`: split as the model's own channel groups say (AlexNet on two GPUs): every grouped convolution runs on
    its ranks' groups (a group count `tp` does not divide is an error), and an LRN normalises each rank's channels
    alone, as cuda-convnet did, instead of gathering them (compiler/parallel/channels.py)."""
    if isinstance(tp, bool) or not isinstance(tp, (int, np.integer)) or tp < 1:
        raise ModelError(f"{graph.source}: the tensor-parallel degree must be an integer >= 1, not {tp!r}")
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < tp:
        raise ModelError(f"{graph.source}: rank {rank!r} is not one of the {tp} tensor-parallel ranks 0..{tp - 1}")
    if tp == 1:
        return copy.deepcopy(graph)
    if groups:
        _check_groups(graph, int(tp))
    planned = _Pass(graph, int(tp), int(rank), sequence_parallel, weights={}, groups=groups).run().plan()
    return _Pass(graph, int(tp), int(rank), sequence_parallel, weights=planned, groups=groups).run().out


def _check_groups(graph: Graph, tp: int) -> None:
    for node in graph.nodes:
        count = int(node.attr("group", 1)) if node.op == "Conv" else 1
        if count > 1 and count % tp:
            raise ModelError(f"{graph.source}: groups={tp} splits every layer as the model's channel groups do, but "
                             f"{node.where()} has {count} groups, which {tp} devices cannot share out evenly")


def split_axis(whole: tuple[int, ...], part: tuple[int, ...]) -> int | None:
    """The axis a rank's tensor is a slice of the whole one along (None: the same shape, held whole)."""
    differ = [a for a, (w, p) in enumerate(zip(whole, part)) if w != p]
    return differ[0] if differ else None


class _Pass:
    """One walk over the source graph in order. `weights`: the layout each weight is stored in (the first walk, with
    none, records which layouts the nodes reading each weight ask for; `plan` turns that into the second's)."""

    def __init__(self, src: Graph, tp: int, rank: int, sequence: bool, weights: dict[str, Layout], groups: bool):
        self.src, self.tp, self.rank, self.sequence, self.layouts = src, tp, rank, sequence, weights
        self.groups = groups
        self.producer = src.producers()
        self.consumers: dict[str, list[Node]] = {}
        for node in src.nodes:
            for name in node.inputs:
                self.consumers.setdefault(name, []).append(node)
        self.static = _static(src)
        self.trainable = _downstream(src, set(parameters(src)))
        self.scales = _upstream(src, quantiser_scales(src))
        self.requests: dict[str, set[Layout]] = {}
        self.out = Graph(name=src.name, inputs=list(src.inputs), outputs=list(src.outputs), nodes=[],
                         tensors={i: src.tensors[i] for i in src.inputs}, weights={}, opset=src.opset,
                         source=f"{src.source} (tensor-parallel rank {rank} of {tp})", import_body=src.import_body)
        self.env: dict[str, tuple[str, Layout]] = {i: (i, R) for i in src.inputs}   # source tensor -> (local, layout)
        self.made: dict[tuple[Any, ...], str] = {}
        self.names: set[str] = set(src.tensors) | {n.name for n in src.nodes}

    # -- the walk ----------------------------------------------------------------------------------------------
    def run(self) -> _Pass:
        for name in self.src.inputs:
            self._input(name, self.layouts.get(name, R))
        for name, value in self.src.weights.items():
            self._weight(name, value, self.layouts.get(name, R))
        for node in self.src.nodes:
            if node.domain not in ("", "ai.onnx"):
                raise ModelError(f"{self.src.source}: {node.where()} is in domain {node.domain!r}: partition the "
                                 f"model itself (its training step is built per rank afterwards)")
            folded = node.outputs and all(not o or o in self.src.constants for o in node.outputs)
            if folded and any(i and (i not in self.static or self.env[i][1] != R) for i in node.inputs):
                self._constant(node)
            else:
                self._node(node)
        for name in self.src.outputs:
            local, layout = self.env[name]
            if local != name:
                self._convert(name, R, sharded=False, target=name)
        self.out.order()
        return self

    def plan(self) -> dict[str, Layout]:
        """A weight is stored split when every node that reads it asks for the same split; else whole, and each
        node asking for a split reads a Shard of it. A per-head input (a decoder's past keys and values) is held
        split the same way: each rank is given its own heads of the cache, as it keeps them in its outputs."""
        return {name: next(iter(asked)) for name, asked in self.requests.items()
                if len(asked) == 1 and next(iter(asked)).kind == "S"
                and (name in self.src.weights or self._per_head(name, next(iter(asked))))}

    def _input(self, name: str, layout: Layout) -> None:
        tensor = self.src.tensors[name]
        shape = list(tensor.shape)
        if layout.kind == "S":
            shape[layout.split_axis] //= self.tp
        self.out.tensors[name] = Tensor(name, tuple(shape), tensor.dtype)
        self.env[name] = (name, layout)

    def _weight(self, name: str, value: np.ndarray | None, layout: Layout) -> None:
        tensor = self.src.tensors[name]
        shape = list(tensor.shape)
        if layout.kind == "S":
            shape[layout.split_axis] //= self.tp
            if value is not None:
                value = np.ascontiguousarray(np.split(np.asarray(value), self.tp, axis=layout.split_axis)[self.rank])
        self.out.weights[name] = value
        self.out.tensors[name] = Tensor(name, tuple(shape), tensor.dtype)
        self.env[name] = (name, layout)

    def _constant(self, node: Node) -> None:
        """A node folded at import time from something split (the Shape of an activation): its values, whole, as
        Constant nodes, never recomputed from local shapes. One folded from whole weights stays as it is (it folds
        again to the same values, and gradients still reach the weights: ViT's class token Expand)."""
        for i, name in enumerate(node.outputs):
            if name:
                made = Node(node.name if i == 0 else f"{node.name}:{i}", "Constant", (), (name,),
                            {"value": np.asarray(self.src.constants[name])})
                self._append(made)
                self.env[name] = (name, R)

    def _node(self, node: Node) -> None:
        ins = [self.env[name][1] if name else R for name in node.inputs]
        definition = opdef(self.src, node)
        site = Site(node, ins, [self.src.tensors[n].shape if n else None for n in node.inputs],
                    [self.src.tensors[o].shape for o in node.outputs if o], [not n or n in self.static
                                                                              for n in node.inputs],
                    definition.value_inputs, self.tp, self.sequence, self.src.opset, self.src.value,
                    lambda name: name in self.scales, self._column, self.groups)
        decision = decide(site)
        sharded = any(layout.sharded for layout in decision.outs)
        inputs = []
        for i, (name, want) in enumerate(zip(node.inputs, decision.wants)):
            if not name or i in definition.value_inputs:
                inputs.append(self.env[name][0] if name else name)
                continue
            if want is None and ins[i].kind == "P" and not any(o.kind == "P" for o in decision.outs):
                want = R           # a partial sum is made whole before anything not linear in it
            if name in self.static and node.outputs[0] not in self.static:
                self._request(name, want or ins[i])
            elif name in self.src.inputs:
                self.requests.setdefault(name, set()).add(want or ins[i])
            inputs.append(self._convert(name, want or ins[i], sharded))
        outs = dict(zip([o for o in node.outputs if o], decision.outs))
        inputs = self._local_shapes(node, inputs, outs)
        outputs = tuple(self._output_name(o, outs[o]) if o else o for o in node.outputs)
        rows_split = node.op == "Gather" and decision.outs[0].kind == "P"      # a lookup in a table split by rows
        if rows_split:
            self._lookup(node, inputs, outputs[0])
        else:
            self._append(Node(node.name, node.op, tuple(inputs), outputs, {**node.attrs, **decision.attrs},
                              node.domain, dict(node.resolved)))
        for o, local in zip(node.outputs, outputs):
            if o:
                self.env[o] = (local, outs[o])
        if rows_split and node.outputs[0] not in self.src.outputs:
            # reduced at once, as Megatron's: a partial sum carried into the residual stream would stay one through
            # its additions and be all-reduced again before every norm and every layer reading it
            token = site.token_axis(self.src.tensors[node.outputs[0]].shape)
            want = R if token is None else S(token)
            self.env[node.outputs[0]] = (self._convert(node.outputs[0], want, sharded=False), want)

    def _lookup(self, node: Node, inputs: list[str], output: str) -> None:
        """Megatron's vocabulary-parallel embedding (compiler/parallel/vocab.py): the Gather keeps its name, the
        nodes around it are named after it."""
        def emit(op: str, ins: list[str], what: str, output: str | None = None, **attrs: Any) -> str:
            name = self._fresh(f"{node.name}/{what}") if what else node.name
            result = output or (name if what else self._fresh(f"{node.name}/rows"))
            self._append(Node(name, op, tuple(ins), (result,), attrs))
            return result

        def const(what: str, value: np.ndarray, dtype: DType) -> str:
            name = self._fresh(f"{node.name}/{what}")
            self.out.weights[name] = np.asarray(value).astype(dtype.numpy)
            self.out.tensors[name] = Tensor(name, tuple(np.shape(value)), dtype)
            return name
        lookup(self.src, node, inputs[0], inputs[1], output, self.rank, self.tp, emit, const)

    def _output_name(self, name: str, layout: Layout) -> str:
        """A graph output keeps its name where it is whole (or a kept per-head tensor); a split one is renamed and
        gathered into the name at the end."""
        if name not in self.src.outputs or layout.kind == "R" or self._per_head(name, layout):
            return name
        return self._fresh(f"{name}/local")

    def _per_head(self, name: str, layout: Layout) -> bool:
        return layout.kind == "S" and layout.axis == 1 and len(self.src.tensors[name].shape) == 4

    def _local_shapes(self, node: Node, inputs: list[str], outs: dict[str, Layout]) -> list[str]:
        """Reshape's and Expand's target shape, written for the rank's slice when the output is split."""
        layout = outs.get(node.outputs[0])
        if node.op not in ("Reshape", "Expand") or layout is None or layout.kind != "S":
            return inputs
        shape = list(self.src.tensors[node.outputs[0]].shape)
        shape[layout.split_axis] //= self.tp
        name = self._fresh(f"{node.name}/const_local_shape")
        self.out.weights[name] = np.asarray(shape, np.int64)
        self.out.tensors[name] = Tensor(name, (len(shape),), self.src.tensors[node.inputs[1]].dtype)
        return [inputs[0], name] + inputs[2:]

    # -- layouts changed by collectives ----------------------------------------------------------------------
    def _convert(self, name: str, want: Layout, sharded: bool, target: str | None = None) -> str:
        """The local tensor holding source tensor `name` in layout `want`. `sharded`: the reader is split over the
        ranks (its gradient contributions are partial), so a whole tensor reaches it through ParallelEnter (or an
        all-gather whose gradient is reduce-scattered), and a whole gradient otherwise."""
        local, have = self.env[name]
        if have == want:
            if want.kind == "R" and sharded and name in self.trainable:
                return self._comm("ParallelEnter", local, target)
            return local
        if have.kind == "L" or want.kind in "LP":    # no rule asks for either: a per-rank value stays where it is
            raise ModelError(f"{self.src.source}: tensor {name!r} is a per-rank value (a quantiser's scale over the "
                             f"rank's own shard), which no collective makes {want}; it can only scale a split tensor")
        enter = sharded and name in self.trainable
        if want.kind == "R" and have.kind == "P":
            whole = self._comm("AllReduce", local, None if enter else target)
            return self._comm("ParallelEnter", whole, target) if enter else whole
        if want.kind == "R":
            return self._comm("AllGather", local, target, axis=have.axis, grad="reduce_scatter" if sharded else "shard")
        if have.kind == "P":
            return self._comm("ReduceScatter", local, target, axis=want.axis)
        if have.kind == "S":
            local = self._comm("AllGather", local, None, axis=have.axis, grad="shard")
        return self._comm("Shard", local, target, axis=want.axis)

    def _comm(self, op: str, local: str, target: str | None, **attrs: Any) -> str:
        """A comm node reading `local`; its output is `target` (a graph output's name) or a fresh name, made once
        per tensor, op and attributes (q, k and v share one ParallelEnter)."""
        key = (op, local, tuple(sorted(attrs.items())))
        if target is None and key in self.made:
            return self.made[key]
        name = target or self._fresh(f"{local}/{op}")
        self._append(Node(self._fresh(f"{name}/{op}") if target else name, op, (local,), (name,),
                          {"group": GROUP, "size": self.tp, **attrs}, COMM_DOMAIN))
        if target is None:
            self.made[key] = name
        return name

    def _append(self, node: Node) -> None:
        self.out.nodes.append(node)
        self.names.update((node.name, *node.outputs))
        try:
            infer_node(self.out, node)
        except ModelError as error:
            raise ModelError(f"{error} (while splitting it {self.tp} ways)") from None

    def _fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name

    # -- which weights to store split --------------------------------------------------------------------------
    def _request(self, name: str, want: Layout) -> None:
        """Record that a non-static node reads static tensor `name` in layout `want`, back to the weights it comes
        from (through element-wise ops and transposes, which a split passes through unchanged)."""
        if name in self.src.weights:
            self.requests.setdefault(name, set()).add(want)
            return
        node = self.producer.get(name)
        if node is None:
            return
        for i, source in enumerate(node.inputs):
            if not source or source not in self.static or i in opdef(self.src, node).value_inputs:
                continue
            if want.kind != "S":
                self._request(source, R)
            elif node.op == "Transpose":
                perm = [int(p) for p in node.attr("perm", list(range(len(self.src.tensors[name].shape)))[::-1])]
                self._request(source, S(perm[want.split_axis]))
            elif node.op in ELEMENTWISE:
                shape, out = self.src.tensors[source].shape, self.src.tensors[name].shape
                a = want.split_axis - (len(out) - len(shape))
                if a >= 0 and shape[a] == out[want.split_axis]:
                    self._request(source, S(a))
            else:
                self._request(source, R)

    # -- whether a product's output features split: tp must divide the heads or MLP width it feeds ------------
    def _column(self, node: Node, features: int) -> bool:
        if node.op == "Conv":
            return features % self.tp == 0 and not self._tokens(node)
        found = self._unit(node)
        if found is None:        # a head or classifier: split when the degree divides it, else keep it whole
            return features % self.tp == 0
        what, count, where = found
        if count % self.tp or features % self.tp:
            raise ModelError(f"{self.src.source}: tensor degree {self.tp} does not divide the {count} {what} of "
                             f"{where}")
        return True

    def _tokens(self, node: Node) -> bool:
        """Whether a convolution's maps are reshaped into tokens (ViT's patch embedding): the transformer after it
        holds its residual stream whole, so the convolution stays whole too, as Megatron's does."""
        todo = [node.outputs[0]]
        while todo:
            for reader in self.consumers.get(todo.pop(), []):
                if reader.op in ("Reshape", "Transpose"):
                    return True
                if reader.op in ELEMENTWISE:
                    todo.extend(o for o in reader.outputs if o)
        return False

    def _unit(self, node: Node) -> tuple[str, int, str] | None:
        """What the column-parallel product's output becomes: (heads, count, scope) when a reshape splits it into
        heads, (features, count, scope) when a product with a weight reads it (an MLP), None otherwise."""
        features = self.src.tensors[node.outputs[0]].shape[-1]
        todo, seen = [node.outputs[0]], set()
        while todo:
            name = todo.pop()
            for reader in self.consumers.get(name, []):
                if reader.name in seen:
                    continue
                seen.add(reader.name)
                if reader.op == "Reshape":
                    a, b = self.src.tensors[name].shape, self.src.tensors[reader.outputs[0]].shape
                    if len(b) == len(a) + 1 and b[:-2] == a[:-1] and b[-2] * b[-1] == a[-1] and min(b[-2:]) > 1:
                        return "heads", b[-2], _scope(reader.name, 2)
                elif reader.op in PRODUCTS and any(i != name and i in self.static for i in reader.inputs[:2]):
                    return "features", features, _scope(node.name, 1)
                elif reader.op in PASS_THROUGH:
                    todo.extend(o for o in reader.outputs if o)
        return None


def _scope(name: str, up: int) -> str:
    parts = name.split("/")
    return "/".join(parts[:-up]) if len(parts) > up else name


def _static(graph: Graph) -> set[str]:
    """Tensors computed from weights and constants alone (a weight, a quantised weight, a shape)."""
    static = set(graph.weights) | set(graph.constants)
    for node in graph.nodes:
        if all(not i or i in static for i in node.inputs):
            static.update(o for o in node.outputs if o)
    return static


def _downstream(graph: Graph, sources: set[str]) -> set[str]:
    reached = set(sources)
    for node in graph.nodes:
        if any(i in reached for i in node.inputs if i):
            reached.update(o for o in node.outputs if o)
    return reached


def _upstream(graph: Graph, sinks: set[str]) -> set[str]:
    reached = set(sinks)
    for node in reversed(graph.nodes):
        if any(o in reached for o in node.outputs if o):
            reached.update(i for i in node.inputs if i)
    return reached
