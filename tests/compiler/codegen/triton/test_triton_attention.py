"""The fused attention's FlashAttention kernel (compiler.codegen.triton.attention) under Triton's CPU interpreter,
against the unfused ops' numpy reference: causal prefill, a decode step over a KV cache, BERT's padding mask."""
import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import accelsim  # noqa: E402
from accelsim.arch import load_arch  # noqa: E402
from accelsim.sim.api import random_inputs  # noqa: E402
from compiler.codegen.triton import NoTritonKernel, load  # noqa: E402
from compiler.codegen.triton.attention import attention_kernel  # noqa: E402
from compiler.dtypes import DType  # noqa: E402
from compiler.passes.attention import attention_groups  # noqa: E402
from compiler.compile import Options, compile_graph  # noqa: E402

torch = pytest.importorskip("torch", reason="the interpreter runs kernels on torch tensors")
pytest.importorskip("triton")

CASES = {
    "llama causal prefill": ("llama", dict(layers=1, hidden=64, heads=2, mlp=96, vocab=128, seq=40)),
    "llama decode, KV cache": ("llama", dict(layers=1, hidden=64, heads=2, mlp=96, vocab=128, mode="decode",
                                              past=70)),
    "bert padding mask": ("bert_base", dict(layers=1, hidden=64, heads=2, mlp=128, vocab=128, seq=24)),
}
TOLERANCE = {DType.fp32: 1e-5, DType.fp16: 5e-3}


def values(ir, graph, feeds):
    """Every tensor of the IR, each op run on its reference."""
    env = {k: np.asarray(v) for k, v in ir.weights.items()}
    env.update(ir.constants)
    env.update(feeds)
    for op in ir.ops:
        env[op.output.tensor] = np.asarray(op.reference([env[o.tensor] for o in op.inputs])).astype(
            op.output.dtype.numpy)
    return env


@pytest.mark.parametrize("dtype", [DType.fp32, DType.fp16], ids=lambda d: d.value)
@pytest.mark.parametrize("case", sorted(CASES))
def test_flash_attention_matches_the_unfused_ops(case, dtype, tmp_path):
    model, options = CASES[case]
    graph = accelsim.load_model(model, weights=True, **options)
    arch = load_arch("h100")
    ir = compile_graph(graph, Options(dtype=dtype, arch=arch))
    groups = attention_groups(ir)
    assert groups, "the attention is found"
    feeds = {k: v if v.dtype.kind == "f" else np.zeros_like(v) for k, v in random_inputs(graph, 0).items()}
    if "attention_mask" in feeds:                      # the last five positions are padding
        feeds["attention_mask"] = np.ones_like(feeds["attention_mask"])
        feeds["attention_mask"][..., -5:] = 0
    env = values(ir, graph, feeds)
    for group in groups:
        ops = [ir.ops[i] for i in (group.scores, *group.maps, group.softmax, group.weighted)]
        kernel = attention_kernel(ops, arch)
        module = load(kernel, tmp_path)
        scores, weighted = ops[0], ops[-1]
        sides = [o for op in ops[1:-2] for o in op.inputs if not o.fused]
        tensors = [torch.from_numpy(np.ascontiguousarray(env[o.tensor]).astype(o.dtype.numpy))
                   for o in (scores.inputs[0], scores.inputs[1], weighted.inputs[1], *sides)]
        out = torch.empty(weighted.output.shape, dtype=torch.float32)
        got = module.launch(*tensors, out).numpy()
        want = env[weighted.output.tensor].astype(np.float32)
        scale = max(1e-6, float(np.abs(want).max()))
        assert np.abs(got - want).max() / scale <= TOLERANCE[dtype], (case, scores.name)
        assert kernel.kind == "attention" and "online softmax" in kernel.describe()


def test_a_group_the_kernel_cannot_run_is_refused_by_name():
    graph = accelsim.load_model("llama", **CASES["llama causal prefill"][1])
    arch = load_arch("h100")
    ir = compile_graph(graph, Options(dtype=DType.fp32, arch=arch))
    (group,) = attention_groups(ir)
    ops = [ir.ops[i] for i in (group.scores, *group.maps, group.softmax, group.weighted)]
    with pytest.raises(NoTritonKernel, match=r"'layers.0/attn/softmax' \(Softmax\): between the scores"):
        attention_kernel([ops[0], ops[-2], *ops[1:]], arch)      # a softmax where a scale or a mask goes
