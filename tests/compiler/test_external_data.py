"""ONNX external data: simulation never reads weights, `eval` memory-maps them, and a hostile `location` or a
declared size the file cannot hold is a clear ModelError before anything is read or allocated.

The "over 2 GB" model is a 32768 x 20480 fp32 MatMul weight (2.5 GiB) in a sparse file: no bytes are written,
so the test costs a few seconds and no disk, and its RSS shows whether anything read the weight.
"""
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.frontend import load_onnx
from compiler.ops.interpret import run_graph

ort = pytest.importorskip("onnxruntime")
ACCELSIM = Path(sys.executable).parent / "accelsim"
BIG_K, BIG_N = 32768, 20480                  # fp32: 2,684,354,560 bytes, past 2 GiB (and 2^31)
SMALL_RSS_BYTES = 600 << 20                  # python + numpy + onnx + accelsim import alone is ~150-200 MiB


def external(name: str, data_type: int, dims, location: str, offset: int | None = None,
             length: int | None = None) -> TensorProto:
    """An initializer whose data lies in `location`, as ONNX's external-data keys declare it."""
    tensor = TensorProto(name=name, data_type=data_type, dims=dims, data_location=TensorProto.EXTERNAL)
    tensor.external_data.add(key="location", value=location)
    for key, value in (("offset", offset), ("length", length)):
        if value is not None:
            tensor.external_data.add(key=key, value=str(value))
    return tensor


def matmul_model(folder: Path, w: TensorProto, k: int, n: int, extra=()) -> Path:
    """y[b, n] = x[b, k] @ w[k, n], saved as it is (the external data written, or not, by the caller)."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "ext",
                              [vi("x", TensorProto.FLOAT, [1, k])], [vi("y", TensorProto.FLOAT, [1, n])],
                              [w, *extra])
    path = folder / "model.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def small_model(folder: Path, location: str = "w.bin", offset: int = 0, length: int | None = 48) -> Path:
    """A 3 x 4 fp32 weight declared at `location`; the caller writes (or does not write) the file."""
    return matmul_model(folder, external("w", TensorProto.FLOAT, [3, 4], location, offset, length), 3, 4)


@pytest.fixture
def big(tmp_path):
    """The big model's path; its data file removed afterwards (pytest keeps recent tmp folders)."""
    yield big_model(tmp_path)
    (tmp_path / "weights.bin").unlink()


def big_model(folder: Path) -> Path:
    """A 2.5 GiB weight at offset 4096 and a bias after it (past 2^31 bytes) in one sparse file; a few values
    written so that reading at the wrong offset shows."""
    w_bytes = BIG_K * BIG_N * 4
    w = external("w", TensorProto.FLOAT, [BIG_K, BIG_N], "weights.bin", 4096, w_bytes)
    bias_offset = 4096 + w_bytes
    bias = external("bias", TensorProto.FLOAT, [BIG_N], "weights.bin", bias_offset, BIG_N * 4)
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"], name="mm"),
             helper.make_node("Add", ["xw", "bias"], ["y"], name="bias_add")]
    graph = helper.make_graph(nodes, "big", [vi("x", TensorProto.FLOAT, ["b", BIG_K])],
                              [vi("y", TensorProto.FLOAT, ["b", BIG_N])], [w, bias])
    path = folder / "big.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with open(folder / "weights.bin", "wb") as file:
        file.truncate(bias_offset + BIG_N * 4)                 # sparse: no block written for the holes
        file.seek(4096)
        file.write(np.array([1.5, -2.0], dtype="<f4").tobytes())        # w[0, 0:2]
        file.seek(4096 + w_bytes - 4)
        file.write(np.array([7.25], dtype="<f4").tobytes())              # w[-1, -1]
        file.seek(bias_offset)
        file.write(np.array([3.0, 4.0], dtype="<f4").tobytes())         # bias[0:2]
    return path


# -- eval: values right, memory-mapped ----------------------------------------------------------------------

def test_eval_memory_maps_weights_and_matches_onnxruntime(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "bias"], ["y"]),
         helper.make_node("Gather", ["y", "index"], ["z"], axis=1)], "g",
        [vi("x", TensorProto.FLOAT, [2, 16])], [vi("z", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "bias"),
         numpy_helper.from_array(np.array([7, 0, 2], dtype=np.int64), "index")])
    path = tmp_path / "mlp.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path),
                    save_as_external_data=True, all_tensors_to_one_file=True, location="mlp.bin", size_threshold=0)
    x = rng.standard_normal((2, 16)).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    graph = load_onnx(path)
    for name in ("w", "bias", "index"):
        assert isinstance(graph.weights[name], np.memmap), name
        assert not graph.weights[name].flags.writeable, name
    np.testing.assert_array_equal(graph.weights["w"], w)
    np.testing.assert_allclose(run_graph(graph, {"x": x})["z"], expected, rtol=1e-6, atol=1e-6)


def test_a_scan_body_reads_its_external_data_beside_the_model(tmp_path, monkeypatch):
    vi = helper.make_tensor_value_info
    w = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s", "w"], ["sw"]), helper.make_node("Add", ["sw", "xt"], ["s2"]),
         helper.make_node("Identity", ["s2"], ["yt"])], "body",
        [vi("s", TensorProto.FLOAT, [1, 4]), vi("xt", TensorProto.FLOAT, [1, 4])],
        [vi("s2", TensorProto.FLOAT, [1, 4]), vi("yt", TensorProto.FLOAT, [1, 4])], [numpy_helper.from_array(w, "w")])
    graph = helper.make_graph([helper.make_node("Scan", ["s0", "x"], ["sN", "y"], body=body, num_scan_inputs=1)],
                              "g", [vi("s0", TensorProto.FLOAT, [1, 4]), vi("x", TensorProto.FLOAT, [3, 1, 4])],
                              [vi("sN", TensorProto.FLOAT, [1, 4]), vi("y", TensorProto.FLOAT, [3, 1, 4])])
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "scan.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path),
                    save_as_external_data=True, location="scan.bin", size_threshold=0)
    body_w = onnx.load(str(path), load_external_data=False).graph.node[0].attribute[0].g.initializer[0]
    assert body_w.data_location == TensorProto.EXTERNAL
    feeds = {"s0": np.ones((1, 4), np.float32), "x": np.arange(12, dtype=np.float32).reshape(3, 1, 4)}
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    monkeypatch.chdir(tmp_path)                     # beside the model, not beside the working directory
    got = run_graph(load_onnx(path), feeds)
    np.testing.assert_allclose(got["sN"], expected[0], rtol=1e-5)
    np.testing.assert_allclose(got["y"], expected[1], rtol=1e-5)


@pytest.mark.parametrize("dtype", [DType.fp16, DType.bf16, DType.fp8, DType.int8, DType.int4, DType.uint4,
                                   DType.int64, DType.bool])
def test_every_stored_type_reads_as_onnx_reads_it(tmp_path, dtype):
    rng = np.random.default_rng(1)
    values = rng.integers(-7, 8, size=(5, 3)) if dtype != DType.bool else rng.integers(0, 2, size=(5, 3))
    tensor = helper.make_tensor("w", dtype.onnx, [5, 3], values.flatten().tolist())
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", dtype.onnx, [5, 3])], [tensor])
    path = tmp_path / "typed.onnx"
    onnx.save_model(helper.make_model(graph), str(path), save_as_external_data=True, location="typed.bin",
                    size_threshold=0)
    expected = numpy_helper.to_array(onnx.load(str(path)).graph.initializer[0])   # onnx's own reader
    got = load_onnx(path).weights["w"]
    assert got.dtype == dtype.numpy
    np.testing.assert_array_equal(got, expected.astype(dtype.numpy))


# -- a model over 2 GB --------------------------------------------------------------------------------------

def peak_rss_bytes(script: str) -> tuple[int, str]:
    """Peak RSS of a fresh Python running `script`, and what it printed: VmHWM of /proc/self/status, in KiB, which a
    new program starts afresh (ru_maxrss keeps the high-water mark of the process it was forked from, a test worker
    that may hold a gigabyte)."""
    code = (f"{script}\nhwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
            f"print('RSS', hwm.split()[1])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split("RSS ")[-1]) << 10, proc.stdout


def test_a_2_5_gib_model_simulates_without_reading_its_weights(big):
    path = big
    assert load_onnx(path, batch=1, weights=False).weights["w"] is None
    rss, out = peak_rss_bytes(f"from accelsim.cli import main\n"
                              f"main(['run', {str(path)!r}, '--arch', 'a100', '--batch', '1'])")
    assert "latency" in out and "mm" in out
    assert rss < SMALL_RSS_BYTES, f"accelsim run on a 2.5 GiB model peaked at {rss >> 20} MiB"


def test_a_2_5_gib_weight_is_memory_mapped_at_eval(big):
    path = big
    rss, out = peak_rss_bytes(
        f"import numpy as np\nfrom compiler.frontend import load_onnx\n"
        f"graph = load_onnx({str(path)!r}, batch=1)\nw, bias = graph.weights['w'], graph.weights['bias']\n"
        f"assert isinstance(w, np.memmap) and not w.flags.writeable and w.shape == ({BIG_K}, {BIG_N})\n"
        f"print('VALUES', *w[0, :3].tolist(), w[-1, -1], *bias[:3].tolist())")
    assert out.split("VALUES ")[1].split()[:7] == ["1.5", "-2.0", "0.0", "7.25", "3.0", "4.0", "0.0"]
    assert rss < SMALL_RSS_BYTES, f"loading a 2.5 GiB weight for eval peaked at {rss >> 20} MiB"


# -- declared sizes the file cannot hold --------------------------------------------------------------------

@pytest.mark.parametrize("weights", [True, False])
def test_a_weight_past_the_end_of_its_file_is_refused_before_allocating(tmp_path, weights):
    w = external("w", TensorProto.FLOAT, [BIG_K, BIG_N], "w.bin", 0, BIG_K * BIG_N * 4)
    path = matmul_model(tmp_path, w, BIG_K, BIG_N)
    (tmp_path / "w.bin").write_bytes(b"\0" * 1000)
    tracemalloc.start()
    try:
        with pytest.raises(ModelError, match=r"initializer 'w'.*w\.bin is truncated \(1000 of 2684354560 bytes "
                                             r"at offset 0; the file holds 1000\)"):
            load_onnx(path, batch=1, weights=weights)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_an_offset_past_the_end_is_refused(tmp_path):
    path = small_model(tmp_path, offset=40)
    (tmp_path / "w.bin").write_bytes(b"\0" * 64)
    with pytest.raises(ModelError, match=r"'w'.*w\.bin is truncated \(24 of 48 bytes at offset 40; the file "
                                         r"holds 64\)"):
        load_onnx(path)


def test_a_length_that_disagrees_with_the_shape_is_refused(tmp_path):
    path = small_model(tmp_path, length=4 << 30)
    (tmp_path / "w.bin").write_bytes(b"\0" * 48)
    with pytest.raises(ModelError, match=r"'w'.*length 4294967296 bytes in w\.bin, but its shape \[3, 4\] "
                                         r"needs 48"):
        load_onnx(path, weights=False)


@pytest.mark.parametrize("key, value", [("offset", "-8"), ("length", "12.5"), ("offset", "0x10")])
def test_an_offset_or_length_that_is_not_a_byte_count_is_refused(tmp_path, key, value):
    path = small_model(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"\0" * 64)
    proto = onnx.load(str(path), load_external_data=False)
    entry = next(e for e in proto.graph.initializer[0].external_data if e.key == key)
    entry.value = value
    onnx.save_model(proto, str(path))
    with pytest.raises(ModelError, match=rf"'w'.*{key} '{value}' in w\.bin is not a byte count"):
        load_onnx(path)


def test_a_negative_dimension_is_refused(tmp_path):
    path = matmul_model(tmp_path, external("w", TensorProto.FLOAT, [3, -4], "w.bin"), 3, 4)
    (tmp_path / "w.bin").write_bytes(b"\0" * 48)
    with pytest.raises(ModelError, match=r"'w': shape \[3, -4\] has a negative dimension"):
        load_onnx(path, weights=False)


def test_missing_external_data_still_simulates(tmp_path):
    graph = load_onnx(small_model(tmp_path), batch=1)
    assert graph.weights["w"] is None and graph.tensors["w"].shape == (3, 4)


# -- the location stays inside the model's folder -----------------------------------------------------------

@pytest.mark.parametrize("weights", [True, False])
@pytest.mark.parametrize("location", ["../outside.bin", "sub/../../outside.bin", "/etc/passwd", ""])
def test_a_location_outside_the_folder_is_refused(tmp_path, location, weights):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "outside.bin").write_bytes(b"\0" * 48)
    with pytest.raises(ModelError, match=rf"initializer 'w': external data location '{location}' must be a file "
                                         rf"beside the model"):
        load_onnx(small_model(folder, location=location), weights=weights)


@pytest.mark.parametrize("link", ["w.bin", "sub"])        # the file itself, or a folder on its way, is a link
def test_a_link_leading_outside_the_folder_is_refused(tmp_path, link):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    location = "w.bin" if link == "w.bin" else "sub/w.bin"
    (folder / link).symlink_to(outside / link if link == "w.bin" else outside)
    path = small_model(folder, location=location)
    for weights in (True, False):
        with pytest.raises(ModelError, match=rf"'w': external data '{location}' resolves to .*outside.w\.bin, "
                                             rf"outside .*model, the model's folder"):
            load_onnx(path, weights=weights)


def test_a_link_that_stays_inside_the_folder_is_followed(tmp_path):
    (tmp_path / "real.bin").write_bytes(np.arange(12, dtype=np.float32).tobytes())
    (tmp_path / "w.bin").symlink_to("real.bin")
    np.testing.assert_array_equal(load_onnx(small_model(tmp_path)).weights["w"], np.arange(12).reshape(3, 4))


def test_a_location_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "w.bin").mkdir()
    with pytest.raises(ModelError, match=r"'w': external data 'w\.bin' is not a regular file"):
        load_onnx(small_model(tmp_path))


def test_the_big_model_takes_no_disk(big):
    assert os.stat(big.parent / "weights.bin").st_size > 2 << 30
    assert os.stat(big.parent / "weights.bin").st_blocks * 512 < 1 << 20     # sparse: the holes take no disk
