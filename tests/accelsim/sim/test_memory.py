"""What a run holds on its device (accelsim.sim.memory): weights and activations at the run's dtype, a fused tensor
holding nothing, and a model that does not fit said so in the table, the JSON and a note, as `train` says it."""
import json

import pytest

import accelsim
from accelsim.cli import main
from accelsim.sim.build import build
from accelsim.sim.memory import footprint
from compiler.builder import Builder
from compiler.dtypes import DType

# Llama-style decoder: hidden h, mlp m, vocab v, L layers, H heads of h / H; decode of 1 token after `seq - 1`
SMALL = dict(layers=2, hidden=64, heads=4, mlp=128, vocab=256, max_positions=64)


def llama_parameters(layers: int, hidden: int, mlp: int, vocab: int, **_) -> int:
    """Embedding and untied head (v x h each); per layer q, k, v, o (h x h), gate, up, down (h x m) and two RMSNorm
    scales; the final norm."""
    return 2 * vocab * hidden + layers * (4 * hidden * hidden + 3 * hidden * mlp + 2 * hidden) + hidden


def integer_weights(graph) -> int:
    """Shapes, indices and ranges among the weights: int64 whatever the run's dtype."""
    return sum(graph.tensors[w].nbytes for w in graph.weights if not graph.tensors[w].dtype.is_float)


@pytest.mark.parametrize("dtype, size", [("fp16", 2), ("bf16", 2), ("fp32", 4)])
def test_a_decode_step_holds_its_weights_and_kv_cache_at_the_runs_dtype(dtype, size):
    """The graph is built in fp32 and run in `dtype`: weights, rotary tables and the KV cache take `size` bytes a
    value (they took 4 at every dtype)."""
    compiled = build("llama", "a100", dtype=dtype, mapped=False, mode="decode", seq=64, **SMALL)
    memory = footprint(compiled.graph, compiled.ir, compiled.arch)
    head_dim = SMALL["hidden"] // SMALL["heads"]
    rotary = 2 * head_dim                                          # cos and sin [1 token, head_dim]
    scalars = 2 * (2 * SMALL["layers"] + 1) + SMALL["layers"]      # each RMSNorm's exponent and epsilon, 1 / sqrt(d)
    assert memory["weights"] == size * (llama_parameters(**SMALL) + rotary + scalars) + \
        integer_weights(compiled.graph)
    cache = 2 * SMALL["layers"] * SMALL["heads"] * 64 * head_dim   # key and value buffers of 64 positions, batch 1
    assert memory["inputs"] == size * cache + 8                    # and one int64 token id
    # the new token's key and value are written into the buffers in place: no second copy of even one layer's keys
    layer_keys = cache // (2 * SMALL["layers"])
    assert cache * size <= memory["activations"] < (cache + layer_keys) * size
    assert memory["peak"] == memory["weights"] + memory["activations"]
    assert memory["capacity"] == 40 * 2**30 and memory["capacity_level"] == "hbm2"


def test_a_tensor_made_and_read_inside_one_kernel_holds_no_memory():
    """x[256, 512] @ w[512, 512] + b, then ReLU: on a GPU the bias and ReLU run in the GEMM's epilogue, so only x
    (read by the GEMM) and then the ReLU's output reach HBM, one at a time; unfused, the GEMM's output is written
    while x is read, and the bias's while the GEMM's is read: two at a time."""
    b = Builder("epilogue", dtype=DType.fp32)
    x = b.input("x", (256, 512))
    product = b.node("MatMul", [x, b.weight("w", (512, 512))], name="matmul")
    graph = b.build([b.node("Relu", [b.node("Add", [product, b.weight("b", (512,))], name="bias")], name="relu")])
    weights, tensor = 2 * (512 * 512 + 512), 2 * 256 * 512         # fp16
    fused = build(graph, "a100", dtype="fp16", mapped=False)
    assert footprint(fused.graph, fused.ir, fused.arch)["peak"] == weights + tensor
    alone = build(graph, "a100", dtype="fp16", mapped=False, fuse="none")
    assert footprint(alone.graph, alone.ir, alone.arch)["peak"] == weights + 2 * tensor


BIG = dict(layers=2, hidden=4096, heads=32, mlp=11008, vocab=32000, max_positions=2048, seq=16)


def test_a_model_that_does_not_fit_says_so_in_the_table_the_json_and_a_note(capsys):
    """Two Llama-2-7B layers with their embedding and head at int8 on systolic_8x8's 256 MiB of DRAM: 537 MB of
    weights. The run still reports its time, and exits 0, as `train` does for a step that does not fit."""
    weights = llama_parameters(**BIG)                               # int8: a byte each
    assert weights > 256 * 2**20
    argv = ["run", "llama", "--arch", "systolic_8x8", "--fidelity", "roofline"] + [f"--opt={k}={v}" for k, v in
                                                                                  BIG.items()]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "of 256 MiB dram" in out and "DOES NOT FIT" in out and "it does not fit" in out
    assert main(argv + ["--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["memory"]["capacity"] == 256 * 2**20
    assert weights <= data["memory"]["weights"] <= weights + 2**16     # and the rotary tables and shapes
    assert data["memory"]["peak"] > data["memory"]["capacity"]


def test_a_model_that_fits_says_how_much_it_holds():
    result = accelsim.run("resnet18", "tpu_v1", image=32, fidelity="roofline")
    assert result.fits is True and "DOES NOT FIT" not in result.table()
    assert "of 8 GiB ddr3 (weights" in result.table()
    assert result.to_dict()["fits"] is True and result.memory["weights"] >= 11_000_000   # 11.7 M int8 parameters
