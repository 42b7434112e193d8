"""The numpy reference under a memory budget: a node whose outputs would not fit beside what the run holds is
refused by name before numpy allocates them; values of run-time shape are counted as they come; a Loop runs at
most MAX_UNROLL iterations, as simulation unrolls."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ops import control, room
from compiler.ops.interpret import run_graph
from compiler.ops.room import Budget
from compiler.ops.shapes import opdef
from tests.compiler.onnx_models import model as onnx_model

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
MiB = Budget(1 << 20, "a test's 1 MiB")


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _tile(repeats):
    nodes = [helper.make_node("Tile", ["x", "r"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    return from_model(onnx_model(nodes, [("x", F32, [2, 3])], [("y", F32)], 17,
                                 [_const("r", np.array(repeats, np.int64))]))


def test_a_node_too_large_is_refused_by_name_before_it_runs():
    """Tile x 10^9 of a [2, 3] float32: 22.4 GiB, never allocated (without the budget: a MemoryError, or minutes
    of paging)."""
    graph = _tile([10 ** 9, 1])
    with pytest.raises(ModelError, match=r"node 'tile_0' \(Tile\): its outputs need 22.4 GiB, more than the memory "
                                         r"budget of 1 MiB \(a test's 1 MiB\)"):
        run_graph(graph, {"x": np.ones((2, 3), np.float32)}, MiB)


def test_what_a_run_holds_counts_against_the_budget():
    """Tile to [20000, 3] float32 is 234 KiB; its Relu 234 KiB more: fits in 1 MiB, not in 300 KiB."""
    graph = _tile([10 ** 4, 1])
    x = np.ones((2, 3), np.float32)
    assert run_graph(graph, {"x": x}, MiB)["y"].shape == (20000, 3)
    with pytest.raises(ModelError, match=r"node 'relu_1' \(Relu\): its outputs need 234 KiB beside the 234 KiB held "
                                         r"already, more than the memory budget of 300 KiB"):
        run_graph(graph, {"x": x}, Budget(300 << 10))
    assert run_graph(graph, {"x": x})["y"].shape == (20000, 3)      # no budget: no limit


def _counting_loop(trip_count=True, scan_shape=(1,)):
    """v += 1 while the condition (passed through) holds; each iteration scans out v broadcast to scan_shape.
    trip_count: a run-time input M, or none at all."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cin"], ["cout"]), helper.make_node("Add", ["v", "one"], ["v2"]),
         helper.make_node("Expand", ["v2", "shape"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cin", BOOL, []),
                 helper.make_tensor_value_info("v", F32, [1])],
        [helper.make_tensor_value_info(n, t, None) for n, t in (("cout", BOOL), ("v2", F32), ("scan", F32))],
        initializer=[_const("one", np.ones(1, np.float32)), _const("shape", np.array(scan_shape, np.int64))])
    inputs = [("v0", F32, [1])] + ([("M", I64, [])] if trip_count else [])
    trips = "M" if trip_count else ""
    nodes = [helper.make_node("Loop", [trips, "cond", "v0"], ["final", "scans"], body=body)]
    return from_model(onnx_model(nodes, inputs, [("final", F32), ("scans", F32)], 17,
                                 [_const("cond", np.array(True))]))


def test_a_loop_whose_condition_never_fails_stops_at_the_unroll_limit(monkeypatch):
    monkeypatch.setattr(control, "MAX_UNROLL", 50)
    graph = _counting_loop(trip_count=False)
    with pytest.raises(ModelError, match=r"node 'loop_0' \(Loop\): ran 50 iterations \(trip count none\) and its "
                                         r"condition still holds; eval runs at most 50"):
        run_graph(graph, {"v0": np.zeros(1, np.float32)})
    counted = _counting_loop()
    out = run_graph(counted, {"v0": np.zeros(1, np.float32), "M": np.array(50, np.int64)})
    assert out["final"][0] == 50 and out["scans"].shape == (50, 1)
    with pytest.raises(ModelError, match=r"ran 50 iterations \(trip count 51\)"):
        run_graph(counted, {"v0": np.zeros(1, np.float32), "M": np.array(51, np.int64)})


def test_a_loops_scan_outputs_are_counted_as_they_grow():
    """Each iteration scans out 64 KiB; the loop's output shape is known only at run time, so the budget is
    checked as the stack grows: the 16th iteration's scan value would pass 1 MiB, long before the 1000 asked."""
    graph = _counting_loop(scan_shape=(128, 128))
    with pytest.raises(ModelError, match=r"node 'expand_2' \(Expand\): its outputs need 64 KiB beside the 960 KiB "
                                         r"held already"):
        run_graph(graph, {"v0": np.zeros(1, np.float32), "M": np.array(1000, np.int64)}, MiB)


def test_nested_loops_stop_at_the_runs_iteration_limit(monkeypatch):
    """Two loops of 100 iterations each, one inside the other: 10,100 iterations in all, each within its own
    Loop's limit; the run's limit (here 1,000) stops them."""
    monkeypatch.setattr(room, "MAX_ITERATIONS", 1000)
    inner = helper.make_graph(
        [helper.make_node("Identity", ["c1"], ["c1out"]), helper.make_node("Add", ["w", "one"], ["w2"])], "inner",
        [helper.make_tensor_value_info("j", I64, []), helper.make_tensor_value_info("c1", BOOL, []),
         helper.make_tensor_value_info("w", F32, [1])],
        [helper.make_tensor_value_info("c1out", BOOL, None), helper.make_tensor_value_info("w2", F32, None)],
        initializer=[_const("one", np.ones(1, np.float32))])
    outer = helper.make_graph(
        [helper.make_node("Identity", ["c0"], ["c0out"]), helper.make_node("Loop", ["M", "go", "v"], ["v2"],
                                                                           body=inner)], "outer",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c0", BOOL, []),
         helper.make_tensor_value_info("v", F32, [1])],
        [helper.make_tensor_value_info("c0out", BOOL, None), helper.make_tensor_value_info("v2", F32, None)],
        initializer=[_const("go", np.array(True))])
    graph = from_model(onnx_model([helper.make_node("Loop", ["M", "cond", "v0"], ["final"], body=outer)],
                                  [("v0", F32, [1]), ("M", I64, [])], [("final", F32)], 17,
                                  [_const("cond", np.array(True))]))
    feeds = {"v0": np.zeros(1, np.float32), "M": np.array(100, np.int64)}
    assert run_graph(graph, feeds)["final"][0] == 100 * 100                  # no budget: no run limit
    with pytest.raises(ModelError, match=r"node 'loop_\d' \(Loop\): the run's loops have made 1,000 iterations in "
                                         r"all \(nested loops multiply\)"):
        run_graph(graph, feeds, MiB)


def test_numpy_running_out_of_memory_inside_a_node_names_it(monkeypatch):
    """A temporary larger than the outputs (or a budget set above the machine's memory) can still exhaust it."""
    graph = _tile([2, 1])

    def starved(*args, **kwargs):
        raise MemoryError("Unable to allocate 8.00 TiB")
    relu = next(n for n in graph.nodes if n.op == "Relu")
    monkeypatch.setattr(type(opdef(graph, relu)), "reference", starved)
    with pytest.raises(ModelError, match=r"node 'relu_1' \(Relu\): out of memory while it ran \(Unable to allocate "
                                         r"8.00 TiB\); the memory budget is 1 MiB \(a test's 1 MiB\)"):
        run_graph(graph, {"x": np.ones((2, 3), np.float32)}, MiB)
