"""`eval --inputs`: an .npz is read only after every array's declared bytes fit the memory budget, and any file,
damaged or hostile, ends in arrays or a one-line error (exit 2)."""
import io
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsim.sim.inputs import ENV, eval_budget, read_arrays
from compiler.errors import UserError
from compiler.ops.room import Budget

BUDGET = Budget(1 << 20, "a test's 1 MiB")


def header(shape, descr="<f4", version=(1, 0)) -> bytes:
    out = io.BytesIO()
    write = np.lib.format.write_array_header_1_0 if version == (1, 0) else np.lib.format.write_array_header_2_0
    write(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def test_arrays_come_back_as_saved(tmp_path):
    path = tmp_path / "in.npz"
    x, ids = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1, 2]], np.int64)
    np.savez_compressed(path, x=x, ids=np.asfortranarray(ids))
    arrays = read_arrays(str(path), BUDGET)
    assert set(arrays) == {"x", "ids"}
    np.testing.assert_array_equal(arrays["x"], x)
    np.testing.assert_array_equal(arrays["ids"], ids)


def test_a_lying_header_is_refused_before_anything_is_allocated(tmp_path):
    path = tmp_path / "lying.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", header((2 ** 40, 2 ** 20)) + bytes(64))
    with pytest.raises(UserError, match=r"lying.npz: array 'x' of shape \[1099511627776, 1048576\] float32 needs "
                                        r"4 EiB, more than the memory budget of 1 MiB \(a test's 1 MiB\)"):
        read_arrays(str(path), BUDGET)


def test_a_deflate_bomb_is_refused_before_it_is_inflated(tmp_path):
    """2 MiB of declared float32 zeros deflate to a few KiB: the header says what inflating would cost."""
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", header((1 << 19,)) + bytes(2 << 20))
    assert path.stat().st_size < 10_000
    with pytest.raises(UserError, match="array 'x' of shape \\[524288\\] float32 needs 2 MiB, more than"):
        read_arrays(str(path), BUDGET)


def test_arrays_together_must_fit(tmp_path):
    path = tmp_path / "two.npz"
    np.savez(path, a=np.zeros(100_000, np.float32), b=np.zeros(200_000, np.float32))
    with pytest.raises(UserError, match="array 'b' of shape \\[200000\\] float32 needs 781 KiB beside the 391 KiB "
                                        "held already"):
        read_arrays(str(path), BUDGET)


@pytest.mark.parametrize("content, message", [
    (b"PK\x03\x04 truncated", "cannot read input arrays \\(File is not a zip file\\)"),
    (b"\x93NUMPY\x01\x00", "a single .npy array names no input"),
    (b"x,y\n1,2\n", "not an .npz file"),
    (b"", "not an .npz file"),
])
def test_files_that_are_no_npz_are_named(tmp_path, content, message):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(UserError, match=f"bad.npz: {message}"):
        read_arrays(str(path), BUDGET)


def test_half_an_npz_and_objects_are_refused(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, x=np.ones((4, 4), np.float32))
    half = tmp_path / "half.npz"
    half.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    with pytest.raises(UserError, match="half.npz: cannot read input arrays"):
        read_arrays(str(half), BUDGET)
    np.savez(path, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(UserError, match="array 'x' holds Python objects"):
        read_arrays(str(path), BUDGET)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(UserError, match="member 'notes.txt' is not an .npy array"):
        read_arrays(str(path), BUDGET)


def test_the_budget_is_half_the_memory_available_or_the_environments(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert 0 < eval_budget().nbytes and "half the" in eval_budget().origin
    monkeypatch.setenv(ENV, "8 GiB")
    assert eval_budget() == Budget(8 << 30, f"{ENV}=8 GiB")
    monkeypatch.setenv(ENV, "lots")
    with pytest.raises(UserError, match=f"{ENV}='lots'"):
        eval_budget()


_shapes = st.lists(st.one_of(st.integers(0, 4), st.integers(0, 2 ** 62)), max_size=4).map(tuple)
_descrs = st.sampled_from(["<f4", "<f8", "|b1", "<i8", "|O", "<U3", "|V4", "<c8", ">i2", "<f4x", "(2,)i4"])


@pytest.mark.filterwarnings("ignore:Duplicate name")
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(["x", "y", "x.npy", "d/x", "notes"]), _shapes, _descrs,
                          st.sampled_from([(1, 0), (2, 0)]), st.integers(0, 64), st.booleans()), max_size=3),
       st.integers(0, 400), st.booleans())
def test_any_npz_reads_or_is_refused(tmp_path_factory, members, cut, compressed):
    """Members of any name, shape, dtype and header version, with too few or too many bytes, zipped or deflated,
    the file cut anywhere: arrays, or a UserError."""
    path = tmp_path_factory.mktemp("npz") / "in.npz"
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, shape, descr, version, extra, valid in members:
            try:
                head = header(shape, descr, version)
            except (ValueError, TypeError):
                head = b"\x93NUMPY\x01\x00" + bytes(4)
            size = 0
            if valid:
                try:
                    size = min(int(np.prod(shape, dtype=object)) * np.dtype(descr).itemsize, 4096)
                except TypeError:
                    pass
            archive.writestr(f"{name}.npy" if name != "notes" else name, head + bytes(size + extra))
    data = path.read_bytes()
    if cut:
        path.write_bytes(data[:cut])
    try:
        read_arrays(str(path), BUDGET)
    except UserError:
        pass


def test_eval_draws_no_random_input_that_would_not_fit(tmp_path, monkeypatch, capsys):
    """An input declared [2^20, 2^20] float32 (4 TiB, 12 TiB with its float64 draw) is refused before drawing."""
    from onnx import TensorProto, helper

    from accelsim.cli import main
    from tests.compiler.onnx_models import model

    path = tmp_path / "huge_input.onnx"
    path.write_bytes(model([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2 ** 20, 2 ** 20])],
                           [("y", TensorProto.FLOAT)], 17).SerializeToString())
    monkeypatch.setenv(ENV, "1 GiB")
    assert main(["eval", str(path)]) == 2
    assert f"huge_input.onnx: input 'x' of shape [1048576, 1048576] drawn at random needs 12 TiB, more than the " \
           f"memory budget of 1 GiB ({ENV}=1 GiB)" in capsys.readouterr().err


def test_a_training_step_runs_under_the_budget_too(monkeypatch, capsys):
    from accelsim.cli import main

    monkeypatch.setenv(ENV, "1 MB")
    assert main(["eval", "alexnet", "--train", "--batch", "1", "--opt", "image=63", "--opt", "fc=64",
                 "--opt", "classes=10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accelsim: error: zoo model 'alexnet': node") and f"({ENV}=1 MB)" in err


def test_an_address_space_limit_bounds_the_budget(monkeypatch):
    """Under `ulimit -v 4000000` (3.8 GiB) the budget is at most half of it, whatever the machine has free."""
    import resource
    import subprocess
    import sys

    monkeypatch.delenv(ENV, raising=False)
    limit = 4_000_000 * 1024

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    out = subprocess.run([sys.executable, "-c", "from accelsim.sim.inputs import eval_budget; "
                          "print(eval_budget().nbytes)"], capture_output=True, text=True, preexec_fn=limited,
                         check=True).stdout
    assert 0 < int(out) <= limit // 2
