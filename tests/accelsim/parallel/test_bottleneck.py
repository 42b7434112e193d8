"""The planner's bottleneck names the bound its figures show: a decode step at ~0.1% MFU, whose ops wait on HBM for
their weights and KV cache, is memory-bound, not compute-bound."""
from accelsim.arch.system_load import load_system
from accelsim.parallel.run import run_parallel
from accelsim.parallel.bottleneck import bottleneck


def test_a_decode_step_is_memory_bound_not_compute_bound():
    result = run_parallel("gpt2", "dgx_a100", devices=2, parallel="tp=2", batch=1, mode="decode", past=512, layers=2)
    time_by: dict[str, float] = {}
    for op in (op for role in result.roles for op in role.result.ops):
        time_by[op.bound] = time_by.get(op.bound, 0.0) + op.seconds
    assert result.mfu() < 0.01 and time_by["hbm2"] > 1000 * time_by["compute"]
    text = bottleneck(result, load_system("dgx_a100"))
    assert text.startswith("memory-bound (hbm2): forward ") and "compute" not in text
