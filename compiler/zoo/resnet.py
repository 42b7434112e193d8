"""ResNet-18 and ResNet-50 (He et al. 2016) with torchvision's topology and names (stride on the 3x3, "v1.5").

A block computes y = relu(F(x) + shortcut(x)); the shortcut is a 1x1 conv + BN where shape changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.dtypes import DType
from compiler.zoo.layers import parse_dtype

if TYPE_CHECKING:
    from compiler.builder import Builder
    from compiler.graph import Graph

# Blocks per stage, from the paper's table 1.
STAGES = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet50": ("bottleneck", (3, 4, 6, 3))}
EXPANSION = {"basic": 1, "bottleneck": 4}


def _conv_bn(b: Builder, x: str, out: int, kernel: int, stride: int, conv: str, bn: str,
             relu: bool) -> str:
    channels = b.shape(x)[1]
    w = b.weight(f"{conv}.weight", (out, channels, kernel, kernel), fan_in=channels * kernel * kernel)
    pad = kernel // 2
    y = b.node("Conv", [x, w], name=conv, kernel_shape=[kernel, kernel], strides=[stride, stride],
               pads=[pad] * 4)
    # torchvision's BatchNorm2d: eps 1e-5; running statistics are buffers, not parameters.
    scale = b.weight(f"{bn}.weight", (out,), init="uniform")
    shift = b.weight(f"{bn}.bias", (out,))
    mean = b.weight(f"{bn}.running_mean", (out,))
    var = b.weight(f"{bn}.running_var", (out,), init="uniform")
    y = b.node("BatchNormalization", [y, scale, shift, mean, var], name=bn, epsilon=1e-5)
    return b.node("Relu", [y], name=f"{bn}_relu") if relu else y


def _block(b: Builder, x: str, kind: str, planes: int, stride: int, name: str) -> str:
    out = planes * EXPANSION[kind]
    with b.scope(name):
        if kind == "basic":
            y = _conv_bn(b, x, planes, 3, stride, "conv1", "bn1", relu=True)
            y = _conv_bn(b, y, planes, 3, 1, "conv2", "bn2", relu=False)
        else:
            y = _conv_bn(b, x, planes, 1, 1, "conv1", "bn1", relu=True)
            y = _conv_bn(b, y, planes, 3, stride, "conv2", "bn2", relu=True)
            y = _conv_bn(b, y, out, 1, 1, "conv3", "bn3", relu=False)
        shortcut = x
        if stride != 1 or b.shape(x)[1] != out:  # projection shortcut, option B of the paper
            shortcut = _conv_bn(b, x, out, 1, stride, "downsample.0", "downsample.1", relu=False)
        return b.node("Relu", [b.node("Add", [y, shortcut], name="add")], name="relu")


def _resnet(name: str, batch: int, dtype: DType | str, weights: bool, image: int, width: float, classes: int,
            seed: int) -> Graph:
    kind, blocks = STAGES[name]
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    b = Builder(name, dtype=parse_dtype(dtype), weights=weights, seed=seed)
    stem = max(1, int(round(64 * width)))
    x = b.input("image", (batch, 3, image, image))
    x = _conv_bn(b, x, stem, 7, 2, "conv1", "bn1", relu=True)
    x = b.node("MaxPool", [x], name="maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for stage, count in enumerate(blocks):
        planes = max(1, int(round(64 * width * 2 ** stage)))
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            x = _block(b, x, kind, planes, stride, f"layer{stage + 1}.{i}")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], name="avgpool")], name="flatten", axis=1)
    features = b.shape(x)[1]
    w = b.weight("fc.weight", (classes, features), fan_in=features)
    logits = b.node("Gemm", [x, w, b.weight("fc.bias", (classes,))], name="fc", transB=1)
    return b.build([logits])


def resnet18(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, image: int = 224,
             width: float = 1.0, classes: int = 1000, seed: int = 0) -> Graph:
    """ResNet-18 (basic blocks 2-2-2-2) on an NCHW image batch; output `fc` [batch, classes].

    image: input side (224; 32 is the smallest that keeps every stage at least 1x1).
    width: multiplier on every stage's channels (64, 128, 256, 512). classes: fc outputs (1000).
    seed: weight seed.
    """
    return _resnet("resnet18", batch, dtype, weights, image, width, classes, seed)


def resnet50(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, image: int = 224,
             width: float = 1.0, classes: int = 1000, seed: int = 0) -> Graph:
    """ResNet-50 (bottleneck blocks 3-4-6-3, expansion 4) on an NCHW image batch; output `fc`.

    image: input side (224). width: multiplier on the bottleneck widths (64, 128, 256, 512).
    classes: fc outputs (1000). seed: weight seed.
    """
    return _resnet("resnet50", batch, dtype, weights, image, width, classes, seed)
