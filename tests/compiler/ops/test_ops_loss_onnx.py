"""SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss imported from ONNX files and compared with onnxruntime
(reductions, class weights, ignore_index, extra axes); a model that ends in its own loss trains through it."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.frontend import from_model
from compiler.ops.interpret import run_graph
from compiler.train import Optimizer, training_graph
from tests.compiler.oracle import check_against_ort

RNG = np.random.default_rng(0)


def loss_model(op, reduction, weights=False, ignore=None, extra=(), opset=13, log_prob=False):
    scores = helper.make_tensor_value_info("scores", TensorProto.FLOAT, [4, 5, *extra])
    labels = helper.make_tensor_value_info("labels", TensorProto.INT64, [4, *extra])
    inputs = ["scores", "labels"] + (["w"] if weights else [])
    outputs = ["loss"] + (["log_prob"] if log_prob else [])
    attrs = {"reduction": reduction} | ({"ignore_index": ignore} if ignore is not None else {})
    node = helper.make_node(op, inputs, outputs, **attrs)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [5], [0.5, 1.0, 2.0, 1.5, 0.25])] if weights else []
    loss_shape = [4, *extra] if reduction == "none" else []
    outs = [helper.make_tensor_value_info("loss", TensorProto.FLOAT, loss_shape)]
    if log_prob:
        outs.append(helper.make_tensor_value_info("log_prob", TensorProto.FLOAT, [4, 5, *extra]))
    graph = helper.make_graph([node], "loss", [scores, labels], outs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def feeds(extra=(), ignore=None, log=False):
    scores = RNG.standard_normal((4, 5, *extra)).astype(np.float32) * 3
    if log:
        scores = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    labels = RNG.integers(0, 5, (4, *extra))
    if ignore is not None:
        labels.reshape(-1)[::3] = ignore
    return {"scores": scores, "labels": labels}


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
@pytest.mark.parametrize("reduction, weights, ignore, extra", [
    ("mean", False, None, ()), ("sum", False, None, ()), ("none", False, None, ()),
    ("mean", True, None, ()), ("mean", True, 2, ()), ("mean", False, 1, (3,)), ("none", True, 0, (2, 3)),
])
def test_the_losses_equal_onnxruntime(op, reduction, weights, ignore, extra):
    model = loss_model(op, reduction, weights, ignore, extra)
    check_against_ort(model, feeds(extra, ignore, log=op.startswith("Negative")))


def test_the_log_probabilities_output_equals_onnxruntime():
    check_against_ort(loss_model("SoftmaxCrossEntropyLoss", "mean", log_prob=True), feeds())


def test_a_model_that_ends_in_its_own_loss_trains_through_it():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])
    labels = helper.make_tensor_value_info("labels", TensorProto.INT64, [4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 5], RNG.standard_normal(15).tolist())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["scores"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss"], reduction="mean")]
    graph = helper.make_graph(nodes, "classifier", [x, labels],
                              [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], initializer=[w])
    model = from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    step = training_graph(model, loss="model", optimizer=Optimizer("sgd", {"momentum": 0.0, "weight_decay": 0.0,
                                                                          "lr": 1.0}))
    assert step.labels is None and step.params == ["w"]
    data = {"x": RNG.standard_normal((4, 3)).astype(np.float32), "labels": np.array([0, 4, 2, 2])}
    out = run_graph(step.graph, data)
    # the gradient of mean cross-entropy by hand: x^T (softmax(xw) - onehot) / 4
    weights = model.weights["w"]
    logits = data["x"] @ weights
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    probs[np.arange(4), data["labels"]] -= 1
    np.testing.assert_allclose(out[step.updated["w"][0]], weights - data["x"].T @ probs / 4, rtol=1e-5, atol=1e-6)


def test_a_loss_model_whose_output_is_not_a_scalar_is_refused():
    model = from_model(loss_model("SoftmaxCrossEntropyLoss", "none"))
    with pytest.raises(Exception, match="loss 'model' takes the model's first output as its loss"):
        training_graph(model, loss="model")
