"""A training step on a system: plans are read strictly, the per-device work is the single-device simulation of
its share, pipeline stages together do the whole model's work, and data-parallel reduction is hidden behind the
backward pass until the links are too slow for it."""
import json

import pytest

from accelsim.arch.system_load import systems_dir
from accelsim.cli import main
from accelsim.parallel.plan import Plan, parse_plan
from accelsim.parallel.train import train_parallel
from accelsim.sim.train import train
from compiler.errors import UserError

GPT = dict(seq=64, layers=4, hidden=64, heads=2, vocab=512, max_positions=64)


def test_a_plan_reads_its_degrees_and_takes_data_parallel_as_the_rest():
    assert parse_plan("tp=2,pp=2", devices=16) == Plan(dp=4, tp=2, pp=2)
    plan = parse_plan("dp=2,pp=4,mb=8,schedule=interleaved,chunks=2,zero=1", devices=8)
    assert (plan.microbatches, plan.chunks, plan.zero, plan.text()) == \
        (8, 2, 1, "dp=2,tp=1,pp=4,mb=8,schedule=interleaved,chunks=2,zero=1")
    assert parse_plan(None, devices=8) == Plan(dp=8)


@pytest.mark.parametrize("text, devices, needle", [
    ("dp=3,tp=2", 8, "dp x tp x pp = 3 x 2 x 1 = 6, but the run has 8 devices"),
    ("tp=2,dq=2", 8, "unknown key 'dq'; did you mean 'dp'?"),
    ("tp=two", 8, "tp='two' must be an integer"),
    ("zero=4", 1, "ZeRO stages are 0"),
    ("sp=1", 4, "sp=1 (sequence parallelism)"),
    ("pp=2,schedule=zigzag", 2, "schedule 'zigzag' is not one of 1f1b, gpipe, interleaved"),
    ("tp=0", 8, "tp=0 must be at least 1"),
])
def test_a_bad_plan_is_named(text, devices, needle):
    with pytest.raises(UserError) as error:
        parse_plan(text, devices)
    assert needle in str(error.value)


def test_data_parallel_devices_each_run_the_single_device_step_of_their_share():
    """8 replicas of batch 4 each: forward and backward as accelsim.train at batch 4; the gradients' all-reduce on
    NVLink, hidden behind the backward pass."""
    many = train_parallel("gpt2", "dgx_a100", devices=8, batch=32, optimizer="adamw", **GPT)
    one = train("gpt2", "a100", batch=4, optimizer="adamw", **GPT)
    role = many.roles[0]
    assert role.forward == pytest.approx(one.phase_seconds["forward"])
    assert role.backward == pytest.approx(one.phase_seconds["backward"])
    assert many.model_flops == pytest.approx(8 * one.model_flops)
    assert list(role.communication) == [("allreduce", "nvlink")] and role.exposed == 0
    assert many.seconds == pytest.approx(one.seconds, rel=0.05)


def test_pipeline_stages_together_do_the_whole_models_work():
    whole = train_parallel("gpt2", "dgx_a100", devices=2, parallel="dp=2", batch=8, **GPT)
    piped = train_parallel("gpt2", "dgx_a100", devices=2, parallel="pp=2,mb=4", batch=8, **GPT)
    assert piped.model_flops == pytest.approx(whole.model_flops, rel=1e-9)
    assert [r.blocks for r in piped.roles] == [("layers.0", "layers.1"), ("layers.2", "layers.3")]
    assert piped.simulated == 2 and all(r.bubble > 0 for r in piped.roles)
    assert ("sendrecv", "nvlink") in piped.roles[0].communication


def test_slow_links_expose_the_gradient_reduction(tmp_path):
    """The same plan on a copy of dgx_a100 whose InfiniBand is 1000 times slower: the all-reduce across nodes no
    longer hides behind the backward pass, and the step grows by what is exposed."""
    yaml = (systems_dir() / "dgx_a100.yaml").read_text().replace("bandwidth: 25 GB/s", "bandwidth: 25 MB/s")
    slow = tmp_path / "slow.yaml"
    slow.write_text(yaml.replace("name: dgx_a100", "name: slow_ib"))
    fast = train_parallel("gpt2", "dgx_a100", devices=16, parallel="dp=16", batch=16, **GPT)
    crawl = train_parallel("gpt2", str(slow), devices=16, parallel="dp=16", batch=16, **GPT)
    assert fast.communication()["exposed_seconds"] == 0
    exposed = crawl.communication()["exposed_seconds"]
    assert exposed > 0 and crawl.seconds > fast.seconds + 0.9 * exposed


def test_zero_shards_optimizer_state_gradients_and_weights_over_the_replicas():
    plain, *zeros = [train_parallel("gpt2", "dgx_a100", devices=8, parallel=f"dp=8,zero={z}", batch=8,
                                    optimizer="adamw", **GPT).memory for z in range(4)]
    assert zeros[0]["optimizer"] == plain["optimizer"] // 8 and zeros[0]["gradients"] == plain["gradients"]
    assert zeros[1]["gradients"] == plain["gradients"] // 8
    assert zeros[2]["weights"] == plain["weights"] // 8


def test_the_cli_prints_each_stage_and_writes_the_json(capsys):
    argv = ["train", "gpt2", "--system", "dgx_a100", "--devices", "16", "--parallel", "pp=2,mb=4", "--batch", "32",
            "--optimizer", "adamw"] + [f"--opt={k}={v}" for k, v in GPT.items() if k != "seq"] + ["--seq", "64"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "dgx_a100, 16 devices, dp=8,tp=1,pp=2,mb=4,schedule=1f1b" in table and "sendrecv on infiniband" in table
    assert main(argv + ["--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"step", "memory", "throughput", "model_flops", "mfu", "devices", "communication"} <= set(data)
    assert data["version"] == 2 and data["device_count"] == 16 and "roles" not in data
    assert [(d["stage"], d["device"], d["count"]) for d in data["devices"]] == [(0, 0, 8), (1, 1, 8)]
    assert data["plan"] == {"dp": 8, "tp": 1, "pp": 2, "schedule": "1f1b", "chunks": 1, "zero": 0, "sp": False,
                                 "microbatches": 4}
    assert data["throughput"]["tokens_per_second"] == pytest.approx(data["throughput"]["samples_per_second"] * 64)


@pytest.mark.parametrize("argv, needle", [
    (["--devices", "4"], "need --system"),
    (["--system", "dgx_a100", "--devices", "8", "--parallel", "dp=3"], "3 x 1 x 1 = 3, but the run has 8"),
    (["--system", "dgx_a10"], "unknown system 'dgx_a10'; did you mean 'dgx_a100'?"),
    (["--system", "dgx_a100", "--parallel", "pp=3"], "pp=3"),
    (["--system", "dgx_a100", "--batch", "12"], "batch 12 does not split over dp=8"),
    (["--system", "dgx_a100", "--arch", "h100"], "--arch do(es) not apply with --system"),
    (["--system", "dgx_a100", "--devices", "6", "--parallel", "tp=3", "--batch", "2"],
     "tensor degree 3 does not divide the 2 heads of layers.0/attn"),
    (["--system", "tpu_v4_pod", "--slice", "4x4x4", "--devices", "32"],
     "--slice 4x4x4 is 64 devices, not --devices 32"),
])
def test_bad_input_is_one_line(argv, needle, capsys):
    assert main(["train", "gpt2", "--opt", "layers=2", "--opt", "hidden=64", "--opt", "heads=2"] + argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_tensor_parallel_ranks_do_a_share_of_the_work_and_all_reduce_on_nvlink():
    """GPT-2's layers over 2 ranks: each does half the matrix work; Megatron's all-reduces (2 per layer forward, 2
    backward) on NVLink, in the passes' time; with sequence parallelism they become all-gathers and reduce-scatters."""
    whole = train_parallel("gpt2", "dgx_a100", devices=2, parallel="dp=2", batch=2, **GPT)
    split = train_parallel("gpt2", "dgx_a100", devices=2, parallel="tp=2", batch=2, **GPT)
    seq = train_parallel("gpt2", "dgx_a100", devices=2, parallel="tp=2,sp=1", batch=2, **GPT)
    # a rank of batch 2 does what a replica of batch 1 does (the replicated embedding and loss a little more)
    assert split.roles[0].model_flops == pytest.approx(whole.roles[0].model_flops, rel=0.05)
    ops = [op.op for op in split.roles[0].result.ops]
    assert ops.count("AllReduce") >= 4 * GPT["layers"]
    assert ("allreduce", "nvlink") in split.roles[0].communication
    assert {("allgather", "nvlink"), ("reducescatter", "nvlink")} <= set(seq.roles[0].communication)


def test_the_trace_has_a_track_per_pipeline_position_and_per_link_level(tmp_path, capsys):
    trace = tmp_path / "step.json"
    argv = ["train", "gpt2", "--system", "dgx_a100", "--devices", "16", "--parallel", "pp=2,mb=4", "--batch", "32",
            "--trace", str(trace)] + [f"--opt={k}={v}" for k, v in GPT.items() if k != "seq"] + ["--seq", "64"]
    assert main(argv) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"passes", "data-parallel reduction", "nvlink", "infiniband"} <= set(names.values())
    slices = [e for e in events if e["ph"] == "X"]
    for device in (0, 1):
        passes = sorted((e["ts"], e["ts"] + e["dur"]) for e in slices if e["pid"] == device and e["tid"] == 0)
        assert len(passes) == 2 * 4 + 1                         # 4 forward, 4 backward, the optimizer
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(passes, passes[1:]))     # one pass at a time
    hops = [e for e in slices if e["name"].startswith(("activations", "gradients"))]
    assert len(hops) == 2 * 4                                    # each micro-batch across the cut, both ways


def test_a_reduction_that_shares_its_links_with_tensor_parallel_collectives_waits_for_them(monkeypatch):
    """tp=2, dp=4 in one NVSwitch node: the gradient all-reduce and the backward pass's tensor-parallel all-reduces
    use the same links, so the reduction finishes later by at most their time; tp=8 in the node and dp across
    InfiniBand share nothing."""
    from accelsim.parallel import train as module
    wide = dict(layers=2, hidden=2048, heads=8, seq=4, vocab=512)

    def step(plan: str, devices: int, shared: bool):
        with monkeypatch.context() as m:
            if not shared:
                m.setattr(module, "_sharing", lambda *args: 0.0)
            return train_parallel("gpt2", "dgx_a100", devices=devices, parallel=plan, batch=4, optimizer="adamw",
                                  **wide)
    together, alone = step("tp=2,dp=4", 8, True), step("tp=2,dp=4", 8, False)
    busy = sum(t["seconds"] for t in together.roles[0].collectives if t["phase"] == "backward")
    later = together.roles[0].exposed - alone.roles[0].exposed
    assert together.link_levels["tp"] == together.link_levels["dp"] == "nvlink"
    assert 0 < later <= busy + 1e-15 and together.seconds == pytest.approx(alone.seconds + later, rel=1e-12)
    apart, apart_alone = step("tp=8,dp=2", 16, True), step("tp=8,dp=2", 16, False)
    assert apart.link_levels["dp"] == "infiniband" and apart.roles[0].exposed == apart_alone.roles[0].exposed
