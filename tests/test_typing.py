"""Types and lint as pyproject.toml configures them: mypy ([tool.mypy]: strict on the whole compiler, the engine
and pricing) and ruff ([tool.ruff]) over the tree. Each fails with the checker's own report."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip(tool)
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_mypy_finds_no_error():
    done = _run("mypy")     # files, strictness and cache (.mypy_cache/) as [tool.mypy] says
    report = done.stdout[-8000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    # an override naming no module (a misspelt or moved one) would check nothing, silently
    assert "unused section" not in report, report


def test_ruff_finds_nothing():
    done = _run("ruff", "check", ".")
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
