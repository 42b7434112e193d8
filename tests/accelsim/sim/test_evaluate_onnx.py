"""ONNX models as people export them, through accelsim.evaluate and the CLI: bfloat16 and float8 inputs given as
ml_dtypes arrays (or in an .npz, which keeps their bytes), and graph inputs read as shapes bound by value with
--bind or from the --inputs file. onnxruntime is the oracle (fed the same values widened to float32 where it takes
no ml_dtypes array)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import accelsim
from accelsim.cli import main
from compiler.errors import UserError


def save(path, nodes, inputs, outputs):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in inputs],
                         [h.make_tensor_value_info(*o) for o in outputs])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), str(path))
    return str(path)


def scores(path, dtype):
    """Q @ K^T * 0.5 computed in `dtype`, returned as float32 (bf16 MatMul is not in onnxruntime's CPU kernels)."""
    nodes = [h.make_node("Cast", [name], [name + "32"], to=T.FLOAT) for name in ("Q", "K")]
    nodes += [h.make_node("Transpose", ["K32"], ["KT"], perm=[1, 0]), h.make_node("MatMul", ["Q32", "KT"], ["s"]),
              h.make_node("Constant", [], ["half"], value_float=0.5), h.make_node("Mul", ["s", "half"], ["y"])]
    return save(path, nodes, [("Q", dtype, [2, 4]), ("K", dtype, [3, 4])], [("y", T.FLOAT, [2, 3])])


def oracle(path, feeds):
    """onnxruntime's outputs for the model with its bf16 inputs declared float32, fed the same values widened."""
    model = onnx.load(path)
    for info in model.graph.input:
        info.type.tensor_type.elem_type = T.FLOAT
    wide = {k: np.asarray(v, np.float32) for k, v in feeds.items()}
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, wide)[0]


BF16 = {"Q": (np.arange(8).reshape(2, 4) / 3).astype(ml_dtypes.bfloat16),
        "K": (np.arange(12).reshape(3, 4) / 7 - 1).astype(ml_dtypes.bfloat16)}


def test_bfloat16_inputs_are_taken_as_ml_dtypes_arrays(tmp_path):
    """It said: input 'Q' is bfloat16, the model expects bf16 (stored as float32)."""
    path = scores(tmp_path / "m.onnx", T.BFLOAT16)
    _, out = accelsim.evaluate(path, inputs=BF16)
    np.testing.assert_allclose(out["y"], oracle(path, BF16), rtol=1e-6)
    widened = {k: v.astype(np.float32) for k, v in BF16.items()}     # the reference's own convention
    np.testing.assert_array_equal(accelsim.evaluate(path, inputs=widened)[1]["y"], out["y"])
    fp8 = {k: v.astype(ml_dtypes.float8_e4m3fn) for k, v in BF16.items()}
    with pytest.raises(UserError, match="'Q' is float8_e4m3fn, the model expects bf16"):
        accelsim.evaluate(path, inputs=fp8)
    fp8_path = scores(tmp_path / "fp8.onnx", T.FLOAT8E4M3FN)
    np.testing.assert_allclose(accelsim.evaluate(fp8_path, inputs=fp8)[1]["y"], oracle(fp8_path, fp8), rtol=1e-6)


def test_eval_reads_bfloat16_arrays_from_an_npz(tmp_path, capsys):
    path = scores(tmp_path / "m.onnx", T.BFLOAT16)
    np.savez(tmp_path / "in.npz", **BF16)                 # numpy keeps their bytes only ('|V2')
    assert main(["eval", path, "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "out.npz")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], oracle(path, BF16), rtol=1e-6)
    assert main(["eval", path, "--inputs", str(tmp_path / "in.npz"), "--dtype", "bf16"]) == 0   # emulated too


def reshape_topk(tmp_path):
    """y = TopK(Reshape(x, shape), k): both `shape` and `k` are graph inputs read for their values."""
    return save(tmp_path / "rk.onnx", [h.make_node("Reshape", ["x", "shape"], ["r"]),
                                       h.make_node("TopK", ["r", "k"], ["y", "i"])],
                [("x", T.FLOAT, [2, 6]), ("shape", T.INT64, [2]), ("k", T.INT64, [1])],
                [("y", T.FLOAT, None), ("i", T.INT64, None)])


X = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]], np.float32)


def test_shape_inputs_bind_by_value_from_bind_or_the_inputs_file(tmp_path, capsys):
    path = reshape_topk(tmp_path)
    feeds = {"x": X, "shape": np.array([3, 4]), "k": np.array([2])}
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    _, out = accelsim.evaluate(path, inputs=feeds)
    np.testing.assert_array_equal(out["y"], want[0])
    np.testing.assert_array_equal(out["i"], want[1])
    _, out = accelsim.evaluate(path, inputs={"x": X}, bind={"shape": (3, 4), "k": (2,)})
    np.testing.assert_array_equal(out["y"], want[0])
    np.savez(tmp_path / "in.npz", **feeds)
    assert main(["eval", path, "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "a.npz")]) == 0
    assert main(["eval", path, "--bind", "shape=3,4", "--bind", "k=2", "--out", str(tmp_path / "b.npz")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["y"], want[0])
    assert np.load(tmp_path / "b.npz")["y"].shape == (3, 2)
    assert main(["run", path, "--arch", "h100", "--bind", "shape=4,3", "--bind", "k=1", "--json", "-"]) == 0


@pytest.mark.parametrize("argv, expected", [
    (["eval", "{m}", "--bind", "shape=3,4"], "graph input 'k' (input 1 of node 'topk_1' (TopK)) decides an output's "
                                             "shape, so a random value cannot stand in for it; give it with --bind k="),
    (["run", "{m}", "--arch", "h100", "--bind", "shape=3,4"], "graph input bound with --bind NAME=V0,V1"),
    (["run", "{m}", "--arch", "h100", "--bind", "k=2"], "the target shape, tensor 'shape'"),
    (["eval", "{m}", "--bind", "shape=3,x"], "--bind 'shape=3,x': expected NAME=V0,V1,..."),
    (["eval", "{m}", "--bind", "shape=5,5", "--bind", "k=1"], "Reshape"),
    (["eval", "resnet18", "--bind", "k=1"], "--bind applies to ONNX files"),
])
def test_an_unbound_or_badly_bound_shape_input_is_one_line_naming_it(argv, expected, tmp_path, capsys):
    path = reshape_topk(tmp_path)
    assert main([a.format(m=path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert expected in err and "internal error" not in err and len(err.strip().splitlines()) == 1
    if "must be a constant" in err:
        assert "graph input 'shape'" in err and "--bind shape=V0,V1" in err


def test_a_training_step_binds_shape_inputs_from_its_inputs_too(tmp_path):
    """evaluate_step takes its inputs as evaluate does; a shape given as a graph input was refused there."""
    weight = onnx.numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Reshape", ["m", "shape"], ["y"])],
                         "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                               h.make_tensor_value_info("shape", T.INT64, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], initializer=[weight])
    path = str(tmp_path / "step.onnx")
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), path)
    values = accelsim.evaluate_step(path, inputs={"x": np.ones((2, 3), np.float32), "shape": np.array([4, 2])})
    assert values.arrays()["gradient/w"].shape == (3, 4)
