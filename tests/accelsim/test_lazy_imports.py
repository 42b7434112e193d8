"""The command line imports what a command needs and no more: listing, help and a built-in model's run do not import
onnx (and ml_dtypes through it), networkx, matplotlib or, before an engine runs, numba (and a run read back from
the disk, accelsim.sim.cache, runs none). Each case runs in a fresh interpreter; benchmarks/cli_speed.py measures
the time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("onnx", "ml_dtypes", "matplotlib", "numba", "networkx")

# Runs accelsim's main on argv, its output discarded, and prints which of HEAVY were imported.
PROBE = """
import contextlib, io, json, sys
from accelsim.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as stop:      # --help
        code = stop.code
print(json.dumps({"code": code, "imported": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


def imported(argv: list[str], cache: Path | None = None) -> list[str]:
    """The modules of HEAVY that `accelsim ARGV` imported, in a fresh interpreter (with ACCELSIM_CACHE at `cache`,
    where given); the command must succeed."""
    env = {**os.environ, "ACCELSIM_CACHE": str(cache)} if cache else None
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["code"] in (0, None), done.stderr
    return answer["imported"]


@pytest.mark.parametrize("argv", [["models"], ["archs"], ["--help"], ["run", "--help"], ["sweep", "--help"],
                                  ["compare", "--help"], ["collective", "--help"], ["map", "--help"],
                                  ["validate", "score", "--help"]])
def test_listing_and_help_import_no_heavy_module(argv):
    assert imported(argv) == []


def test_the_probe_sees_an_import(tmp_path):
    """The probe itself can fail: `export` writes ONNX, so it must find onnx imported."""
    assert "onnx" in imported(["export", "resnet18", "--out", str(tmp_path / "r.onnx"), "--opt", "width=0.25"])


def test_a_built_in_model_runs_without_onnx(tmp_path):
    """The ops registry imports every op: each imports onnx, ml_dtypes and networkx only where it uses them. Run
    again, it is read from the disk: no engine runs."""
    modules = imported(["run", "resnet50", "--arch", "tpu_v1"], cache=tmp_path)
    assert "onnx" not in modules and "ml_dtypes" not in modules and "networkx" not in modules
    assert "numba" in modules           # the engine did run
    assert imported(["run", "resnet50", "--arch", "tpu_v1"], cache=tmp_path) == []


@pytest.mark.parametrize("argv", [["train", "--help"], ["eval", "--help"], ["plan", "--help"]])
def test_help_listing_the_compilers_choices_imports_no_onnx(argv):
    """--loss and --optimizer's choices come from compiler.train.step, which imports the ops registry."""
    assert "onnx" not in imported(argv)


def test_the_package_names_resolve_on_first_use():
    """accelsim.run and the rest are imported when first asked for, and are the functions their modules define."""
    code = ("import sys, accelsim; assert 'accelsim.sim.api' not in sys.modules; "
            "from accelsim.sim.api import run; from accelsim.results.result import Result; "
            "assert accelsim.run is run and accelsim.Result is Result and 'train' in dir(accelsim); print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok", done.stderr


def test_choices_read_late_are_the_compilers():
    """--loss and --optimizer list, and accept, what compiler.train.step defines, though read only when needed."""
    from accelsim.cli import build_parser
    from compiler.train.step import DEFAULTS, LOSSES

    evaluate = build_parser(["eval"])._subparsers._group_actions[0].choices["eval"]
    options = {action.dest: action for action in evaluate._actions}
    assert list(options["loss"].choices) == list(LOSSES)
    assert list(options["optimizer"].choices) == sorted(DEFAULTS)
    assert "adamw" in options["optimizer"].choices and "adam" not in options["optimizer"].choices
    help_text = evaluate.format_help()
    assert "{" + ",".join(sorted(DEFAULTS)) + "}" in help_text


def test_validate_actions_are_declared_for_validate_only():
    from accelsim.cli import build_parser

    def actions(argv):
        sub = build_parser(argv)._subparsers._group_actions[0].choices["validate"]
        return set(sub._subparsers._group_actions[0].choices)

    assert actions(["validate", "cpu", "--help"]) == actions(None) == {"score", "cuda", "onnx", "cpu"}
    assert actions(["models"]) == set()
