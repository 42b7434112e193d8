"""If and Loop against onnxruntime and onnx's conformance cases: branches and bodies that read the enclosing
graph's run-time tensors; a condition or trip count known at import inlines (If) or unrolls (Loop) into priced IR
ops, one known only at run time evaluates and refuses simulation by name; bad bodies named by node."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelsim.sim.api import run
from compiler.conformance import Verdict, import_case, run_case
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import ort_run
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(9)
X = RNG.standard_normal((3, 4)).astype(np.float32)
A0 = RNG.standard_normal((1, 4)).astype(np.float32)


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _branches():
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F32, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e0"]), helper.make_node("Slice", ["e0", "s", "n"],
                                                                                       ["e"])],
                              "else", [], [helper.make_tensor_value_info("e", F32, None)],
                              initializer=[_const("s", [0]), _const("n", [4])])
    return then, other


def _if_model(cond=None):
    then, other = _branches()
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    inputs = [("x0", F32, [3, 4])] + ([("c", BOOL, [])] if cond is None else [])
    inits = [_const("w", np.eye(4, dtype=np.float32))] + ([] if cond is None else [_const("c", np.array(cond))])
    return onnx_model(nodes, inputs, [("y", F32)], 17, inits)


def _loop_model(trip_count=3, stop_after=None):
    """Loop-carried acc += x[i] (a Slice at the iteration number), scan output acc * w; the body reads the
    enclosing graph's x; stop_after: the body's condition turns false once i reaches it."""
    condition = [helper.make_node("Identity", ["cin"], ["cout"])] if stop_after is None else \
        [helper.make_node("Less", ["i", "limit"], ["cout"])]
    body = helper.make_graph(condition + [
        helper.make_node("Add", ["i", "one"], ["end"]), helper.make_node("Unsqueeze", ["i", "ax"], ["start"]),
        helper.make_node("Unsqueeze", ["end", "ax"], ["stop"]), helper.make_node("Slice", ["x", "start", "stop"],
                                                                                 ["row"]),
        helper.make_node("Add", ["acc", "row"], ["acc2"]), helper.make_node("Mul", ["acc2", "w"], ["scan"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cin", BOOL, []),
                 helper.make_tensor_value_info("acc", F32, [1, 4])],
        [helper.make_tensor_value_info(n, t, None) for n, t in (("cout", BOOL), ("acc2", F32), ("scan", F32))],
        initializer=[_const("one", np.int64(1)), _const("ax", np.array([0], np.int64)),
                     _const("limit", np.int64(stop_after or 0))])
    inits = [_const("cond", np.array(True)), _const("w", np.full((1, 4), 2, np.float32))]
    inputs = [("x0", F32, [3, 4]), ("a0", F32, [1, 4])]
    if trip_count is None:
        inputs.append(("M", I64, []))
    else:
        inits.append(_const("M", np.int64(trip_count)))
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             helper.make_node("Loop", ["M", "cond", "a0"], ["final", "scans"], body=body)]
    return onnx_model(nodes, inputs, [("final", F32), ("scans", F32)], 17, inits)


def _check(proto, feeds, ir=True):
    """The Graph reference (and the lowered IR) equal onnxruntime; returns the Graph."""
    graph = from_model(proto)
    want = ort_run(proto, feeds)
    runs = [run_graph(graph, feeds)] + ([run_ir(lower(graph), feeds, graph.tensors)] if ir else [])
    for got in runs:
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-6, err_msg=name)
    return graph


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_run_time_condition_evaluates_and_refuses_simulation(cond):
    graph = _check(_if_model(), {"x0": X, "c": np.array(cond)}, ir=False)
    with pytest.raises(ModelError, match=r"node 'if_1' \(If\): its condition 'c' is known only at run time, so "
                                         r"which branch runs cannot be simulated \(accelsim eval runs it\)"):
        lower(graph)


@pytest.mark.parametrize("cond,taken", [(True, "MatMul"), (False, "Neg")])
def test_if_with_a_constant_condition_inlines_the_taken_branch(cond, taken):
    graph = _check(_if_model(cond), {"x0": X})
    ops = lower(graph).ops
    assert {op.op for op in ops} == {"Relu", taken, "If"} | ({"Slice"} if taken == "Neg" else set())
    timed = run(graph, arch="a100").ops
    assert {o.op for o in timed} >= {taken, "If"}
    assert all(o.seconds > 0 for o in timed if o.op in (taken, "If"))


def test_loop_with_a_constant_trip_count_unrolls():
    graph = _check(_loop_model(3), {"x0": X, "a0": A0})
    ops = lower(graph).ops
    assert sum(op.op == "Add" for op in ops) == 3 and sum(op.op == "Mul" for op in ops) == 3   # one per iteration
    timed = [o for o in run(graph, arch="a100").ops if o.op in ("Add", "Mul", "Loop")]
    assert {o.op for o in timed} == {"Add", "Mul", "Loop"} and all(o.seconds > 0 for o in timed)


def test_loop_of_zero_iterations_passes_the_initial_values():
    graph = from_model(_loop_model(0))
    for got in (run_graph(graph, {"x0": X, "a0": A0}), run_ir(lower(graph), {"x0": X, "a0": A0}, graph.tensors)):
        np.testing.assert_array_equal(got["final"], A0)
        assert got["scans"].shape == (0, 1, 4)      # no rows of the body's [1, 4] scan output (onnxruntime: 0, 0, 4)


@pytest.mark.parametrize("trip_count,stop_after,feeds", [(None, None, {"M": np.array(2, np.int64)}),
                                                         (3, 1, {})])
def test_loop_with_run_time_iterations_evaluates_and_refuses_simulation(trip_count, stop_after, feeds):
    proto = _loop_model(trip_count, stop_after)
    graph = from_model(proto)
    feeds = {"x0": X, "a0": A0, **feeds}
    want = ort_run(proto, feeds)
    got = run_graph(graph, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, err_msg=name)
    with pytest.raises(ModelError, match=r"node 'loop_1' \(Loop\): its output shape depends on how many iterations "
                                         r"run .*known only at run time, so it cannot be simulated"):
        lower(graph)


@pytest.mark.parametrize("name", ["test_range_float_type_positive_delta_expanded",
                                  "test_range_int32_type_negative_delta_expanded"])
def test_onnx_range_expanded_to_a_loop_unrolls(name):
    """The expanded Range's Loop gets its trip count from start, limit and delta, known at import: unrolled."""
    case = node_cases("rangeop")[name]
    outcome = run_case(case, "Range")
    assert outcome.verdict == Verdict.passed, outcome.line()
    graph, feeds = import_case(case)
    got = run_ir(lower(graph), feeds, graph.tensors)
    np.testing.assert_allclose(got[graph.outputs[0]], case.data_sets[0][1][0])


@pytest.mark.parametrize("module,name", [("if_", "test_if"), ("loop", "test_loop11")])
def test_onnx_conformance_case_graph_and_ir(module, name):
    """Their condition and trip count bound at import (as an exported model has them): inlined and unrolled."""
    check_case(node_cases(module)[name])


def test_if_branches_returning_different_counts_are_refused_by_name():
    then, other = _branches()
    other.output.append(helper.make_tensor_value_info("e0", F32, None))
    nodes = [helper.make_node("Relu", ["x0"], ["x"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    proto = onnx_model(nodes, [("x0", F32, [3, 4]), ("c", BOOL, [])], [("y", F32)], 17,
                       [_const("w", np.eye(4, dtype=np.float32))])
    with pytest.raises(ModelError, match=r"node 'if_1' \(If\): its branches return \[1, 2\] outputs; the node has 1"):
        from_model(proto)


def test_loop_body_with_the_wrong_inputs_is_refused_by_name():
    proto = _loop_model(2)
    del proto.graph.node[1].attribute[0].g.input[2]
    with pytest.raises(ModelError, match=r"node 'loop_1' \(Loop\): the body has 2 inputs; it needs 2 \+ 1"):
        from_model(proto)
