"""`accelsim validate cuda`: its suites, the zoo's ops as cases, and the whole harness end to end on this host
under Triton's CPU interpreter (--device cpu-interpreter): vendor call, generated kernels, numerics check, CSV."""
import csv
import os
import subprocess
import sys

import pytest
import yaml

from accelsim.validate.cases import parse
from accelsim.validate.cuda import Row
from accelsim.validate.torch_ops import TOLERANCE
from accelsim.validate.cuda_suites import GEMM_DTYPES, SUITES, suite_keys
from accelsim.validate.zoo_cases import case_key, model_cases
from compiler.dtypes import DType
from compiler.compile import Options, compile_graph


def test_every_suite_key_parses_and_the_gemm_suite_spans_the_issue():
    for keys in SUITES.values():
        for key in keys:
            assert parse(key).key == key
    gemm = [parse(k) for k in SUITES["gemm"]]
    assert {c.dims[0] for c in gemm} == {256, 512, 1024, 2048, 4096, 8192, 16384}
    assert {c.dtype.value for c in gemm} == set(GEMM_DTYPES) == {"bf16", "fp16", "tf32", "fp32", "fp8"}
    assert {parse(k).dims[0] for k in SUITES["decode"]} == {1, 2, 4, 8, 16}
    assert {parse(k).kind for k in SUITES["attention"]} >= {"attention", "softmax", "layernorm", "gelu"}
    assert len(SUITES["conv"]) == 5 + 2 * 14     # AlexNet's five, ResNet-50's fourteen at batch 1 and 32


def test_fp8_cases_only_where_the_gpu_has_them():
    with_fp8, without = suite_keys("gemm", fp8=True)["gemm"], suite_keys("gemm", fp8=False)["gemm"]
    assert len(with_fp8) - len(without) == 7 and not any(k.endswith("fp8") for k in without)
    assert "smoke" not in suite_keys("all", fp8=True)


@pytest.mark.parametrize("model, options", [("alexnet", {}), ("bert_base", {"seq": 16, "layers": 1})])
def test_zoo_ops_become_cases_with_the_same_work(model, options):
    """Each Einsum of the model turned into a key builds a one-op model with exactly the op's MACs."""
    from accelsim.sim.model import load_model

    ir = compile_graph(load_model(model, **options), Options(dtype=DType.bf16))
    einsums = [op for op in ir.ops if op.kind.value == "einsum"]
    assert einsums
    for op in einsums:
        key = case_key(op, DType.bf16)
        assert key is not None and parse(key).macs == op.macs, (op.name, key)


def test_zoo_model_counts_repeats_and_names_what_it_skips():
    cases = model_cases("resnet18", DType.bf16, "h200", image=64)
    assert cases.counts["conv 1 64 16 16 64 3 3 1 1 1 bf16"] == 4     # layer1: two blocks of two 3x3 convs
    assert cases.counts["batchnorm 1 64 16 16 bf16"] == 4              # ... each followed by its batch norm
    assert "MaxPool" in cases.skipped and "BatchNormalization" not in cases.skipped
    assert 0 < cases.covered_s < cases.total_s


def test_a_kernel_off_by_more_than_its_dtype_allows_is_a_mismatch():
    row = Row("gemm", parse("gemm 8 8 8 bf16"), 1, 1e-5, 1e-5, 1e-5, 3e-2, "", "cuBLAS")
    assert row.mismatch and not Row(**{**row.__dict__, "triton_error": 1e-3}).mismatch
    assert not Row(**{**row.__dict__, "triton_error": None}).mismatch   # no kernel ran: nothing to compare


def _accelsim(*args, env_extra=None):
    env = {**os.environ, "TRITON_INTERPRET": "1", **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "accelsim.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_harness_end_to_end_under_the_interpreter(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    out = tmp_path / "smoke"
    proc = _accelsim("validate", "cuda", "--device", "cpu-interpreter", "--suite", "smoke", "--arch", "h100",
                     "--repeats", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = list(csv.DictReader((out / "measurements.csv").open()))
    assert [r["case"] for r in rows] == SUITES["smoke"]
    for r in rows:
        tolerance = TOLERANCE[parse(r["case"]).dtype]          # fp32 1e-4: the kernels compute what the library does
        assert r["triton_s"] and float(r["triton_error"]) < tolerance and not r["note"], r
        assert float(r["predicted_s"]) > 0 and r["triton_kernel"], r
    meta = yaml.safe_load((out / "dataset.yaml").read_text())
    assert meta["cases_measured"] == len(rows) and meta["device"]["software"]["triton"]
    assert meta["targets"] == {"smoke": {"report_only": True}}
    assert proc.stdout.count("not a GPU") == 2          # said before the run and beside its figures
    score = _accelsim("validate", "score", str(out))
    assert score.returncode == 0 and "smoke" in score.stdout, score.stdout + score.stderr
    again = _accelsim("validate", "cuda", "--device", "cpu-interpreter", "--suite", "smoke", "--arch", "h100",
                      "--repeats", "1", "--out", str(out))
    assert again.returncode == 2 and "already holds files" in again.stderr    # as validate cpu: never over a dataset
    assert list(csv.DictReader((out / "measurements.csv").open())) == rows


def test_budget_stops_between_cases_and_keeps_what_it_measured(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    out = tmp_path / "short"
    proc = _accelsim("validate", "cuda", "--device", "cpu-interpreter", "--suite", "smoke", "--repeats", "1",
                     "--budget", "0.001", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "cases not run" in proc.stdout
    rows = list(csv.DictReader((out / "measurements.csv").open()))
    meta = yaml.safe_load((out / "dataset.yaml").read_text())
    assert len(rows) == meta["cases_measured"] == 1 and meta["cases_not_reached"] == len(SUITES["smoke"]) - 1


@pytest.mark.parametrize("args, words", [
    (["--suite", "nope"], ["--suite 'nope'", "gemm", "smoke"]),
    (["--repeats", "0"], ["--repeats 0"]),
    (["--budget", "-1"], ["--budget -1"]),
    (["--suite", "smoke"], ["no CUDA device", "cpu-interpreter"]),     # this machine has no GPU
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, words):
    pytest.importorskip("torch")
    proc = _accelsim("validate", "cuda", "--out", str(tmp_path / "x"), *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert all(w in proc.stderr for w in words), proc.stderr


def test_a_case_met_again_reuses_its_measurement(tmp_path):
    """A zoo op that an earlier suite already timed is written again with the same figures, not re-timed."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    out = tmp_path / "twice"
    proc = _accelsim("validate", "cuda", "--device", "cpu-interpreter", "--repeats", "1", "--out", str(out),
                     "--case", "add 4 33 fp32", "--case", "gelu 4 33 fp32", "--case", "add 4 33 fp32")
    assert proc.returncode == 0, proc.stderr
    first, _, again = csv.DictReader((out / "measurements.csv").open())
    assert again["case"] == first["case"] and again["measured_s"] == first["measured_s"]
    assert again["triton_s"] == first["triton_s"]


@pytest.mark.parametrize("key", ["scaledgemm 6 24 320 128 fp8", "scaledbgemm 2 6 24 320 128 fp8"])
def test_block_scaled_cases_mean_dequantize_then_multiply_on_a_cpu(key):
    """Each operand times its scales repeated over their blocks (K = 320: the last block is 64 long), written
    out in numpy per batch; a GPU is refused by name, there being no block-scaled vendor kernel wired up."""
    import numpy as np
    pytest.importorskip("torch")
    from accelsim.validate.torch_ops import vendor
    from compiler.errors import UserError

    case = parse(key)
    lib = vendor(case, "cpu")
    x = {name: t.float().numpy() for name, t in lib.inputs.items()}
    a, b = x["a"].reshape(-1, 6, 320), x["b"].reshape(-1, 320, 24)
    sa, sb = x["a_scale"].reshape(-1, 6, 3), x["b_scale"].reshape(-1, 3, 24)
    want = np.stack([(a[i] * np.repeat(sa[i], 128, axis=1)[:, :320]) @ (b[i] * np.repeat(sb[i], 128, axis=0)[:320])
                     for i in range(len(a))])
    got = lib.call().float().numpy().reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
    with pytest.raises(UserError, match="no block-scaled vendor kernel"):
        vendor(case, "cuda")
