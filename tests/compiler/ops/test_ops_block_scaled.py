"""Block-scaled GEMMs: DequantizeLinear per block of k on both operands of a MatMul (opset 21), as DeepSeek-V3
quantizes to fp8, folded into one Einsum over the stored values that reads each scale per block (sx[m, k/128]).

The folded IR is checked against onnxruntime, the Einsum's reference against dequantize-then-multiply in numpy,
and the tiled Program (tiles that cut blocks in half included) against the reference.
"""
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.dtypes import DType
from compiler.frontend import from_model
from compiler.ir import Axis, Einsum, Operand, Role, is_scale
from compiler.mapping import gemm_view
from compiler.ops.interpret import run_ir
from compiler.compile import Options, compile_graph
from compiler.targeting import Footprints, compute_dtype, separable

RNG = np.random.default_rng(5)
ONNX_TYPES = {"fp8": TensorProto.FLOAT8E4M3FN, "int8": TensorProto.INT8}


def block_scaled_matmul(m=6, n=24, k=320, block=128, source="fp8", x_axis=1, w_axis=0, w_zero=None):
    """x [m, k] float -> QuantizeLinear per row and block of k (its scale a graph input, as a runtime per-token
    quantization computes it) -> DequantizeLinear; w [k, n] stored in `source` with a scale per block of k and
    column -> DequantizeLinear; MatMul. K need not be a multiple of the block (the last block is short)."""
    import ml_dtypes

    kb = -(-k // block)
    x_scale_shape = [m, kb] if x_axis == 1 else [-(-m // block), k]
    w_scale = (RNG.random((kb, n)) * 0.02 + 0.01).astype(np.float32)
    w = RNG.standard_normal((k, n)).astype(np.float32)
    expanded = np.repeat(w_scale, block, axis=0)[:k]
    if source == "fp8":
        stored = np.clip(w / expanded, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    else:
        stored = np.clip(np.rint(w / expanded), -127, 127).astype(np.int8)
    w_inputs = ["wq", "ws"] + (["wz"] if w_zero is not None else [])
    inits = [numpy_helper.from_array(stored, "wq"), numpy_helper.from_array(w_scale, "ws")]
    if w_zero is not None:
        inits.append(numpy_helper.from_array(np.full((kb, n), w_zero, np.int8), "wz"))
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs"], ["xq"], axis=x_axis, block_size=block,
                              output_dtype=ONNX_TYPES[source]),
             helper.make_node("DequantizeLinear", ["xq", "xs"], ["xd"], axis=x_axis, block_size=block),
             helper.make_node("DequantizeLinear", w_inputs, ["w"], axis=w_axis, block_size=block),
             helper.make_node("MatMul", ["xd", "w"], ["y"])]
    graph = helper.make_graph(nodes, "block_scaled",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k]),
                               helper.make_tensor_value_info("xs", TensorProto.FLOAT, x_scale_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], initializer=inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    proto.ir_version = 10
    onnx.checker.check_model(proto, full_check=True)
    return proto


def feeds(m=6, k=320, block=128, source="fp8"):
    """x, and its scale per row and block as a per-token quantizer takes it: the block's largest value over
    the format's largest (448 for e4m3fn, 127 for int8)."""
    x = RNG.standard_normal((m, k)).astype(np.float32) * 4
    top = 448.0 if source == "fp8" else 127.0
    padded = np.pad(np.abs(x), ((0, 0), (0, -k % block)))
    scale = padded.reshape(m, -1, block).max(axis=2) / top
    return {"x": x, "xs": scale.astype(np.float32)}


def ort(proto, inputs):
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], inputs)[0]


def folded(proto):
    graph = from_model(proto)
    return graph, compile_graph(graph, Options())


@pytest.mark.parametrize("source", ["fp8", "int8"])
def test_block_scaled_matmul_folds_into_one_einsum_and_matches_onnxruntime(source):
    proto = block_scaled_matmul(source=source)
    graph, ir = folded(proto)
    (einsum,) = [op for op in ir.ops if isinstance(op, Einsum)]
    assert [o.tensor for o in einsum.inputs] == ["xq", "wq", "xs", "ws"]
    assert [o.dtype for o in einsum.inputs] == [DType[source]] * 2 + [DType.fp32] * 2
    assert [o.role for o in einsum.inputs] == [Role.input, Role.weight, Role.input, Role.weight]
    assert einsum.describe() == "y[m,n] += xq[m,k] * wq[k,n] * xs[m,k/128] * ws[k/128,n]"
    assert einsum.acc == DType.fp32 and einsum.scale_block == 128
    assert einsum.ops == 6 * 24 * 3           # a promotion per output and block of k (320: three blocks)
    assert not any(op.op == "DequantizeLinear" for op in ir.ops)    # both folded away; the Quantize stays
    inputs = feeds(source=source)
    want = ort(proto, inputs)
    got = run_ir(ir, inputs, graph.tensors)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_the_einsum_reference_is_dequantize_then_multiply():
    """Written out in numpy without the IR: each operand times its scale repeated over its block, then a
    matrix product; K = 300 leaves the last block 44 long."""
    m, n, k, block = 5, 7, 300, 128
    x, w = RNG.standard_normal((m, k)), RNG.standard_normal((k, n))
    sx, sw = RNG.random((m, 3)) + 0.5, RNG.random((3, n)) + 0.5
    want = (x * np.repeat(sx, block, axis=1)[:, :k]) @ (w * np.repeat(sw, block, axis=0)[:k])
    op = _einsum(m, n, k, block)
    got = op.reference([a.astype(np.float32) for a in (x, w, sx, sw)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _einsum(m, n, k, block):
    by_block = Axis((("k", 1),), 0, block)
    return Einsum(name="g", node="g", op="MatMul",
                  inputs=(Operand("x", (m, k), DType.fp8, Role.input), Operand("w", (k, n), DType.fp8, Role.weight),
                          Operand("sx", (m, -(-k // block)), DType.fp32, Role.input),
                          Operand("sw", (-(-k // block), n), DType.fp32, Role.weight)),
                  output=Operand("y", (m, n), DType.fp32, Role.output), loops=(("m", m), ("n", n), ("k", k)),
                  in_axes=((Axis.of("m"), Axis.of("k")), (Axis.of("k"), Axis.of("n")), (Axis.of("m"), by_block),
                           (by_block, Axis.of("n"))),
                  out_dims=("m", "n"), acc=DType.fp32)


def test_scales_take_no_part_in_the_gemm_view_nor_the_compute_dtype():
    """The scales index m and n as the factors do; read as factors they would make n a batch dim and fp32
    the compute dtype (CUDA cores instead of fp8 tensor cores)."""
    op = _einsum(256, 512, 1024, 128)
    view = gemm_view(op)
    assert (view.b, view.m, view.n, view.k) == ((), ("m",), ("n",), ("k",))
    assert compute_dtype(op) == DType.fp8
    assert [is_scale(axes) for axes in op.in_axes] == [False, False, True, True]


def test_a_scale_tile_holds_one_value_per_block():
    """Footprints count blocks: a 64 x 128 x 256 tile reads 64 x 2 activation scales and 2 x 128 weight
    scales (fp32: 512 and 1,024 bytes) beside 64 x 256 and 256 x 128 fp8 values."""
    from accelsim.arch import load_arch

    sizes = Footprints(_einsum(256, 512, 1024, 128), load_arch("h100"))
    tile = {"m": 64, "n": 128, "k": 256}
    assert [sizes.elements(i, tile) for i in range(4)] == [64 * 256, 256 * 128, 64 * 2, 2 * 128]
    assert [sizes.bytes(i, tile, False) for i in range(4)] == [16384, 32768, 512, 1024]


def test_a_blocked_axis_over_two_loops_stays_one_axis():
    """k split into 128 * k1 + k2 and read per block of 128: one scale per k1, never the parts of a reshape (which
    would drop the block and count 128 times the scales)."""
    axis = Axis((("k1", 128), ("k2", 1)), 0, 128)
    assert separable(axis, 4, {"k1": 4, "k2": 128}) == ((axis, 4),)


@pytest.mark.parametrize("arch_name, source", [("h100", "fp8"), ("tpu_v1", "int8"), ("xeon_spr", "fp8")])
def test_tiled_block_scaled_program_keeps_the_numbers(arch_name, source):
    """Compiled for a GPU, a systolic array and a CPU, the folded Einsum computed tile by tile (steps of k
    that cut a block, where a target's tiles do) equals its reference."""
    from accelsim.sim.build import mappings_for
    from compiler.codegen import generate
    from tests.compiler.codegen.test_codegen import check_every_op, compiled

    proto = block_scaled_matmul(m=40, n=96, k=448, source=source)
    graph = from_model(proto)
    arch, ir = compiled(graph, arch_name, dtype=DType[source] if arch_name != "xeon_spr" else None)
    (einsum,) = [op for op in ir.ops if isinstance(op, Einsum)]
    assert einsum.scale_block == 128
    inputs = feeds(m=40, k=448, source=source)
    check_every_op(ir, generate(ir, arch, mappings_for(ir, arch)), inputs)


def test_the_scales_are_loaded_before_the_operands_at_each_level():
    """At each step and level the scales (small, read by the first compute) are issued before the factors, so on a
    GPU they are not queued behind a weight streaming from DRAM on the same channel."""
    from accelsim.sim.build import mappings_for
    from compiler.codegen import generate
    from compiler.program import LOAD
    from tests.compiler.codegen.test_codegen import compiled

    arch, ir = compiled(from_model(block_scaled_matmul(m=64, n=1024, k=2048)), "h100", dtype=DType.fp8)
    (einsum,) = [op for op in ir.ops if isinstance(op, Einsum)]
    rows = generate(ir, arch, mappings_for(ir, arch)).program
    rows = rows[rows["op"] == ir.ops.index(einsum)]
    scales = set(range(len(einsum.inputs))) - set(einsum.factors)
    assert scales == {2, 3}
    for level in np.unique(rows["level"][rows["kind"] == LOAD]):
        operands = list(rows["operand"][(rows["kind"] == LOAD) & (rows["level"] == level)])
        first = {o: operands.index(o) for o in set(operands)}
        assert max(first[o] for o in scales if o in first) < min(first[o] for o in einsum.factors if o in first)


@pytest.mark.parametrize("case", ["per_tensor_weights", "blocked_along_m", "integer_zero_point"])
def test_what_it_cannot_prove_stays_float(case):
    """Weights scaled per tensor, activations blocked along m (not the reduced axis), an int8 weight zero point
    other than 0: the MatMul stays a float MatMul of the dequantized operands, with onnxruntime's numbers."""
    m, k = 6, 256
    if case == "per_tensor_weights":
        proto = block_scaled_matmul(m=m, k=k)
        node = proto.graph.node[2]
        del node.attribute[:]
        proto.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.float32(0.02), "ws"))
        inputs = feeds(m=m, k=k)
    elif case == "blocked_along_m":
        proto = block_scaled_matmul(m=m, k=k, x_axis=0)
        x = RNG.standard_normal((m, k)).astype(np.float32)
        inputs = {"x": x, "xs": (np.abs(x).max(axis=0, keepdims=True) / 448).astype(np.float32)}
    else:
        proto = block_scaled_matmul(m=m, k=k, source="int8", w_zero=3)
        inputs = feeds(m=m, k=k, source="int8")
    graph, ir = folded(proto)
    (einsum,) = [op for op in ir.ops if isinstance(op, Einsum)]
    assert len(einsum.inputs) == 2 and einsum.scale_block == 0
    want = ort(proto, inputs)
    np.testing.assert_allclose(run_ir(ir, inputs, graph.tensors)["y"], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
