"""Inference on a system: data-parallel replicas each run their share as one device would; pipeline stages together
run the whole model's forward pass, micro-batches flowing through them."""
import json

import pytest

from accelsim.arch.system_load import load_system
from accelsim.cli import main
from accelsim.results.table import binary
from accelsim.parallel.groups import cost, groups
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


# Llama-style decode, 1 new token after 63 cached: hidden h = 64, 4 heads of 16, mlp 128, vocab 256, 2 layers
DECODE = dict(mode="decode", seq=64, layers=2, hidden=64, heads=4, mlp=128, vocab=256, max_positions=64)


def cache_values(layers: int, heads: int) -> int:
    """The key and value buffers of the whole context (64 positions, the new token's written in place), 16 values a
    head, for `layers` layers and `heads` heads (batch 1)."""
    return 2 * layers * heads * 64 * 16


def test_a_tensor_parallel_rank_holds_its_share_of_weights_and_kv_cache_at_the_runs_dtype():
    """tp=2 in fp16 and fp32: a rank holds the split layers' half (embedding, head, attention and MLP matrices) and the
    whole norm scales, at 2 or 4 bytes a value (it held 4 at every dtype), and its own 2 of the 4 heads' cache."""
    h, m, v, layers = 64, 128, 256, 2
    split = (2 * v * h + layers * (4 * h * h + 3 * h * m)) // 2
    whole = (2 * layers + 1) * h + 2 * 16                     # the RMSNorms' scales, rotary cos and sin [1, 16]
    whole += 2 * (2 * layers + 1) + layers + 1                 # scalars: each RMSNorm's exponent and epsilon, each
    #                                                            attention's 1 / sqrt(16), the split lookup's zero
    rank = {dtype: run_parallel("llama", "dgx_a100", devices=2, parallel="tp=2", dtype=dtype, **DECODE).roles[0].memory
            for dtype in ("fp16", "fp32")}
    assert rank["fp32"]["weights"] - rank["fp16"]["weights"] == 2 * (split + whole)
    assert 0 <= rank["fp16"]["weights"] - 2 * (split + whole) < 4096             # shapes and indices, int64
    for dtype, size in (("fp16", 2), ("fp32", 4)):
        assert rank[dtype]["inputs"] == size * cache_values(layers, 4 // 2) + 8  # and the token id
        assert rank[dtype]["activations"] >= rank[dtype]["inputs"]
        assert rank[dtype]["peak"] == rank[dtype]["weights"] + rank[dtype]["activations"]


def test_a_pipeline_stage_holds_the_kv_cache_of_every_micro_batch_and_sends_at_the_runs_dtype():
    """pp=2, 2 micro-batches of 1 sequence: each stage keeps its layer's cache for both sequences, and sends the next
    stage a [1, 1, 64] fp16 residual (128 bytes, not the 256 of the fp32 graph)."""
    result = run_parallel("llama", "dgx_a100", devices=2, parallel="pp=2,mb=2", batch=2, dtype="fp16", **DECODE)
    first, second = (r.memory for r in result.roles)
    assert first["inputs"] == 2 * (2 * cache_values(1, 4) + 8)
    assert second["inputs"] == 2 * 2 * cache_values(1, 4)
    assert second["activations"] >= second["inputs"]
    pp = groups(1, 1, 2)["pp"]
    assert result.hops == [cost(load_system("dgx_a100"), pp, "sendrecv", 128).seconds]


def test_the_report_says_how_much_of_a_device_is_kv_cache(capsys):
    argv = ["run", "llama", "--system", "dgx_a100", "--devices", "2", "--parallel", "tp=2", "--dtype", "fp16"]
    argv += [f"--opt={k}={v}" for k, v in DECODE.items()]
    kv = 2 * cache_values(2, 2) + 8                              # 16 KiB of fp16 keys and values, and the token id
    assert main(argv) == 0
    assert f"  inputs {binary(kv)} (the model's" in capsys.readouterr().out
    assert main(argv + ["--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["inputs"] == kv


def test_the_inference_table_has_no_training_columns_and_gives_tokens_per_second():
    decode = run_parallel("gpt2", "dgx_a100", devices=2, parallel="tp=2", batch=4, mode="decode", past=16, **GPT)
    table = decode.table()
    header = next(line for line in table.splitlines() if line.lstrip().startswith("stage"))
    assert header.split() == ["stage", "blocks", "forward", "bubble", "comm", "memory"]
    assert not any(word in table for word in ("backward", "optim", "gradients", "exposed"))
    per_second = 4 / decode.seconds        # a decode step: one token for each of the batch's 4 sequences
    assert f"{per_second:,.0f} tokens/s (4 sequences x 1 token = 4 tokens per batch of " in table
    from accelsim.report.parallel_page import comm_table, stage_table
    page = stage_table(decode)
    assert ">bubble<" in page and not any(f">{word}<" in page for word in ("backward", "optimizer", "gradients"))
    assert ">time per batch<" in comm_table(decode)      # its cells say their unit (97.3 us), not seconds
    prefill = run_parallel("gpt2", "dgx_a100", devices=2, parallel="tp=2", batch=4, **GPT).table()
    assert "4 sequences x 64 tokens = 256 tokens per batch of " in prefill
