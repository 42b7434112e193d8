"""ConvTranspose against onnxruntime and onnx's conformance cases, through the Graph and the IR (groups, strides,
pads, output_padding, output_shape, dilations, auto_pad, 1D to 3D); its lowering is one Einsum over the spread
input with the flipped kernel, simulated on a preset; bad attributes named by node."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelsim.sim.api import run
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import Einsum
from compiler.ops.lower import lower
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import check_against_ort
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32 = TensorProto.FLOAT
RNG = np.random.default_rng(5)


def _model(x_shape, w_shape, bias=False, **attrs):
    inits = [numpy_helper.from_array(RNG.standard_normal(w_shape).astype(np.float32), "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(w_shape[1] * attrs.get("group", 1))
                                             .astype(np.float32), "b"))
        names.append("b")
    node = helper.make_node("ConvTranspose", names, ["y"], **attrs)
    return onnx_model([node], [("x", F32, list(x_shape))], [("y", F32)], 17, inits)


@pytest.mark.parametrize("x_shape,w_shape,bias,attrs", [
    ((1, 2, 4, 5), (2, 3, 3, 3), False, {}),
    ((2, 4, 4, 5), (4, 2, 3, 2), True, {"group": 2, "strides": [2, 3], "pads": [1, 0, 0, 1],
                                        "output_padding": [1, 2]}),
    ((1, 2, 5), (2, 3, 3), True, {"dilations": [2], "strides": [2]}),
    ((1, 2, 3, 3), (2, 1, 3, 3), False, {"strides": [2, 2], "output_shape": [8, 7]}),
    ((1, 2, 3, 3), (2, 1, 3, 3), False, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3, 3), (2, 1, 3, 3), False, {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 4), (2, 2, 2, 3), False, {"auto_pad": "VALID", "strides": [3, 1], "dilations": [1, 2]}),
    ((1, 2, 3, 3, 2), (2, 2, 2, 2, 2), True, {"strides": [1, 2, 2], "pads": [1, 0, 0, 0, 1, 0]}),
    ((1, 6, 3, 3), (6, 1, 3, 3), False, {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),   # depthwise
])
def test_convtranspose_matches_onnxruntime(x_shape, w_shape, bias, attrs):
    proto = _model(x_shape, w_shape, bias, **attrs)
    check_against_ort(proto, {"x": RNG.standard_normal(x_shape).astype(np.float32)})


@pytest.mark.parametrize("name", sorted(n for n in node_cases("convtranspose") if not n.endswith("_expanded")))
def test_onnx_conformance_case_graph_and_ir(name):
    check_case(node_cases("convtranspose")[name])


def test_convtranspose_lowers_to_one_einsum_and_simulates():
    graph = from_model(_model((1, 32, 16, 16), (32, 16, 4, 4), bias=True, strides=[2, 2], pads=[1, 1, 1, 1]))
    (einsum,) = [op for op in lower(graph).ops if isinstance(op, Einsum)]
    # (16 - 1) * 2 + 4 - 2 = 32 outputs a side; each sums 32 input channels x 4 x 4 taps (zeros included)
    assert einsum.macs == 1 * 16 * 32 * 32 * 32 * 4 * 4
    timed = [o for o in run(graph, arch="a100").ops if o.op == "ConvTranspose"]
    assert timed and sum(o.seconds for o in timed) > 0 and all(o.bytes > 0 for o in timed)


@pytest.mark.parametrize("w_shape,attrs,pattern", [
    ((3, 2, 3, 3), {}, r"the weight's dim 0 \(3\) must equal the input channels \(2\)"),
    ((2, 2, 3, 3), {"group": 3}, r"group 3 must divide the input channels \(2\)"),
    ((2, 2, 3, 3), {"output_padding": [2, 0], "strides": [2, 2]}, r"output_padding must be 2 integers each "
                                                                    r"0 <= p < max\(stride, dilation\)"),
    ((2, 2, 3, 3), {"auto_pad": "SAME"}, r"auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"),
    ((2, 2, 3, 3), {"pads": [3, 3, 3, 3]}, r"pads \[3, 3, 3, 3\] leave no output"),
])
def test_bad_attributes_name_the_node(w_shape, attrs, pattern):
    with pytest.raises(ModelError, match=r"node '\w+' \(ConvTranspose\): " + pattern):
        from_model(_model((1, 2, 2, 2), w_shape, **attrs))
