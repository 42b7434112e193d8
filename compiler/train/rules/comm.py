"""Gradient rules of the collectives (compiler/ops/comm.py), Megatron-LM's conjugate pairs (Shoeybi et al. 2019,
sec. 3; Korthikanti et al. 2022, sec. 4.2.2).

A tensor the ranks hold whole and compute with alike has the same gradient on every rank; a split one has its slice
of the gradient on each. So: ParallelEnter (identity forward) all-reduces its gradient, the partial contributions of
the split computations it feeds; AllReduce (forward) passes its gradient through, except a max, which gives none
(its one use, the row maxima a vocab-parallel softmax subtracts, shifts a value that does not depend on the shift,
so the gradient through it is zero: Megatron's logits_max takes none either); AllGather's gradient is
reduce-scattered along the same axis (or, with grad="shard", sliced: its readers computed alike on every rank);
ReduceScatter's gradient is all-gathered; Shard's gradient is all-gathered.
Invariant: every rule adds comm-domain nodes with the forward node's group and size, and no others.
"""
from __future__ import annotations

from typing import Any
from compiler.ops.base import COMM_DOMAIN
from compiler.graph import Node
from compiler.train.autodiff import Grads, Tape, output_grad, rule


def _comm(t: Tape, node: Node, op: str, x: str, **attrs: Any) -> str:
    collective: str = t.node(op, [x], domain=COMM_DOMAIN, group=node.attr("group"), size=int(node.attr("size")),
                             **attrs)
    return collective


@rule("ParallelEnter")
def parallel_enter(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [_comm(t, node, "AllReduce", output_grad(node, dys))]


@rule("AllReduce")
def all_reduce(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [output_grad(node, dys) if node.attr("reduction", "sum") == "sum" else None]


@rule("AllGather")
def all_gather(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    back = "ReduceScatter" if node.attr("grad", "reduce_scatter") == "reduce_scatter" else "Shard"
    return [_comm(t, node, back, output_grad(node, dys), axis=int(node.attr("axis", 0)))]


@rule("ReduceScatter")
def reduce_scatter(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    # the partial tensors' gradient is the whole gradient, alike on every rank: whoever reads it computes alike
    return [_comm(t, node, "AllGather", output_grad(node, dys), axis=int(node.attr("axis", 0)), grad="shard")]


@rule("Shard")
def shard(t: Tape, node: Node, dys: Grads, wants: list[bool]) -> Grads:
    return [_comm(t, node, "AllGather", output_grad(node, dys), axis=int(node.attr("axis", 0)), grad="shard")]
