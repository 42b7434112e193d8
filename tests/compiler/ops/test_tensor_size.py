"""A tensor larger than 2^62 bits is refused at shape inference, whatever op makes it: element counts are Python
ints there, while codegen counts a tile's elements and bytes in int64, where [2^32, 2^32] is 2^64 = 0 elements
(a ConstantOfShape of that shape "ran" in 616 ns on an H100, 16x faster than one of [2^24, 2^24])."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ModelError
from compiler.frontend import from_model


def _model(op: str, out_shape, *, input_shape=None):
    inits = [numpy_helper.from_array(np.array(out_shape, np.int64), "shape")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)] if input_shape else []
    node = (helper.make_node("ConstantOfShape", ["shape"], ["y"],
                             value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]))
            if op == "ConstantOfShape" else helper.make_node("Expand", ["x", "shape"], ["y"]))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op, shape, input_shape", [
    ("ConstantOfShape", [2 ** 32, 2 ** 32], None),       # 2^64 elements: wrapped to 0 in int64
    ("ConstantOfShape", [2 ** 40, 2 ** 40], None),
    ("ConstantOfShape", [2 ** 29, 2 ** 29], None),       # 2^58 fp32 elements: 2^63 bits, one past the limit
    ("Expand", [2 ** 30, 2 ** 30], [1, 1]),               # 2^60 elements: fits int64, not 2^62 bits
])
def test_a_tensor_past_2_to_the_62_bits_is_refused(op, shape, input_shape):
    elements = shape[0] * shape[1]                        # Python ints: exact
    with pytest.raises(ModelError, match=rf"output 'y' of shape \[{shape[0]}, {shape[1]}\] holds {elements:,} fp32"):
        from_model(_model(op, shape, input_shape=input_shape))


def test_the_largest_tensor_allowed_keeps_its_exact_size():
    graph = from_model(_model("ConstantOfShape", [2 ** 28, 2 ** 28]))     # 2^56 fp32 elements: 2^61 bits
    assert graph.tensor("y").elements == 2 ** 56 and graph.tensor("y").nbytes == 2 ** 58
