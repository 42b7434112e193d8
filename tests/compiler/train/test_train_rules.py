"""Gradient rules checked against PyTorch one small graph at a time: loss, every gradient, every update."""
import numpy as np
import pytest

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.train import Optimizer, training_graph
from tests.compiler.train.train_checks import check_step

RNG = np.random.default_rng(0)


def mlp(dtype=DType.fp64):
    b = Builder("mlp", dtype=dtype)
    x = b.input("x", (4, 8))
    h = b.node("Relu", [b.node("Gemm", [x, b.weight("w1", (16, 8)), b.weight("b1", (16,))], transB=1)])
    h = b.node("Tanh", [h])
    y = b.node("Gemm", [h, b.weight("w2", (16, 3)), b.weight("b2", (3,))])
    return b.build([y]), {"x": RNG.standard_normal((4, 8))}


@pytest.mark.parametrize("optimizer", [Optimizer("sgd"), Optimizer("adamw"), Optimizer("sgd", {"momentum": 0.0}),
                                       Optimizer("adamw", {"lr": 0.01}, step=3)], ids=str)
def test_mlp_step_matches_torch(optimizer):
    graph, feeds = mlp()
    check_step(graph, feeds, np.array([0, 2, 1, 2]), optimizer, rtol=1e-9)


def test_mse_loss_matches_torch():
    graph, feeds = mlp()
    check_step(graph, feeds, RNG.standard_normal((4, 3)), loss="mse", rtol=1e-9)


def test_an_op_with_no_gradient_rule_is_named_with_its_node():
    b = Builder("floor")
    x = b.input("x", (4, 8))
    h = b.node("Floor", [b.node("MatMul", [x, b.weight("w", (8, 3))])], name="snap")
    with pytest.raises(Exception) as error:
        training_graph(b.build([h]))
    assert "node 'snap' (Floor): op 'Floor' has no gradient rule" in str(error.value)


def test_a_model_with_nothing_to_train_says_so():
    b = Builder("fixed")
    x = b.input("x", (4, 8))
    with pytest.raises(Exception, match="no parameter of the model reaches the loss"):
        training_graph(b.build([b.node("Relu", [x])]))
