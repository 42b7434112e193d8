"""Reductions (ReduceL1 ... ReduceLogSumExp, ReduceProd), Softmax / LogSoftmax / Hardmax across the opset 13 axis
change, and Einsum in numpy's general form (diagonals, traces, broadcast ellipses, sums and transposes): against
onnxruntime and onnx's own cases, with their IR lowering and a simulation on a100."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from accelsim.sim.api import run
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import OpKind
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from tests.compiler.onnx_models import init, model
from tests.compiler.oracle import check_against_ort, ort_run
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
RNG = np.random.default_rng(11)


def _check(nodes, feeds, opset, inits=(), rtol=1e-5, atol=1e-6, out_type=None):
    inputs = [(name, TensorProto.FLOAT if v.dtype == np.float32 else helper.np_dtype_to_tensor_dtype(v.dtype),
               list(v.shape)) for name, v in feeds.items()]
    proto = model(nodes, inputs, [("y", out_type or inputs[0][1])], opset, inits)
    return check_against_ort(proto, feeds, rtol=rtol, atol=atol)


# -- reductions ------------------------------------------------------------------------------------------

COST = {"ReduceL1": 2, "ReduceL2": 2, "ReduceSumSquare": 2, "ReduceLogSum": 1, "ReduceLogSumExp": 4,
        "ReduceProd": 1, "ReduceSum": 1, "ReduceMean": 1, "ReduceMax": 1, "ReduceMin": 1}


def _reduce(op, x, opset, axes, keepdims, noop=None):
    """A Reduce node with axes as the attribute (before the op's opset 13/18) or as an initializer input."""
    attrs = {"keepdims": keepdims} | ({} if noop is None else {"noop_with_empty_axes": noop})
    input_from = 13 if op == "ReduceSum" else 18
    inits, inputs = [], ["x"]
    if axes is not None and opset >= input_from:
        inits, inputs = [init("axes", np.array(axes, dtype=np.int64))], ["x", "axes"]
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, inputs, ["y"], name="n0", **attrs)
    return _check([node], {"x": x}, opset, inits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [(None, 1), ([1], 0), ([-1, 0], 1), ([0, 2], 0)])
@pytest.mark.parametrize("op", sorted(COST))
def test_reduce_matches_onnxruntime(op, axes, keepdims, opset):
    x = RNG.uniform(0.2, 2.0, (3, 4, 5)).astype(np.float32)
    if op in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceMax", "ReduceMin"):
        x = x * np.where(RNG.random(x.shape) < 0.5, -1, 1).astype(np.float32)
    graph = _reduce(op, x, opset, axes, keepdims)
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.reduce and ir_op.ops == x.size * COST[op]


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceProd", "ReduceLogSumExp"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_reduce_other_types_match_onnxruntime(op, dtype):
    x = RNG.integers(-4, 5, (2, 3, 4)).astype(dtype)
    if op == "ReduceLogSumExp" and dtype != np.float64:
        x = x.astype(np.float64)      # onnxruntime's integer LogSumExp truncates mid-way; float64 is exact enough
    _reduce(op, x, 18, [1], 1)


@pytest.mark.parametrize("op, kind", [("ReduceL1", OpKind.map), ("ReduceL2", OpKind.map),
                                      ("ReduceSumSquare", OpKind.map), ("ReduceLogSum", OpKind.map),
                                      ("ReduceLogSumExp", OpKind.move), ("ReduceProd", OpKind.move),
                                      ("ReduceMax", OpKind.move)])
def test_noop_with_empty_axes_keeps_the_elementwise_step(op, kind):
    """Reducing over no axis: |x| for ReduceL1 (a Map), x itself for ReduceProd (a view), as onnxruntime gives."""
    x = RNG.uniform(0.5, 2.0, (2, 3)).astype(np.float32) * np.array([1, -1, 1], dtype=np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x)
    graph = _reduce(op, x, 18, None, 1, noop=1)
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == kind and graph.tensor("y").shape == (2, 3)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_fed_at_run_time_evaluate_but_do_not_simulate(keepdims):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    axes = np.array([0, 2], dtype=np.int64)
    node = helper.make_node("ReduceL2", ["x", "axes"], ["y"], name="n0", keepdims=keepdims)
    proto = model([node], [("x", F32, [2, 3, 4]), ("axes", I64, [2])], [("y", F32)], 18)
    graph = from_model(proto)
    want = ort_run(proto, {"x": x, "axes": axes})["y"]
    np.testing.assert_allclose(run_graph(graph, {"x": x, "axes": axes})["y"], want, rtol=1e-5)
    with pytest.raises(ModelError, match=r"'n0' \(ReduceL2\): its output shape depends on the axes"):
        lower(graph)


def test_log_sum_exp_stays_finite_where_exp_overflows():
    x = np.array([[1000.0, 1000.0], [-1000.0, -1001.0]], dtype=np.float32)
    graph = _reduce("ReduceLogSumExp", x, 18, [1], 0)
    np.testing.assert_allclose(run_graph(graph, {"x": x})["y"], [1000.0 + np.log(2), -1000.0 + np.log1p(np.e ** -1)],
                               rtol=1e-6)


def test_reduce_refuses_axes_as_attribute_from_opset_18_and_a_repeated_axis():
    def bad(opset, **attrs):
        node = helper.make_node("ReduceL2", ["x"], ["y"], name="n0", **attrs)
        with pytest.raises(ModelError) as error:
            from_model(model([node], [("x", F32, [2, 3])], [("y", F32)], opset))
        return str(error.value)
    assert "'n0' (ReduceL2)" in bad(18, axes=[1]) and "axes are input 1" in bad(18, axes=[1])
    assert "name an axis twice" in bad(13, axes=[1, -1])
    assert "axis 2 is out of range for rank 2" in bad(13, axes=[2])


@pytest.mark.parametrize("module", ["reducel1", "reducel2", "reduce_log_sum", "reduce_log_sum_exp", "reduceprod",
                                    "reducesumsquare", "reducesum", "reducemean", "reducemax", "reducemin"])
def test_reduce_onnx_cases(module):
    """Includes the empty-set cases: a reduction over a zero-size axis gives its identity (0, 1, -inf, log 0)."""
    for case in node_cases(module).values():
        check_case(case)


# -- Softmax, LogSoftmax, Hardmax --------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 21])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_family_axis_rule_follows_the_opset(op, axis, opset):
    """Before opset 13 the axes from `axis` on are one row (default 1); from 13 only `axis` (default -1)."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    x[0, 1, :2] = 5.0    # a tie: Hardmax marks the first
    attrs = {} if axis is None else {"axis": axis}
    graph = _check([helper.make_node(op, ["x"], ["y"], name="n0", **attrs)], {"x": x}, opset)
    (ir_op,) = lower(graph).ops
    assert ir_op.kind == OpKind.reduce and ir_op.ops == x.size * (2 if op == "Hardmax" else 5)


def test_hardmax_refuses_an_axis_out_of_range():
    node = helper.make_node("Hardmax", ["x"], ["y"], name="n0", axis=3)
    with pytest.raises(ModelError, match=r"'n0' \(Hardmax\): axis 3 is out of range for rank 2"):
        from_model(model([node], [("x", F32, [2, 3])], [("y", F32)], 13))


@pytest.mark.parametrize("module", ["softmax", "logsoftmax", "hardmax"])
def test_softmax_family_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


# -- Einsum ------------------------------------------------------------------------------------------------

# equation -> (operand shapes, the kinds of IR ops it lowers to, in order); written by hand
GENERAL = {
    "ii->i": ([(4, 4)], [OpKind.move, OpKind.move]),                        # diagonal copied out, then a view
    "ii": ([(4, 4)], [OpKind.move, OpKind.reduce]),                         # trace: the diagonal, summed
    "...ii->...i": ([(2, 3, 3)], [OpKind.move, OpKind.move]),
    "bii,bij->bj": ([(2, 3, 3), (2, 3, 5)], [OpKind.move, OpKind.einsum]),  # a diagonal into a product
    "ij->ji": ([(3, 4)], [OpKind.move]),
    "ijk->kij": ([(2, 3, 4)], [OpKind.move]),
    "ij->i": ([(3, 4)], [OpKind.reduce]),
    "ijk->ki": ([(2, 3, 4)], [OpKind.reduce, OpKind.move]),                 # sum j, then transpose
    "ij->": ([(3, 4)], [OpKind.reduce]),
    "...ij,...jk->...ik": ([(2, 3, 4), (1, 4, 5)], [OpKind.move, OpKind.einsum]),   # size-1 batch axis broadcast
    "...j,...j->...": ([(3, 1, 4), (1, 5, 4)], [OpKind.move, OpKind.move, OpKind.einsum]),
    "i,j->ij": ([(3,), (4,)], [OpKind.einsum]),                            # outer product
    "ij,ij->ij": ([(3, 4), (3, 4)], [OpKind.einsum]),                      # Hadamard product
}


@pytest.mark.parametrize("equation", sorted(GENERAL))
def test_general_einsum_matches_onnxruntime_and_lowers_by_kind(equation):
    shapes, kinds = GENERAL[equation]
    feeds = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(feeds), ["y"], name="n0", equation=equation)
    graph = _check([node], feeds, 12, rtol=1e-4, atol=1e-5)
    assert [op.kind for op in lower(graph).ops] == kinds


def test_einsum_diagonal_and_broadcast_macs_and_bytes():
    """bii,bij->bj over b=2, i=3, j=5: the Einsum multiplies 2*3*5 times; the diagonal copy moves 2*3 floats."""
    node = helper.make_node("Einsum", ["a", "b"], ["y"], name="n0", equation="bii,bij->bj")
    graph = from_model(model([node], [("a", F32, [2, 3, 3]), ("b", F32, [2, 3, 5])], [("y", F32)], 12))
    diagonal, product = lower(graph).ops
    assert product.macs == 2 * 3 * 5 and diagonal.output.shape == (2, 3) and not diagonal.view
    assert diagonal.nbytes == 2 * (2 * 3 * 4)    # read what it keeps, write it


def test_einsum_on_integers_is_exact():
    a = RNG.integers(-9, 9, (3, 3)).astype(np.int64)
    node = helper.make_node("Einsum", ["x"], ["y"], equation="ii->")
    graph = _check([node], {"x": a}, 12)
    assert run_ir(lower(graph), {"x": a})["y"] == np.trace(a)


@pytest.mark.parametrize("equation, shapes, says", [
    ("ii->i", [(3, 4)], "letter 'i' has extent 3 in one place and 4"),
    ("ij,jk->ik", [(3, 4), (5, 6)], "letter 'j' has extent 4 in one place and 5"),
    ("ij->ii", [(3, 3)], "must each appear once"),
    ("i.j->ij", [(3, 3)], "do not fit an operand"),
    ("...i->...i...", [(2, 3)], "more than one ellipsis"),
])
def test_einsum_refusals_name_the_equation(equation, shapes, says):
    node = helper.make_node("Einsum", [f"x{i}" for i in range(len(shapes))], ["y"], name="n0", equation=equation)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(f"x{i}", F32, s)
                                            for i, s in enumerate(shapes)],
                              [helper.make_tensor_value_info("y", F32, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])   # onnx's own inference hangs
    with pytest.raises(ModelError) as error:                                        # on some of these
        from_model(proto)
    assert says in str(error.value) and "'n0' (Einsum)" in str(error.value), str(error.value)


def test_einsum_onnx_cases():
    for case in node_cases("einsum").values():
        check_case(case)


# -- simulation ------------------------------------------------------------------------------------------

def test_reductions_softmax_and_einsum_simulate_on_a100_with_time():
    nodes = [helper.make_node("ReduceLogSumExp", ["x", "axes"], ["r"], name="lse", keepdims=1),
             helper.make_node("ReduceL2", ["x", "axes"], ["l2"], name="l2", keepdims=1),
             helper.make_node("Sub", ["r", "l2"], ["y"], name="sub"),
             helper.make_node("Hardmax", ["x"], ["h"], name="hardmax", axis=1),
             helper.make_node("Einsum", ["h"], ["diag"], name="diag", equation="bii->bi"),
             helper.make_node("Einsum", ["diag", "x"], ["e"], name="product", equation="bi,bij->bj"),
             helper.make_node("ReduceProd", ["e", "axes"], ["p"], name="prod", keepdims=1)]
    proto = model(nodes, [("x", F32, [16, 64, 64])], [("y", F32), ("p", F32)], 18,
                  [init("axes", np.array([-1], dtype=np.int64))])
    result = run(from_model(proto), "a100")
    seconds = {}
    for op in result.ops:
        seconds[op.node] = seconds.get(op.node, 0.0) + op.seconds
    assert all(seconds[name] > 0 for name in ("lse", "l2", "hardmax", "diag", "product", "prod")), seconds
    kinds = {op.node: op.kind for op in result.ops if op.node in ("lse", "product", "hardmax")}
    assert kinds == {"lse": "reduce", "product": "einsum", "hardmax": "reduce"}
