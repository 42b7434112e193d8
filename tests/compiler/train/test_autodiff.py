"""A gradient rule reads its output's gradient through output_grad: a node none reaches is named, not a None
handed on as an input name."""
import pytest

from compiler.graph import Node
from compiler.train.autodiff import output_grad


def test_output_grad_is_the_first_outputs_gradient():
    node = Node("relu1", "Relu", ("x",), ("y",))
    assert output_grad(node, ["y/grad"]) == "y/grad"


def test_output_grad_names_the_node_no_gradient_reaches():
    node = Node("drop", "Dropout", ("x",), ("y", "mask"))
    with pytest.raises(RuntimeError, match=r"node 'drop' \(Dropout\): the Dropout rule needs the gradient of output 0"):
        output_grad(node, [None, "mask/grad"])
