"""The package metadata uses today's forms: an SPDX license expression (PEP 639), so installing warns of nothing
deprecated, with a setuptools that reads it."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_license_is_an_spdx_expression():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in project["build-system"]["requires"])


def test_make_run_needs_python_only():
    import subprocess

    run = subprocess.run(["make", "-n", "-B", "run"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    test = subprocess.run(["make", "-n", "-B", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "accelsim run resnet50 --arch tpu_v1" in run and "apt-get" not in run and "[test]" not in run
    assert "apt-get" in test and "'.[test]'" in test and "pytest" in test


def test_no_test_folder_is_on_the_import_path():
    """Test files are imported by their place in the tree (pytest's importlib mode), never by putting their folder
    on sys.path: a helper there would hide any package of its name (tests/compiler/kernels.py once stood in for the
    `kernels` package transformers imports, and every exporter test failed)."""
    import sys

    tests = ROOT / "tests"
    assert not [p for p in sys.path if p and Path(p).resolve().is_relative_to(tests)]
