"""Validation case keys: parsed strictly, rebuilt as the same one-op model, priced by the current model."""
import pytest

import accelsim

from accelsim.validate.cases import parse, predict
from compiler.errors import UserError


@pytest.mark.parametrize("key, macs", [
    ("gemm 512 256 128 fp32", 512 * 256 * 128),
    ("conv 1 3 224 224 96 11 11 4 2 1 fp32", 96 * 55 * 55 * 3 * 11 * 11),        # AlexNet conv1
    ("conv 1 96 27 27 256 5 5 1 2 2 fp32", 256 * 27 * 27 * 48 * 5 * 5),          # conv2, two groups
])
def test_keys_round_trip_and_count_macs(key, macs):
    case = parse(key)
    assert case.key == key and case.macs == macs
    graph_macs = sum(op.macs for op in accelsim.run(case.graph(), arch="xeon_spr", dtype=case.dtype).ops)
    assert graph_macs == macs


def test_prediction_grows_with_the_work():
    small, large = (predict(parse(f"gemm {n} {n} {n} fp32"), "xeon_spr") for n in (256, 1024))
    assert 0 < small < large


@pytest.mark.parametrize("key, words", [
    ("gemv 1 2 3 fp32", ["starts with one of", "gemm"]),
    ("gemm 1 2 fp32", ["expected gemm M N K DTYPE"]),
    ("gemm 1 2 x fp32", ["expected gemm M N K DTYPE"]),
    ("gemm 1 2 3 fp33", ["fp33"]),
    ("gemm 0 2 3 fp32", ["positive"]),
])
def test_bad_keys_are_named(key, words):
    with pytest.raises(UserError) as e:
        parse(key)
    assert all(w in str(e.value) for w in words) and repr(key) in str(e.value)


@pytest.mark.parametrize("key, macs, ops", [
    ("bgemm 12 128 64 32 bf16", 12 * 128 * 64 * 32, ["MatMul"]),
    ("attention 1 4 16 32 8 bf16", 2 * 4 * 16 * 32 * 8, ["MatMul", "Softmax", "MatMul"]),
    ("softmax 64 128 fp16", 0, ["Softmax"]),
    ("layernorm 64 768 bf16", 0, ["LayerNormalization"]),
    ("gelu 4 3072 bf16", 0, ["Gelu"]),
    ("add 4 3072 fp32", 0, ["Add"]),
    ("addrow 4 768 bf16", 0, ["Add"]),
    ("mulrow 4 4096 bf16", 0, ["Mul"]),
    ("batchnorm 1 64 56 56 bf16", 0, ["BatchNormalization"]),
    ("gemm 256 256 256 fp8", 256 ** 3, ["MatMul"]),
    ("gemm 256 256 256 tf32", 256 ** 3, ["MatMul"]),
    ("scaledgemm 256 256 384 128 fp8", 256 * 256 * 384, ["MatMul", "Cast"]),   # DequantizeLinear folded
])
def test_gpu_kinds_build_the_ops_they_name(key, macs, ops):
    import accelsim

    case = parse(key)
    result = accelsim.run(case.graph(), arch="h100", dtype=case.dtype)
    assert case.key == key and case.macs == macs == sum(op.macs for op in result.ops)
    assert [op.op for op in result.ops] == ops and predict(case, "h100") > 0


def test_tf32_is_priced_between_fp32_and_bf16():
    fp32, tf32, bf16 = (predict(parse(f"gemm 4096 4096 4096 {d}"), "h100") for d in ("fp32", "tf32", "bf16"))
    assert fp32 > tf32 > bf16


@pytest.mark.parametrize("key, words", [
    ("conv 1 6 8 8 4 3 3 1 1 4 fp32", ["multiples of GROUPS"]),
    ("conv 1 4 2 2 4 5 5 1 0 1 fp32", ["larger than the padded image"]),
    ("attention 1 2 3 4 fp16", ["expected attention B H SQ SKV D DTYPE"]),
    ("scaledgemm 64 64 64 fp8", ["expected scaledgemm M N K BLOCK DTYPE"]),
])
def test_bad_gpu_keys_are_named(key, words):
    with pytest.raises(UserError) as e:
        parse(key)
    assert all(w in str(e.value) for w in words)
