"""The planner's fast report (accelsim.parallel.blocks: stages of k blocks from stages of 1, 2 and 3) against
train_parallel simulating the whole model, at tile fidelity: the same step time, MFU and memory, for plans whose
stages are extrapolated (k = 4, 6, 8 blocks), read directly (k = 2) and aliased (2 stages from the 3-stage cut), with
and without recomputation and ZeRO; and BERT, whose middle stages also return the attention mask's gradient."""
import pytest

from accelsim.arch.system_load import load_system
from accelsim.parallel.blocks import Blocks, Setting, block_count
from accelsim.parallel.plan import parse_plan
from accelsim.parallel.train import train_parallel
from accelsim.sim.train import STORED, compute_dtype
from compiler.errors import ModelError
from compiler.train import Optimizer

GPT = dict(layers=12, hidden=64, heads=4, seq=32, vocab=256)
BERT = dict(layers=8, hidden=64, heads=4, seq=32)


def report(model: str, options: dict) -> Blocks:
    system = load_system("dgx_a100")
    compute = compute_dtype(system.device, None)
    stored = {**options, "dtype": STORED.get(compute, compute).value}
    setting = Setting(model, tuple(sorted((k, v) for k, v in stored.items() if k != "layers")), system, compute,
                      Optimizer("adamw"), "cross_entropy")
    return Blocks(setting, block_count(model, stored))


@pytest.mark.parametrize("model, options, plan, recompute, batch", [
    ("gpt2", GPT, "dp=4,tp=1,pp=2,mb=2", "none", 16),                                # k = 6: first and last, aliased
    ("gpt2", GPT, "dp=1,tp=2,pp=3,mb=3", "selective", 6),                            # k = 4: a middle stage
    ("gpt2", GPT, "dp=2,tp=2,pp=1,mb=2,zero=3", "full", 8),                          # k = 12: one stage
    ("gpt2", GPT, "dp=2,tp=1,pp=3,mb=6,schedule=interleaved,chunks=2,zero=1", "none", 12),   # k = 2
    ("bert_base", BERT, "dp=1,tp=2,pp=2,mb=4,zero=0", "none", 8),                    # k = 4, BERT's mask
])
def test_the_fast_report_is_train_parallel(model, options, plan, recompute, batch):
    parsed = parse_plan(plan, 4 if "pp=1" in plan else None)
    devices = parsed.devices
    whole = train_parallel(model, "dgx_a100", devices=devices, parallel=parsed, batch=batch, optimizer="adamw",
                           recompute=recompute, **options)
    fast = report(model, options)
    micro = batch // (parsed.dp * parsed.microbatches)
    stages = fast.stage_memory(parsed, recompute, micro)
    step = fast.result(parsed, recompute, micro, "tile", stages)
    assert step.seconds == pytest.approx(whole.seconds, rel=1e-9)
    assert step.mfu() == pytest.approx(whole.mfu(), rel=1e-9)
    assert step.memory == whole.memory == fast.device_memory(parsed, stages)
    assert [r.blocks for r in step.roles] == [r.blocks for r in whole.roles]
    assert sum(t["seconds"] for r in step.roles for t in r.collectives) == \
        pytest.approx(sum(t["seconds"] for r in whole.roles for t in r.collectives), rel=1e-9)


def test_a_model_without_a_block_count_is_simulated_whole():
    assert block_count("resnet18", {}) is None and block_count("gpt2", {"layers": 3}) == 3
    with pytest.raises(ModelError, match="does not divide"):
        report("gpt2", GPT).stage_memory(parse_plan("dp=1,tp=1,pp=5"), "none", 1)
