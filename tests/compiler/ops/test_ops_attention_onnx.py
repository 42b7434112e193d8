"""Attention and RotaryEmbedding (opset 23) against onnxruntime and onnx's conformance cases, through the Graph and
the IR: grouped-query heads, causal and boolean/additive masks, past/present KV cache, softcap, 3D and 4D inputs,
qk_matmul_output, fp16 rounded step by step; the lowering's Einsums and Maps simulated on a preset; bad input named
by node."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from accelsim.sim.api import run
from compiler.conformance import Verdict, run_case
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import Einsum, Map
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from tests.compiler.onnx_models import model as onnx_model
from tests.compiler.oracle import check_against_ort, ort_run
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

F32, BOOL = TensorProto.FLOAT, TensorProto.BOOL
RNG = np.random.default_rng(11)


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _attention(inputs, outputs, **attrs):
    node = helper.make_node("Attention", [n if n else "" for n, _, _ in inputs], [n for n in outputs], **attrs)
    present = [(n, t, s) for n, t, s in inputs if n]
    return onnx_model([node], present, [(n, F32) for n in outputs if n], 23)


@pytest.mark.parametrize("q_heads,kv_heads,causal", [(4, 4, 0), (4, 2, 1), (6, 2, 0), (2, 1, 1)])
def test_attention_4d_heads_and_causal(q_heads, kv_heads, causal):
    proto = _attention([("q", F32, [2, q_heads, 3, 8]), ("k", F32, [2, kv_heads, 5, 8]),
                        ("v", F32, [2, kv_heads, 5, 6])], ["y"], is_causal=causal)
    check_against_ort(proto, {"q": _x(2, q_heads, 3, 8), "k": _x(2, kv_heads, 5, 8), "v": _x(2, kv_heads, 5, 6)})


def test_attention_3d_with_past_and_present_and_bool_mask():
    proto = _attention([("q", F32, [1, 4, 16]), ("k", F32, [1, 4, 8]), ("v", F32, [1, 4, 8]),
                        ("m", BOOL, [4, 7]), ("pk", F32, [1, 2, 3, 4]), ("pv", F32, [1, 2, 3, 4])],
                       ["y", "present_k", "present_v"], q_num_heads=4, kv_num_heads=2, scale=0.3)
    mask = RNG.random((4, 7)) > 0.3
    mask[:, 0] = True
    check_against_ort(proto, {"q": _x(1, 4, 16), "k": _x(1, 4, 8), "v": _x(1, 4, 8), "m": mask,
                              "pk": _x(1, 2, 3, 4), "pv": _x(1, 2, 3, 4)})


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_float_mask_softcap_and_qk_output(mode):
    proto = _attention([("q", F32, [1, 2, 3, 4]), ("k", F32, [1, 2, 5, 4]), ("v", F32, [1, 2, 5, 4]),
                        ("m", F32, [3, 5])], ["y", "", "", "qk"], softcap=2.0, qk_matmul_output_mode=mode)
    check_against_ort(proto, {"q": _x(1, 2, 3, 4), "k": _x(1, 2, 5, 4), "v": _x(1, 2, 5, 4), "m": _x(3, 5)})


@pytest.mark.parametrize("interleaved,dim,positions", [(0, 0, False), (1, 0, True), (0, 4, True)])
def test_rotary_embedding(interleaved, dim, positions):
    rotated = dim or 8
    inputs = [("x", F32, [2, 3, 16]), ("cos", F32, [2, 3, rotated // 2]), ("sin", F32, [2, 3, rotated // 2])]
    feeds = {"x": _x(2, 3, 16), "cos": _x(2, 3, rotated // 2), "sin": _x(2, 3, rotated // 2)}
    if positions:
        inputs = inputs[:1] + [("cos", F32, [6, rotated // 2]), ("sin", F32, [6, rotated // 2]),
                               ("pos", TensorProto.INT64, [2, 3])]
        feeds.update(cos=_x(6, rotated // 2), sin=_x(6, rotated // 2), pos=RNG.integers(0, 6, (2, 3)))
    node = helper.make_node("RotaryEmbedding", [n for n, _, _ in inputs], ["y"], num_heads=2,
                            interleaved=interleaved, rotary_embedding_dim=dim)
    check_against_ort(onnx_model([node], inputs, [("y", F32)], 23), feeds)


def _cases(module):
    return sorted(name for name in node_cases(module) if "_expanded" not in name)


@pytest.mark.parametrize("name", _cases("attention"))
def test_onnx_conformance_attention(name):
    case = node_cases("attention")[name]
    if "bf16" in name:       # bfloat16 compares within two bf16 ulps, as onnx's runner does (the harness's rule)
        outcome = run_case(case, "Attention")
        assert outcome.verdict == Verdict.passed, outcome.line()
    else:
        check_case(case)


@pytest.mark.parametrize("name", _cases("rotaryembedding"))
def test_onnx_conformance_rotary_embedding(name):
    check_case(node_cases("rotaryembedding")[name])


def test_fp16_attention_rounds_each_step_as_the_spec_has_it():
    """fp16 in, no softmax_precision: Q*sqrt(scale), K*sqrt(scale), Q.K^T, the softmax's steps and P.V each rounded
    to fp16. Written out here in numpy's float16 (which rounds every step, as onnx's reference does), the Graph and
    the IR must equal it to the bit; onnxruntime (fp32 softmax) is only near it."""
    q, k, v = (RNG.random(shape).astype(np.float16) for shape in ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8)))
    root = np.float16(np.sqrt(1 / np.sqrt(8)))
    scores = np.matmul(q * root, np.swapaxes(k * root, 2, 3))            # float16 in, fp32 sums, float16 out
    x = scores + np.where(np.arange(6) <= np.arange(4)[:, None], np.float16(0), np.float16(-np.inf))
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    expected = np.matmul(e / e.sum(axis=-1, keepdims=True), v)
    F16 = TensorProto.FLOAT16
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1)
    proto = onnx_model([node], [("q", F16, [2, 3, 4, 8]), ("k", F16, [2, 3, 6, 8]), ("v", F16, [2, 3, 6, 8])],
                       [("y", F16)], 23)
    graph = from_model(proto)
    feeds = {"q": q, "k": k, "v": v}
    for got in (run_graph(graph, feeds)["y"], run_ir(lower(graph), feeds, graph.tensors)["y"]):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(ort_run(proto, feeds)["y"].astype(np.float32), expected.astype(np.float32),
                               rtol=1e-2)


def test_attention_lowers_to_two_einsums_and_a_softmax_map_and_simulates():
    proto = _attention([("q", F32, [1, 8, 64, 32]), ("k", F32, [1, 2, 64, 32]), ("v", F32, [1, 2, 64, 32])],
                       ["y"], is_causal=1)
    graph = from_model(proto)
    ops = lower(graph).ops
    einsums = [op for op in ops if isinstance(op, Einsum)]
    assert [op.macs for op in einsums] == [8 * 64 * 64 * 32] * 2          # Q.K^T and P.V, GQA heads shared
    assert any(isinstance(op, Map) and op.ops >= 8 * 64 * 64 * 5 for op in ops)
    result = run(graph, arch="a100")
    timed = [o for o in result.ops if o.op == "Attention"]
    assert timed and all(o.seconds > 0 for o in timed if o.bytes > 0)
    assert sum(o.seconds for o in timed) > 0


def test_rotary_embedding_simulates():
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], num_heads=4)
    proto = onnx_model([node], [("x", F32, [2, 16, 64]), ("cos", F32, [2, 16, 8]), ("sin", F32, [2, 16, 8])],
                       [("y", F32)], 23)
    timed = [o for o in run(from_model(proto), arch="a100").ops if o.op == "RotaryEmbedding"]
    assert timed and all(o.seconds > 0 for o in timed)


@pytest.mark.parametrize("shapes,attrs,pattern", [
    ([[1, 3, 2, 4], [1, 2, 5, 4], [1, 2, 5, 4]], {}, r"3 query heads must be a multiple of the 2 key/value heads"),
    ([[1, 2, 8], [1, 2, 8], [1, 2, 8]], {}, r"3D inputs need q_num_heads and kv_num_heads"),
    ([[1, 2, 2, 4], [1, 2, 5, 4], [1, 2, 5, 4]], {"qk_matmul_output_mode": 7},
     r"qk_matmul_output_mode 7 is not one of 0, 1, 2, 3"),
])
def test_attention_bad_input_names_node(shapes, attrs, pattern):
    proto = _attention([(n, F32, s) for n, s in zip("qkv", shapes)], ["y"], **attrs)
    with pytest.raises(ModelError, match=r"node '\w*' \(Attention\): " + pattern):
        from_model(proto)
