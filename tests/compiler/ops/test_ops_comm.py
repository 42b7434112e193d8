"""The collectives (compiler/ops/comm.py): shapes and refusals, the values the ranks get run together, a single graph
refusing to compute them, their lowering to zero-byte views accelsim finds by name, and their gradient rules."""
import numpy as np
import pytest

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ir import Move
from compiler.ops.base import COMM_DOMAIN
from compiler.ops.comm import COLLECTIVES, Collective
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from compiler.ops.shapes import finalize
from compiler.parallel.group import run_ranks
from compiler.train import training_graph

RNG = np.random.default_rng(3)


def one(op: str, shape=(4, 6), size: int = 2, weight: np.ndarray | None = None, **attrs) -> Graph:
    """x -> op -> y, in domain ai.accelsim.comm (x a weight when given, else an input)."""
    inputs = [] if weight is not None else ["x"]
    graph = Graph("comm", inputs, ["y"], [Node("c", op, ("x",), ("y",), {"group": "tp", "size": size, **attrs},
                                                 COMM_DOMAIN)],
                  {"x": Tensor("x", shape, DType.fp64)}, {} if weight is None else {"x": weight})
    return finalize(graph)


@pytest.mark.parametrize("op, attrs, shape", [("AllReduce", {}, (4, 6)), ("ParallelEnter", {}, (4, 6)),
                                              ("AllGather", {"axis": 1}, (4, 12)),
                                              ("AllGather", {"axis": -2}, (8, 6)),
                                              ("ReduceScatter", {"axis": 1}, (4, 3)),
                                              ("Shard", {"axis": 0}, (2, 6))])
def test_shapes(op, attrs, shape):
    assert one(op, **attrs).tensor("y").shape == shape


@pytest.mark.parametrize("op", ["ReduceScatter", "Shard"])
def test_a_split_the_group_does_not_divide_is_refused_naming_node_and_value(op):
    with pytest.raises(ModelError, match=r"node 'c' .*'x' of shape \[4, 6\] over 4 ranks: axis 1 has 6 entries"):
        one(op, size=4, axis=1)


@pytest.mark.parametrize("attrs, message", [({"group": ""}, "attribute group"), ({"size": 0}, "attribute size"),
                                            ({"size": 2.0}, "attribute size"), ({"axis": 2}, "axis 2 is out of range"),
                                            ({"grad": "split"}, "attribute grad 'split'")])
def test_bad_attributes_are_refused(attrs, message):
    with pytest.raises(ModelError, match=message):
        one("AllGather", **{"axis": 0, **attrs})


@pytest.mark.parametrize("op", ["AllReduce", "AllGather", "ReduceScatter", "ParallelEnter", "Shard"])
def test_one_graph_alone_refuses_to_compute_a_collective(op):
    graph = one(op, axis=0)
    with pytest.raises(ModelError, match="run all ranks' graphs together"):
        run_graph(graph, {"x": RNG.standard_normal((4, 6))})
    with pytest.raises(ModelError, match="run all ranks' graphs together"):
        run_ir(lower(graph), {"x": RNG.standard_normal((4, 6))})


def test_a_collective_of_a_small_weight_is_not_folded_at_import():
    graph = one("AllReduce", weight=np.ones((4, 6)))
    assert "y" not in graph.constants


def test_the_ranks_run_together_get_what_each_collective_means():
    x = [RNG.standard_normal((4, 6)) for _ in range(2)]
    total = x[0] + x[1]
    cases = {"AllReduce": ({}, [total, total]), "ParallelEnter": ({}, x),
             "AllGather": ({"axis": 1}, [np.concatenate(x, 1)] * 2),
             "ReduceScatter": ({"axis": 0}, [total[:2], total[2:]]),
             "Shard": ({"axis": 1}, [x[0][:, :3], x[1][:, 3:]])}
    for op, (attrs, want) in cases.items():
        got = run_ranks([one(op, **attrs)] * 2, [{"x": a} for a in x])
        for rank in range(2):
            np.testing.assert_array_equal(got[rank]["y"], want[rank], err_msg=f"{op} rank {rank}")


def test_ranks_must_be_the_group_and_run_the_same_program():
    x = {"x": np.zeros((4, 6))}
    with pytest.raises(ModelError, match="spans the 2 ranks of group 'tp', but run_ranks was given 3 graphs"):
        run_ranks([one("AllReduce")] * 3, x)
    with pytest.raises(ModelError, match="rank 1's graph differs from rank 0's at node 'c' \\(AllReduce\\)"):
        run_ranks([one("AllReduce"), one("AllGather", axis=0)], x)


def test_collectives_lower_to_zero_byte_views_named_by_op():
    for op, attrs in [("AllReduce", {}), ("AllGather", {"axis": -1}), ("ReduceScatter", {"axis": 1}),
                      ("ParallelEnter", {}), ("Shard", {"axis": 0})]:
        (move,) = lower(one(op, **attrs)).ops
        assert isinstance(move, Collective) and isinstance(move, Move) and move.view and move.op == op
        assert move.nbytes == 0 and move.macs == 0 and move.ops == 0
        assert (move.group, move.size, move.axis) == ("tp", 2, {"AllGather": 1}.get(op, attrs.get("axis")))
        assert (op in COLLECTIVES) == (op in ("AllReduce", "AllGather", "ReduceScatter"))


def _trained(op: str, **attrs):
    """y = op(x * w) on each rank, its loss the mse of y against zeros: the step, and the ops the comm node's
    gradient rule added."""
    graph = Graph("comm", ["x"], ["y"], [Node("m", "Mul", ("x", "w"), ("xw",)),
                                         Node("c", op, ("xw",), ("y",), {"group": "tp", "size": 2, **attrs},
                                              COMM_DOMAIN)],
                  {"x": Tensor("x", (4, 6), DType.fp64), "w": Tensor("w", (4, 6), DType.fp64)},
                  {"w": np.ones((4, 6))})
    step = training_graph(finalize(graph), loss="mse")
    step.graph.outputs.append(step.grads["w"])
    backward = [n.op for n in step.graph.nodes if n.name.startswith("c/grad/")]
    return step, backward


@pytest.mark.parametrize("op, attrs, backward", [("ParallelEnter", {}, ["AllReduce"]), ("AllReduce", {}, []),
                                                 ("AllGather", {"axis": 1}, ["ReduceScatter"]),
                                                 ("AllGather", {"axis": 1, "grad": "shard"}, ["Shard"]),
                                                 ("ReduceScatter", {"axis": 0}, ["AllGather"]),
                                                 ("Shard", {"axis": 0}, ["AllGather"])])
def test_gradient_rules_are_megatrons_conjugate_pairs(op, attrs, backward):
    step, made = _trained(op, **attrs)
    assert made == backward
    x = [RNG.standard_normal((4, 6)) for _ in range(2)]
    y = run_ranks([one(op, **attrs)] * 2, [{"x": a} for a in x])
    got = run_ranks([step.graph] * 2, [{"x": a, step.labels: np.zeros_like(y[r]["y"])} for r, a in enumerate(x)])
    dy = [2 * y[r]["y"] / y[r]["y"].size for r in range(2)]       # each rank's loss mean(y^2): dy = 2 y / n
    want = {"ParallelEnter": lambda: [(dy[0] + dy[1]) * x[r] for r in range(2)],
            "AllReduce": lambda: [dy[r] * x[r] for r in range(2)],
            "AllGather": lambda: ([np.split(dy[0] + dy[1], 2, 1)[r] * x[r] for r in range(2)]
                                  if attrs.get("grad") != "shard" else [np.split(dy[r], 2, 1)[r] * x[r]
                                                                        for r in range(2)]),
            "ReduceScatter": lambda: [np.concatenate(dy, 0) * x[r] for r in range(2)],
            "Shard": lambda: [np.concatenate(dy, 0) * x[r] for r in range(2)]}[op]()
    for r in range(2):
        np.testing.assert_allclose(got[r][step.grads["w"]], want[r], rtol=1e-12, err_msg=f"rank {r}")
