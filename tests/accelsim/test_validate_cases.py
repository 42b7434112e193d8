"""Validation case keys: parsed strictly, rebuilt as the same one-op model, priced by the current model."""
import pytest

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
    graph_macs = sum(op.macs for op in __import__("accelsim").api.run(case.graph(), arch="xeon_spr",
                                                                     dtype=case.dtype).ops)
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
