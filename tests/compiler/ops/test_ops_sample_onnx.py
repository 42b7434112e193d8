"""GridSample, AffineGrid and RoiAlign against onnxruntime and onnx's conformance cases, through the Graph and the
IR (modes, padding modes, align_corners, avg and max pooling, sampling ratios); each priced on a preset; bad
attributes named by node."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from accelsim.sim.api import run
from compiler.errors import ModelError
from compiler.frontend import from_model
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import check_against_ort
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(13)


def _grid_sample(opset=16, **attrs):
    node = helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)
    return onnx_model([node], [("x", F32, [2, 3, 4, 5]), ("g", F32, [2, 6, 7, 2])], [("y", F32)], opset)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_onnxruntime(mode, padding, align):
    grid = RNG.uniform(-1.4, 1.4, (2, 6, 7, 2)).astype(np.float32)     # some points outside: padding decides
    proto = _grid_sample(mode=mode, padding_mode=padding, align_corners=align)
    check_against_ort(proto, {"x": RNG.standard_normal((2, 3, 4, 5)).astype(np.float32), "g": grid})


@pytest.mark.parametrize("size,align", [([2, 3, 4, 5], 0), ([1, 2, 3, 4], 1)])
def test_affine_grid_matches_onnxruntime(size, align):
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    proto = onnx_model([node], [("theta", F32, [size[0], 2, 3])], [("grid", F32)], 20,
                       [numpy_helper.from_array(np.array(size, np.int64), "size")])
    check_against_ort(proto, {"theta": RNG.standard_normal((size[0], 2, 3)).astype(np.float32)})


@pytest.mark.parametrize("attrs", [{}, {"mode": "max", "sampling_ratio": 2},
                                   {"coordinate_transformation_mode": "output_half_pixel", "spatial_scale": 0.5,
                                    "output_height": 3, "output_width": 2}])
def test_roi_align_matches_onnxruntime(attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], **attrs)
    proto = onnx_model([node], [("x", F32, [2, 3, 8, 8]), ("rois", F32, [3, 4]), ("idx", I64, [3])],
                       [("y", F32)], 16)
    rois = np.array([[0, 0, 7, 7], [1.5, 2.2, 5.1, 6.3], [3, 1, 9, 4]], np.float32)
    check_against_ort(proto, {"x": RNG.standard_normal((2, 3, 8, 8)).astype(np.float32), "rois": rois,
                              "idx": np.array([0, 1, 1], np.int64)})


@pytest.mark.parametrize("module,name", [(m, n) for m in ("gridsample", "affinegrid", "roialign")
                                         for n in sorted(node_cases(m)) if not n.endswith("_expanded")])
def test_onnx_conformance_case_graph_and_ir(module, name):
    check_case(node_cases(module)[name])


def test_each_op_is_priced_on_a_unit():
    theta = helper.make_node("AffineGrid", ["theta", "size"], ["grid"])
    sample = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear")
    pool = helper.make_node("RoiAlign", ["y", "rois", "idx"], ["z"], output_height=4, output_width=4)
    proto = onnx_model([theta, sample, pool], [("theta", F32, [2, 2, 3]), ("x", F32, [2, 8, 32, 32]),
                                               ("rois", F32, [5, 4]), ("idx", I64, [5])], [("z", F32)], 20,
                       [numpy_helper.from_array(np.array([2, 8, 16, 16], np.int64), "size")])
    timed = run(from_model(proto), arch="a100").ops
    assert {o.op for o in timed} >= {"AffineGrid", "GridSample", "RoiAlign"}
    assert all(o.seconds > 0 and o.bytes > 0 for o in timed)


@pytest.mark.parametrize("op,attrs,pattern", [
    ("GridSample", {"mode": "area"}, r"mode 'area' is not one of nearest, linear, bilinear, cubic, bicubic"),
    ("GridSample", {"padding_mode": "wrap"}, r"padding_mode 'wrap' is not one of zeros, border, reflection"),
])
def test_bad_attributes_name_the_node(op, attrs, pattern):
    with pytest.raises(ModelError, match=r"node '\w+' \(" + op + r"\): " + pattern):
        from_model(_grid_sample(**attrs))


def test_roi_align_bad_mode_names_the_node():
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode="sum")
    proto = onnx_model([node], [("x", F32, [1, 1, 4, 4]), ("rois", F32, [1, 4]), ("idx", I64, [1])], [("y", F32)], 16)
    with pytest.raises(ModelError, match=r"node '\w+' \(RoiAlign\): mode 'sum' is not one of avg, max"):
        from_model(proto)
