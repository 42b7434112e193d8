"""Kernels as runtimes form them (compiler.passes.fuse): which ops share a kernel on each kind of target, which
tensors stay on chip, what that saves in bytes and launches, and that every op's numbers stay the same."""
import numpy as np
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.price.roofline import estimate
from accelsim.sim.api import random_inputs, run
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ops.interpret import run_ir
from compiler.compile import Options, compile_graph


def fused_ir(model, arch_name, dtype=None, launch="eager", fuse="runtime", **options):
    arch = load_arch(arch_name)
    graph = accelsim.load_model(model, **options)
    return compile_graph(graph, Options(dtype=dtype or arch.native_dtype, arch=arch, fuse=fuse, launch=launch))


def by_name(ir):
    return {op.name: op for op in ir.ops}


def test_a_convolution_takes_its_batchnorm_and_relu_on_a_systolic_array_but_not_the_residual_add():
    ops = by_name(fused_ir("resnet50", "tpu_v1", image=64))
    assert ops["bn1"].kernel == ops["bn1_relu"].kernel == "conv1"
    assert ops["conv1"].output.fused and ops["bn1"].output.fused
    assert not ops["bn1_relu"].output.fused                    # maxpool, another kernel, reads it
    # TPU v1's output stage reads the accumulators and its own per-channel operands, not a second tensor:
    # the residual add starts a kernel of its own, and the ReLU after it joins that one
    assert ops["layer1.0/add"].kernel == "" and ops["layer1.0/relu"].kernel == "layer1.0/add"


def test_a_gpu_epilogue_reads_the_residual_too():
    ops = by_name(fused_ir("resnet50", "a100", DType.fp16, image=64))
    # conv3 -> bn3, then downsample.0 -> downsample.1 -> add (reading bn3's output, made before) -> relu
    assert ops["layer1.0/bn3"].kernel == "layer1.0/conv3"
    assert ops["layer1.0/add"].kernel == ops["layer1.0/relu"].kernel == "layer1.0/downsample.0"
    assert not ops["layer1.0/bn3"].output.fused                # read by the add, in another kernel
    assert ops["layer1.0/downsample.1"].output.fused


def test_an_elementwise_chain_with_a_diamond_is_one_kernel():
    ops = by_name(fused_ir("bert_base", "h100", DType.bf16, layers=1, seq=16))
    gelu = ["encoder.0/ffn/fc1/add_bias"] + [f"encoder.0/ffn/gelu/{n}" for n in ("div", "erf", "add_one", "mul",
                                                                                 "half")]
    assert {ops[n].kernel for n in gelu} == {"encoder.0/ffn/fc1/matmul"}
    # the bias-add's output is read twice (the division and the product), both inside: it never leaves the chip
    assert ops["encoder.0/ffn/gelu/div"].inputs[0].fused and ops["encoder.0/ffn/gelu/mul"].inputs[0].fused
    # the residual add joins the output projection's epilogue; the LayerNorm needs whole rows, which a GEMM's
    # tile does not hold: a kernel of its own
    assert ops["encoder.0/residual1"].kernel == "encoder.0/attention/output/matmul"
    assert ops["encoder.0/ln1"].kernel == ""
    assert all(op.launch == (op.kernel == "") for op in ops.values())


def test_fused_tensors_move_no_bytes_and_nothing_else_changes():
    fused = fused_ir("resnet18", "a100", DType.fp16, image=64)
    alone = fused_ir("resnet18", "a100", DType.fp16, image=64, fuse="none")
    arch = load_arch("a100")
    assert [op.name for op in fused.ops] == [op.name for op in alone.ops]
    assert [op.macs + op.ops for op in fused.ops] == [op.macs + op.ops for op in alone.ops]
    saved = sum(2 * op.output.nbytes for op in fused.ops if op.output.fused)     # written once, read once
    unread = sum(o.nbytes for op in fused.ops for o in op.inputs if o.fused)
    assert sum(op.nbytes for op in alone.ops) - sum(op.nbytes for op in fused.ops) == \
        sum(op.output.nbytes for op in fused.ops if op.output.fused) + unread
    assert saved > 0
    hbm = [sum(r.bytes_by_level.get("hbm2", 0) for r in estimate(ir, arch)) for ir in (fused, alone)]
    assert hbm[0] <= hbm[1]


def test_numerics_do_not_change():
    graph = accelsim.load_model("resnet18", weights=True, image=32)
    feeds = random_inputs(graph, 0)
    arch = load_arch("a100")
    want = run_ir(compile_graph(graph, Options(dtype=DType.fp32)), feeds, graph.tensors)
    got = run_ir(compile_graph(graph, Options(dtype=DType.fp32, arch=arch)), feeds, graph.tensors)
    for name in graph.outputs:
        np.testing.assert_array_equal(got[name], want[name])


def test_a_captured_graph_pays_one_launch_where_eager_pays_one_per_kernel():
    options = dict(arch="h100", dtype="fp16", mode="decode", past=64, layers=2, hidden=256, heads=4, mlp=512,
                   vocab=512)
    eager = run("llama", launch="eager", **options)
    graph = run("llama", launch="graph", **options)
    ir = fused_ir("llama", "h100", DType.fp16, mode="decode", past=64, layers=2, hidden=256, heads=4, mlp=512,
                  vocab=512)
    h100 = load_arch("h100")
    kernels = sum(1 for op in ir.ops if op.launch and (op.macs or op.ops))    # copies pay none (price.vector)
    launch_s = h100.cycles(h100.vector.launch_overhead_s) / h100.clock_hz
    assert kernels > 20
    saved = eager.seconds - graph.seconds
    # every kernel but the first stops paying its launch (an op whose launch hid under a transfer saves less)
    assert 0.8 * (kernels - 1) * launch_s <= saved <= (kernels - 1) * launch_s * 1.0001
    alone = run("llama", fuse="none", launch="eager", **options)
    assert alone.seconds > eager.seconds


def test_a_decode_step_defaults_to_a_captured_graph():
    options = dict(arch="h100", dtype="fp16", past=64, layers=1, hidden=256, heads=4, mlp=512, vocab=512)
    assert run("llama", mode="decode", **options).seconds == \
        run("llama", mode="decode", launch="graph", **options).seconds


def test_an_unknown_launch_mode_is_refused():
    with pytest.raises(UserError, match="launch 'lazy'.*eager, graph"):
        fused_ir("resnet18", "a100", DType.fp16, image=32, launch="lazy")


def test_tile_is_never_faster_than_the_roofline_when_fused():
    """Per kernel: its ops may run beside each other (an epilogue in a systolic array's output stage), so a
    kernel takes at least its slowest op's roofline, and on a GPU, where they run one after another, each op's."""
    for arch, dtype in (("tpu_v1", None), ("a100", "fp16")):
        tile = run("resnet18", arch=arch, dtype=dtype, image=64)
        bound = run("resnet18", arch=arch, dtype=dtype, image=64, fidelity="roofline")
        kernels: dict[str, list] = {}
        for t, r in zip(tile.ops, bound.ops):
            kernels.setdefault(t.kernel or t.name, []).append((t.seconds, r.seconds))
            if arch == "a100":
                assert t.seconds >= r.seconds * (1 - 1e-9), (arch, t.name)
        for name, ops in kernels.items():
            assert sum(t for t, _ in ops) >= max(r for _, r in ops) * (1 - 1e-9), (arch, name)


def test_a_small_kernel_is_bound_by_its_launch_and_not_once_the_graph_is_captured():
    options = dict(arch="h100", dtype="fp16", mode="decode", past=64, layers=1, hidden=256, heads=4, mlp=512,
                   vocab=512)
    h100 = load_arch("h100")
    launch_s = h100.cycles(h100.vector.launch_overhead_s) / h100.clock_hz
    eager = {op.name: op for op in run("llama", launch="eager", **options).ops}
    captured = {op.name: op for op in run("llama", launch="graph", **options).ops}
    neg = "layers.0/attn/rope_q/neg"          # 512 negations: a few ns of work behind a 3 us launch
    assert eager[neg].bound == "launch" and eager[neg].seconds >= launch_s
    assert captured[neg].bound != "launch" and captured[neg].seconds < launch_s
    assert not any(op.bound == "launch" for op in captured.values() if op.kernel)


@pytest.mark.parametrize("options", [dict(seq=16), dict(mode="decode", past=32)], ids=["causal prefill", "KV cache"])
def test_attention_is_one_kernel_on_a_gpu_whose_scores_never_leave_the_chip(options):
    small = dict(layers=1, hidden=256, heads=4, mlp=512, vocab=512, **options)
    ops = by_name(fused_ir("llama", "h100", DType.fp16, **small))
    parts = [n for n in ("scale", "mask", "softmax", "pv") if f"layers.0/attn/{n}" in ops]
    assert "softmax" in parts and "pv" in parts
    assert {ops[f"layers.0/attn/{n}"].kernel for n in parts} == {"layers.0/attn/qk"}
    assert ops["layers.0/attn/qk"].output.fused and ops["layers.0/attn/softmax"].output.fused
    assert ops["layers.0/attn/pv"].inputs[0].fused and not ops["layers.0/attn/pv"].output.fused
    # S x S scores: the unfused form writes and reads them; the kernel moves only Q, K, V, masks and the output
    unfused = {op.name: op for op in fused_ir("llama", "h100", DType.fp16, fuse="none", **small).ops}
    names = ["layers.0/attn/qk"] + [f"layers.0/attn/{n}" for n in parts]
    scores = unfused["layers.0/attn/qk"].output.nbytes
    saved = sum(unfused[n].nbytes for n in names) - sum(ops[n].nbytes for n in names)
    assert saved >= 2 * scores * (1 + len(parts) - 1)


def test_a_systolic_array_keeps_attention_unfused():
    ops = by_name(fused_ir("llama", "tpu_v4", DType.bf16, layers=1, hidden=256, heads=4, mlp=512, vocab=512, seq=16))
    assert ops["layers.0/attn/softmax"].kernel == "" and ops["layers.0/attn/pv"].kernel == ""
    assert not ops["layers.0/attn/softmax"].output.fused
