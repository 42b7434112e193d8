"""LpPool and MaxPool's Indices output against onnxruntime and onnx's own cases; their Reduces' work;
a simulation on a100."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from accelsim.sim.api import run
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import OpKind
from compiler.ops.lower import lower
from tests.compiler.onnx_models import model
from tests.compiler.oracle import check_against_ort
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(3)


def _pool(op, x, opset, outputs=(("y", F32),), **attrs):
    node = helper.make_node(op, ["x"], [name for name, _ in outputs], name="n0", **attrs)
    proto = model([node], [("x", F32, list(x.shape))], list(outputs), opset)
    return check_against_ort(proto, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, attrs", [
    ((1, 2, 9), {"kernel_shape": [3]}),
    ((2, 3, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 1]}),
    ((2, 3, 7, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 2, 5, 5), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 4, 4), {"kernel_shape": [2, 2, 2]}),
])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_matches_onnxruntime(shape, attrs, p):
    x = RNG.standard_normal(shape).astype(np.float32)
    graph = _pool("LpPool", x, 18, p=p, **attrs)
    (ir_op,) = lower(graph).ops
    y = graph.tensor("y")
    window = int(np.prod(attrs["kernel_shape"]))
    assert ir_op.kind == OpKind.reduce and ir_op.ops >= y.elements * (2 * window + 1)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2]}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                                               "strides": [2, 2]},
                                   {"kernel_shape": [2, 3], "ceil_mode": 1, "strides": [2, 2]}])
def test_maxpool_indices_match_onnxruntime(attrs, storage_order):
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    x[0, 0, :2, :2] = 9.0    # a tie: the first maximum's position
    graph = _pool("MaxPool", x, 12, outputs=(("y", F32), ("i", I64)), storage_order=storage_order, **attrs)
    values, indices = lower(graph).ops
    assert values.output.tensor == "y" and indices.output.tensor == "i" and indices.ops == 2 * values.ops


def test_lp_pool_refuses_p_0():
    node = helper.make_node("LpPool", ["x"], ["y"], name="n0", kernel_shape=[2], p=0)
    with pytest.raises(ModelError, match=r"'n0' \(LpPool\): attribute p=0 is not allowed"):
        from_model(model([node], [("x", F32, [1, 2, 4])], [("y", F32)], 18))


@pytest.mark.parametrize("module", ["lppool", "maxpool"])
def test_pool_onnx_cases(module):
    for case in node_cases(module).values():
        check_case(case)


def test_lp_pools_and_indices_simulate_on_a100_with_time():
    nodes = [helper.make_node("LpPool", ["x"], ["l"], name="lp", kernel_shape=[3, 3], p=2),
             helper.make_node("MaxPool", ["l"], ["y", "i"], name="max", kernel_shape=[2, 2], strides=[2, 2])]
    proto = model(nodes, [("x", F32, [4, 16, 34, 34])], [("y", F32), ("i", I64)], 18)
    result = run(from_model(proto), "a100")
    assert {op.name for op in result.ops} == {"lp", "max", "max:1"}
    assert all(op.kind == "reduce" and op.ops > 0 and op.seconds > 0 for op in result.ops)
