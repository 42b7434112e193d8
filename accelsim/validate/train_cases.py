"""Training validation cases: one phase (forward, backward or optimizer) of one training step of a small named model,
written as a key, and the seconds accelsim.sim.train predicts for that phase.

    train mlp256 64 sgd fp32 forward        (train MODEL BATCH OPTIMIZER DTYPE PHASE)

MODEL names one of MODELS below: small models written with the Builder in the ops PyTorch runs one for one
(accelsim.validate.torch_train runs the same Graph in torch). The loss is cross-entropy over the model's output (an
MLP's or CNN's logits; the transformer block's [batch, tokens, width] as tokens over `width` classes); the optimizer
takes accelsim's defaults (compiler.train.step.DEFAULTS, PyTorch's names). forward includes the loss.

Invariant: a key always builds the same Graph, so a dataset can be re-predicted by any later version of the model;
MODELS only ever grows (a changed model is a new name).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch
from compiler.memo import memo
from compiler.graph import Graph
from compiler.train.step import DEFAULTS
from compiler.zoo.layers import gelu_mlp, layer_norm, self_attention

KIND = "train"
PHASES = ("forward", "backward", "optimizer")     # what torch times separately; recompute is off (none)
OPTIMIZERS = tuple(DEFAULTS)                       # sgd (momentum 0.9, weight decay 5e-4), adamw
DTYPES = (DType.fp32,)                             # what the host measures; the key names it for other machines


def _linear(b: Builder, x: str, features: int, name: str, relu: bool) -> str:
    """torch.nn.Linear: weight [out, in], Gemm with transB (AlexNet's fully connected layers in the zoo)."""
    fan_in = b.shape(x)[1]
    with b.scope(name):
        w = b.weight("weight", (features, fan_in), fan_in=fan_in)
        bias = b.weight("bias", (features,))
    y = b.node("Gemm", [x, w, bias], name=name, transB=1)
    return b.node("Relu", [y], name=f"{name}_relu") if relu else y


def _mlp(widths: tuple[int, ...]) -> Callable[..., Graph]:
    def build(batch: int, dtype: DType, weights: bool) -> Graph:
        b = Builder(f"mlp{widths[1]}", dtype=dtype, weights=weights)
        x = b.input("x", (batch, widths[0]))
        for i, width in enumerate(widths[1:], start=1):
            x = _linear(b, x, width, f"fc{i}", relu=i < len(widths) - 1)
        return b.build([x])
    return build


def _cnn(batch: int, dtype: DType, weights: bool) -> Graph:
    """A CIFAR-sized CNN: two 3 x 3 convolutions (16, 32 maps) each with ReLU and 2 x 2 max pooling, then 128 and
    10 fully connected."""
    b = Builder("cnn", dtype=dtype, weights=weights)
    x = b.input("image", (batch, 3, 32, 32))
    for i, maps in enumerate((16, 32), start=1):
        channels = b.shape(x)[1]
        with b.scope(f"conv{i}"):
            w = b.weight("weight", (maps, channels, 3, 3), fan_in=channels * 9)
            bias = b.weight("bias", (maps,))
        x = b.node("Conv", [x, w, bias], name=f"conv{i}", kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4)
        x = b.node("Relu", [x], name=f"conv{i}_relu")
        x = b.node("MaxPool", [x], name=f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Flatten", [x], name="flatten", axis=1)
    return b.build([_linear(b, _linear(b, x, 128, "fc1", relu=True), 10, "fc2", relu=False)])


def _block(width: int, tokens: int, heads: int) -> Callable[..., Graph]:
    """One pre-norm transformer block (GPT-2's order): x + attention(LN(x)), then + MLP(LN(.)) with 4 x width."""
    def build(batch: int, dtype: DType, weights: bool) -> Graph:
        b = Builder(f"block{width}", dtype=dtype, weights=weights)
        x = b.input("x", (batch, tokens, width))
        x = b.node("Add", [x, self_attention(b, layer_norm(b, x, "ln1"), heads, "attn")], name="residual1")
        x = b.node("Add", [x, gelu_mlp(b, layer_norm(b, x, "ln2"), 4 * width, "mlp")], name="residual2")
        return b.build([x])
    return build


MODELS: dict[str, Callable[..., Graph]] = {
    "mlp256": _mlp((784, 256, 256, 10)),          # MNIST-sized, 0.27 M parameters
    "mlp1024": _mlp((784, 1024, 1024, 10)),       # 1.9 M parameters
    "cnn": _cnn,                                   # 3 x 32 x 32 input, 0.27 M parameters
    "block256": _block(256, 64, 4),               # 64 tokens, 4 heads, 0.79 M parameters
}   # block256 is built from compiler/zoo/layers.py: a test pins every model's ops, so a change there is seen


@dataclass(frozen=True)
class TrainCase:
    model: str
    batch: int
    optimizer: str
    dtype: DType
    phase: str

    @property
    def kind(self) -> str:
        return KIND

    @property
    def step(self) -> str:
        """The key without its phase: the training step the three phases are timed in together."""
        return f"{KIND} {self.model} {self.batch} {self.optimizer} {self.dtype.value}"

    @property
    def key(self) -> str:
        return f"{self.step} {self.phase}"

    def graph(self, weights: bool = False) -> Graph:
        """The model at this batch (its forward pass; the training step is compiler.train's)."""
        return MODELS[self.model](self.batch, self.dtype, weights)


FORM = "train MODEL BATCH OPTIMIZER DTYPE PHASE"


def parse(key: str) -> TrainCase:
    """The TrainCase a key names; a UserError naming the key, the form and the allowed words otherwise."""
    words = key.split()
    if len(words) != 6 or words[0] != KIND:
        raise UserError(f"validation case {key!r}: expected {FORM}")
    _, model, batch, optimizer, dtype, phase = words
    choices = {"MODEL": (model, MODELS), "OPTIMIZER": (optimizer, OPTIMIZERS), "PHASE": (phase, PHASES),
               "DTYPE": (dtype, [d.value for d in DTYPES])}
    for name, (word, allowed) in choices.items():
        if word not in allowed:
            raise UserError(f"validation case {key!r}: {name} {word!r} is not one of {', '.join(allowed)}")
    if not batch.isdigit() or int(batch) < 1:
        raise UserError(f"validation case {key!r}: BATCH must be a positive integer, got {batch!r}")
    return TrainCase(model, int(batch), optimizer, DType.parse(dtype), phase)


def step_cases(step: str) -> list[TrainCase]:
    """The case of each phase of a step key (`train mlp256 64 sgd fp32`)."""
    return [parse(f"{step} {phase}") for phase in PHASES]


def predict(case: TrainCase, arch: str | os.PathLike[str] | Arch) -> float:
    """Seconds accelsim.sim.train predicts for the case's phase on `arch` (an Arch, preset name or YAML path)."""
    return _phase_seconds(case.step, arch)[case.phase]


@memo(size=32)
def _phase_seconds(step: str, arch: str | os.PathLike[str] | Arch) -> dict[str, float]:
    # one simulated step answers its three phase rows (re-scoring predicts each row's key); an Arch is frozen,
    # so it is a cache key as it stands
    from accelsim.sim.train import train

    case = parse(f"{step} {PHASES[0]}")
    return train(case.graph(), arch, batch=case.batch, optimizer=case.optimizer, dtype=case.dtype).phase_seconds
