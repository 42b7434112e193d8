"""Inference on a system: data-parallel replicas each run their share as one device would; pipeline stages together
run the whole model's forward pass, micro-batches flowing through them."""
import json

import pytest

from accelsim.cli import main
from accelsim.parallel.run import run_parallel
from accelsim.sim.api import run

GPT = dict(seq=64, layers=4, hidden=64, heads=2, vocab=512, max_positions=64)


def test_replicas_each_run_their_share_as_one_device():
    many = run_parallel("gpt2", "dgx_a100", devices=8, batch=16, **GPT)
    one = run("gpt2", "a100", batch=2, **GPT)
    assert many.seconds == pytest.approx(one.seconds)
    assert many.throughput()["samples_per_second"] == pytest.approx(16 / many.seconds)
    assert not many.roles[0].communication


def test_stages_run_the_whole_forward_pass_between_them():
    whole = run_parallel("gpt2", "dgx_a100", devices=2, parallel="dp=2", batch=2, **GPT)
    piped = run_parallel("gpt2", "dgx_a100", devices=2, parallel="pp=2,mb=1", batch=1, **GPT)
    assert piped.model_flops == pytest.approx(whole.model_flops / 2, rel=1e-9)      # one sample against two
    assert piped.seconds == pytest.approx(sum(r.forward for r in piped.roles) +
                                          piped.roles[0].communication[("sendrecv", "nvlink")], rel=1e-9)


def test_the_run_command_takes_a_system_and_writes_json(capsys):
    argv = ["run", "gpt2", "--system", "dgx_h100", "--devices", "8", "--parallel", "dp=2,pp=4,mb=4", "--batch", "8"]
    argv += [f"--opt={k}={v}" for k, v in GPT.items()]
    assert main(argv + ["--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["training"] is False and data["plan"]["pp"] == 4 and len(data["devices"]) == 4
    assert data["device_count"] == 8 and [d["count"] for d in data["devices"]] == [2] * 4 and "roles" not in data
    assert main(argv[:2] + ["--arch", "h100", "--system", "dgx_h100"]) == 2
    assert "--arch do(es) not apply with --system" in capsys.readouterr().err
