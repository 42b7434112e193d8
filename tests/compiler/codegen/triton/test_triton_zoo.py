"""Whole zoo models, small: every IR op with a Triton kernel runs it on the very inputs the numpy reference
interpreter hands that op (weights seeded) and matches the op's reference; the rest are the Moves and windowed
pools no generator covers, each refused by name."""
import numpy as np
import pytest
from tests.compiler.codegen.triton.test_triton import TOLERANCE, torch  # noqa: F401  (sets TRITON_INTERPRET)

from accelsim.arch import load_arch
from compiler.codegen.triton import NoTritonKernel, load
from tests.compiler.triton_kernel_of import kernel_of
from compiler.dtypes import DType
from compiler.compile import Options, compile_graph
from compiler.zoo import build

MODELS = {
    "bert_base": (dict(layers=1, seq=8, hidden=64, heads=2, mlp=128, vocab=100, max_positions=16),
                  {"Gather", "Transpose"}),
    "resnet18": (dict(image=32, width=0.25, classes=10), {"MaxPool"}),
    # decode: one token into a cache of 8 positions, written in place (TensorScatter; keys kept as Q.K^T reads
    # them, so no Transpose); RMSNorm from Pow, ReduceMean, Sqrt, Div; rotary; SwiGLU
    "llama": (dict(layers=1, seq=8, mode="decode", hidden=64, heads=2, mlp=96, vocab=50, max_positions=16),
              {"Gather", "Slice", "Concat", "TensorScatter"}),
}


def feeds(graph, rng):
    values = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        values[name] = (rng.integers(0, 2, t.shape) if t.dtype == DType.int64 else
                        rng.standard_normal(t.shape).astype(t.dtype.numpy))
    return values


@pytest.mark.parametrize("arch_name, dtype", [("h100", "fp32"), ("a100", "fp32"), ("h200", "bf16")])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_kernel_of_a_small_model_matches_its_op(model, arch_name, dtype, tmp_path):
    options, uncovered = MODELS[model]
    dt = DType(dtype)
    graph = build(model, dtype=dt, **options)
    ir = compile_graph(graph, Options(dtype=dt))
    arch, rng = load_arch(arch_name), np.random.default_rng(0)
    env = {name: np.asarray(v) for name, v in ir.weights.items()} | dict(ir.constants) | feeds(graph, rng)
    refused, ran = set(), 0
    for op in ir.ops:
        args = [env[o.tensor] for o in op.inputs]
        want = np.asarray(op.reference(args)).astype(op.output.dtype.numpy, copy=False)
        env[op.output.tensor] = want
        if op.kind.value == "move" and getattr(op, "view", False):
            continue
        try:
            kernel = kernel_of(op, arch)
        except NoTritonKernel as e:
            assert repr(op.name) in str(e) and op.op in str(e)
            refused.add(op.op)
            continue
        tensors = [torch.from_numpy(np.ascontiguousarray(a)).reshape(o.shape).to(getattr(torch, name))
                   for a, o, name in zip(args, op.inputs, kernel.inputs)]
        got = load(kernel, tmp_path).launch(*tensors, torch.full(op.output.shape, float("nan")))
        scale = max(1.0, float(np.abs(want).max()))
        tol = 1e-4 if dt == DType.fp32 else TOLERANCE[dt]
        np.testing.assert_allclose(got.double().numpy(), want.astype(np.float64), rtol=tol, atol=tol * scale,
                                   err_msg=f"{op.name} ({op.op}): {kernel.describe()}")
        ran += 1
    assert refused == uncovered
    assert ran > {"bert_base": 30, "resnet18": 50, "llama": 25}[model]


def test_the_codegen_mappings_give_the_same_kernels():
    """compiler.codegen.generate records an Einsum's SIMT mapping and a vector op's chunk plan per op: handed
    over, they give exactly the kernels triton_kernel derives by itself."""
    from accelsim.sim.build import mappings_for
    from compiler.codegen import generate

    graph = build("bert_base", **MODELS["bert_base"][0])
    ir = compile_graph(graph, Options(dtype=DType.bf16))
    arch = load_arch("h100")
    code = generate(ir, arch, mappings_for(ir, arch))
    compared = 0
    for op in ir.ops:
        if op.kind.value in ("einsum", "map", "reduce"):
            assert kernel_of(op, arch, code.mappings[op.name]) == kernel_of(op, arch)
            compared += 1
    assert compared > 30
