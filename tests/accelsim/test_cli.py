"""The `accelsim` command: what a user types, what they see, and the exit status on bad input."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelsim.arch import preset_names
from accelsim.arch.system_load import system_names
from accelsim.cli import main
from compiler.zoo import MODELS

ROOT = Path(__file__).resolve().parents[2]
ACCELSIM = Path(sys.executable).with_name("accelsim")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ACCELSIM), *args], capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accelsim: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_default_run_is_resnet50_on_tpu_v1():
    proc = cli("run")
    assert proc.returncode == 0, proc.stderr
    assert "resnet50 (batch 1, int8) on tpu_v1" in proc.stdout
    assert re.search(r"^│total +│", proc.stdout, re.M) and re.search(r"^\d+ ops in \d+ kernels", proc.stdout, re.M)
    assert "layer4.2/conv3" in proc.stdout and "samples/s" in proc.stdout


def test_json_and_csv_follow_the_schema(tmp_path, capsys):
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    assert main(["run", "resnet18", "--arch", "h100", "--dtype", "bf16", "--json", str(out_json),
                 "--csv", str(out_csv), "--opt", "image=64"]) == 0
    data = json.loads(out_json.read_text())
    assert data["version"] == 1 and data["model"]["name"] == "resnet18" and data["arch"]["name"] == "h100"
    for key in ("seconds", "cycles", "macs", "bytes"):
        assert data["totals"][key] > 0
    assert data["totals"]["seconds"] == pytest.approx(sum(op["seconds"] for op in data["ops"]))
    for op in data["ops"]:
        assert {"name", "kind", "macs", "bytes", "cycles", "seconds", "bound"} <= set(op)
    rows = out_csv.read_text().strip().splitlines()
    assert len(rows) == 1 + len(data["ops"]) and rows[0].startswith("name,node,op,kind")
    assert "resnet18" in capsys.readouterr().out  # the table is still printed


def test_json_to_stdout_is_only_json(capsys):
    assert main(["run", "alexnet", "--arch", "gtx580", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    convs = [op for op in data["ops"] if op["op"] == "Conv" and op["kind"] == "einsum"]
    assert len(convs) == 5 and data["model"]["dtype"] == "fp32"


def test_archs_and_models_list_everything(capsys):
    assert main(["archs"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == preset_names() + system_names() and len(listed) == 13 + len(system_names())
    assert main(["models"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(MODELS) and len(listed) == 9


def test_models_name_lists_that_models_options_with_defaults_and_values(capsys):
    assert main(["models", "gpt2"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:-1]}
    assert list(rows) == ["batch", "dtype", "weights", "seq", "mode", "past", "layers", "hidden", "heads", "mlp",
                          "vocab", "max_positions", "seed"]
    assert re.match(r"mode +prefill +prefill \| decode +prefill: ", rows["mode"])
    assert re.match(r"past +seq - 1 +integer >= 0 ", rows["past"])
    assert re.match(r"max_positions +1024 +integer >= 1 ", rows["max_positions"])
    assert main(["models", "resnet18"]) == 0
    assert re.search(r"^width +1\.0 +number > 0 +multiplier", capsys.readouterr().out, re.M)


def test_models_with_an_unknown_name_exits_2_naming_the_models():
    one_line_error(cli("models", "resnet19"), "unknown model 'resnet19'", "did you mean 'resnet18'", "gpt2, llama")


def test_eval_roundtrips_inputs_and_outputs(tmp_path, capsys):
    first = tmp_path / "a.npz"
    assert main(["eval", "resnet18", "--opt", "image=32", "--out", str(first)]) == 0
    with np.load(first) as data:
        assert data.files == ["fc"] and data["fc"].shape == (1, 1000)
        logits = data["fc"]
    feeds = tmp_path / "in.npz"
    np.savez(feeds, image=np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32))
    second = tmp_path / "b.npz"
    assert main(["eval", "resnet18", "--opt", "image=32", "--inputs", str(feeds), "--out", str(second)]) == 0
    with np.load(second) as data:
        np.testing.assert_array_equal(data["fc"], logits)  # seeded random inputs are the same standard normals


@pytest.mark.parametrize("args, needles", [
    (["run", "resnet18", "--arch", "tpu_v9"], ["tpu_v9", "tpu_v1"]),
    (["run", "resnet51"], ["resnet51", "resnet50"]),
    (["run", "resnet18", "--batch", "0"], ["--batch"]),
    (["run", "resnet18", "--opt", "depth=3"], ["depth"]),
    (["run", "resnet18", "--arch", "tpu_v1", "--dtype", "fp99"], ["fp99"]),
    (["run", "resnet18", "--arch", "tpu_v1", "--dtype", "fp32"], ["fp32", "int8"]),
    (["eval", "missing.onnx"], ["missing.onnx"]),
    (["eval", "llama"], ["llama", "parameters", "GiB"]),    # 6.7 G random weights would not fit
])
def test_bad_input_is_one_clear_line(args, needles):
    one_line_error(cli(*args), *needles)


def test_corrupt_onnx_and_bad_yaml_name_the_file(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07garbage" * 10)
    one_line_error(cli("run", str(broken)), "broken.onnx")
    arch = tmp_path / "mine.yaml"
    arch.write_text((ROOT / "archs" / "tpu_v1.yaml").read_text().replace("bandwidth: 34 GB/s", "bandwidth: 34 GB"))
    one_line_error(cli("run", "resnet18", "--arch", str(arch)), "mine.yaml", "memory[0].bandwidth", "34 GB")


def test_shape_only_onnx_simulates_but_does_not_evaluate(tmp_path):
    from compiler.export import save_onnx
    from compiler.zoo import build

    path = tmp_path / "net.onnx"
    save_onnx(build("resnet18", image=32), path, external_data=True)
    data_files = [p for p in tmp_path.iterdir() if p != path]
    assert data_files, "weights were written beside the model"
    for p in data_files:
        p.unlink()
    assert cli("run", str(path), "--arch", "a100").returncode == 0
    one_line_error(cli("eval", str(path)), "weights")


def test_batch_resizes_an_onnx_file(tmp_path):
    from compiler.export import save_onnx
    from compiler.zoo import build

    path = tmp_path / "r18.onnx"
    save_onnx(build("resnet18", image=32), path)
    one = json.loads(cli("run", str(path), "--arch", "v100", "--json", "-").stdout)
    four = json.loads(cli("run", str(path), "--arch", "v100", "--batch", "4", "--json", "-").stdout)
    assert four["model"]["batch"] == 4 and four["totals"]["macs"] == 4 * one["totals"]["macs"]


def readme_blocks() -> list[list[str]]:
    """The README's `.venv/bin/accelsim` lines, a ```sh block each: a block's lines may use what an earlier line of
    it wrote (an exported model), blocks stand alone, so each runs as a test of its own (on any worker)."""
    text = (ROOT / "README.md").read_text()
    blocks = [[line.split("#")[0].strip() for line in block.splitlines() if line.startswith(".venv/bin/accelsim")]
              for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S)]
    return [block for block in blocks if block]


def test_the_readme_shows_commands():
    assert sum(map(len, readme_blocks())) >= 6


@pytest.mark.parametrize("block", readme_blocks(), ids=lambda block: block[0].split()[1])
def test_readme_commands_run(block, tmp_path):
    """Every `.venv/bin/accelsim` line of the README runs (sizes as written, in a scratch folder)."""
    shutil.copytree(ROOT / "archs", tmp_path / "archs")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copytree(ROOT / "validation", tmp_path / "validation")
    env = dict(os.environ, PATH=f"{ACCELSIM.parent}:{os.environ['PATH']}")
    for command in block:
        argv = command.replace(".venv/bin/accelsim", str(ACCELSIM)).split()
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, f"{command}\n{proc.stderr}"


def test_readme_python_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        scope: dict = {}
        exec(compile(block, "README.md", "exec"), scope)
        assert scope["data"]["version"] == 1 and scope["data"]["ops"]


def test_every_subcommand_and_option_explains_itself():
    import argparse

    from accelsim.cli import build_parser

    missing = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if not sub.description:
                        missing.append(" ".join(path + [name]) + ": no description")
                    walk(sub, path + [name])
            elif not action.help:
                missing.append(" ".join(path) + f": {action.option_strings or action.dest} has no help")
    walk(build_parser(), ["accelsim"])
    assert not missing
