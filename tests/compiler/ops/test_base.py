"""The input helpers every op shares: require hands back the required inputs, given a reference's arguments,
optional an omitted input as None; a missing one is a ModelError naming the node."""
import numpy as np
import pytest

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Node, Tensor
from compiler.ops.base import given, optional, require

NODE = Node("n1", "Gemm", ("a", "b", ""), ("y",))
A, B = Tensor("a", (2, 3), DType.fp32), Tensor("b", (3, 4), DType.fp32)


def test_require_returns_the_required_inputs_in_order():
    assert require(NODE, [A, B, None], 2, 3) == [A, B]
    assert require(NODE, [B, A], 2) == [B, A]


def test_require_refuses_a_missing_or_extra_input_naming_the_node():
    with pytest.raises(ModelError, match=r"node 'n1' \(Gemm\): expects 2 to 3 inputs, got 1"):
        require(NODE, [A], 2, 3)
    with pytest.raises(ModelError, match="expects 2 to 3 inputs, got 2"):
        require(NODE, [A, None], 2, 3)
    with pytest.raises(ModelError, match="expects 2 inputs, got 3"):
        require(NODE, [A, B, A], 2)


def test_optional_is_none_where_omitted_or_past_the_end():
    assert optional([A, None], 0) is A
    assert optional([A, None], 1) is None
    assert optional([A, None], 2) is None


def test_given_returns_a_references_arguments_and_names_the_node_when_one_is_missing():
    x, w = np.ones(2), np.zeros(3)
    first, second = given(NODE, [x, w, None], 2)
    assert first is x and second is w
    with pytest.raises(ModelError, match=r"node 'n1' \(Gemm\): expects 2 inputs, got 1"):
        given(NODE, [x, None], 2)
