"""Liveness over a training step: the peak and its split by category, worked out by hand for a two-layer MLP."""
from compiler.builder import Builder
from compiler.train import Optimizer, training_graph

B, IN, HID, OUT = 32, 64, 128, 10
FP32 = 4


def mlp():
    b = Builder("mlp", weights=False)
    x = b.input("x", (B, IN))
    h = b.node("Relu", [b.node("MatMul", [x, b.weight("w1", (IN, HID))])])
    return b.build([b.node("MatMul", [h, b.weight("w2", (HID, OUT))])])


def test_the_peak_is_split_by_what_the_bytes_are():
    step = training_graph(mlp(), optimizer=Optimizer("adamw"))
    memory = step.memory()
    params = (IN * HID + HID * OUT) * FP32
    assert memory.by_category["weights"] >= params and memory.by_category["weights"] - params < 64   # + scalars
    assert memory.by_category["optimizer"] == 2 * params                  # AdamW: m and v
    assert memory.peak == sum(memory.by_category.values())
    # The peak: the Relu's gradient being written. Held then: w2's gradient (w1's comes later); saved x (for w1's
    # gradient), the Relu's output (its gradient reads it) and the loss; the hidden layer's gradient before and
    # after the Relu as workspace. The Relu's input died in the forward pass: its gradient reads the output, as
    # PyTorch's does.
    assert (memory.at, memory.phase) == ("relu/grad/ReluGrad", "backward")
    assert memory.by_category["gradients"] == HID * OUT * FP32
    assert memory.by_category["activations"] == (B * IN + B * HID) * FP32 + FP32
    assert memory.by_category["workspace"] == 2 * B * HID * FP32


def test_sgd_without_momentum_holds_no_state_and_views_add_nothing():
    step = training_graph(mlp(), optimizer=Optimizer("sgd", {"momentum": 0.0}))
    memory = step.memory()
    assert memory.by_category["optimizer"] == 0
    assert not step.state["w1"]
    largest = {t for t, _, _ in memory.largest}
    assert "w1" in largest


def test_bytes_past_what_an_int64_holds_are_counted_exactly():
    # Tensors of 2^59 bytes (the largest accelsim takes): the step's bytes together come near what an int64 holds.
    b = Builder("wide", weights=False)
    x = b.input("x", (1 << 28, 1 << 29))
    w1, w2 = b.weight("w1", (1 << 29, 1 << 28)), b.weight("w2", (1 << 28, 1 << 29))
    graph = b.build([b.node("MatMul", [b.node("Relu", [b.node("MatMul", [x, w1])]), w2])])
    memory = training_graph(graph, optimizer=Optimizer("adamw")).memory()
    params = 2 * (1 << 57) * FP32
    assert memory.by_category["optimizer"] == 2 * params
    assert memory.peak == sum(memory.by_category.values()) > 1 << 62
    assert all(type(b) is int for _, _, b in memory.largest) and type(memory.peak) is int
