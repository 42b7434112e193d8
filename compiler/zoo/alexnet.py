"""AlexNet as published (Krizhevsky, Sutskever & Hinton, NIPS 2012): 5 convs, 3 FCs, ~61 M parameters.

The two-GPU split of the paper shows up as group=2 on conv2, conv4 and conv5 (their kernels see only
the half of the previous layer's maps that lived on the same GPU, paper fig. 2).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.dtypes import DType
from compiler.zoo.layers import parse_dtype

if TYPE_CHECKING:
    from compiler.builder import Builder
    from compiler.graph import Graph


def _conv(b: Builder, x: str, out: int, kernel: int, name: str, stride: int = 1, pad: int = 0,
          group: int = 1) -> str:
    channels = b.shape(x)[1]
    fan_in = channels // group * kernel * kernel
    with b.scope(name):
        w = b.weight("weight", (out, channels // group, kernel, kernel), fan_in=fan_in)
        bias = b.weight("bias", (out,))
    y = b.node("Conv", [x, w, bias], name=name, kernel_shape=[kernel, kernel], strides=[stride, stride],
               pads=[pad] * 4, group=group)
    return b.node("Relu", [y], name=f"{name}_relu")


def _lrn(b: Builder, x: str, name: str) -> str:
    # Paper sec. 3.3: b = a / (k + alpha * sum a^2)^beta, k=2, n=5, alpha=1e-4, beta=0.75. ONNX LRN
    # divides alpha by `size` (as Caffe and PyTorch do), so alpha * size reproduces the paper's formula.
    return b.node("LRN", [x], name=name, size=5, alpha=1e-4 * 5, beta=0.75, bias=2.0)


def _pool(b: Builder, x: str, name: str) -> str:
    # Overlapping pooling, z=3, s=2 (paper sec. 3.4).
    return b.node("MaxPool", [x], name=name, kernel_shape=[3, 3], strides=[2, 2])


def _fc(b: Builder, x: str, out: int, name: str, relu: bool = True) -> str:
    fan_in = b.shape(x)[1]
    with b.scope(name):
        w = b.weight("weight", (out, fan_in), fan_in=fan_in)
        bias = b.weight("bias", (out,))
    y = b.node("Gemm", [x, w, bias], name=name, transB=1)
    return b.node("Relu", [y], name=f"{name}_relu") if relu else y


def alexnet(batch: int = 1, dtype: DType | str = DType.fp32, weights: bool = True, image: int = 224,
            width: float = 1.0, fc: int = 4096, classes: int = 1000, seed: int = 0) -> Graph:
    """AlexNet on an NCHW image batch; output `fc8` (logits) [batch, classes].

    image: input side (224 as in the paper; conv1 pads by 2 so 224 gives the paper's 55x55 maps,
           which the paper's stated 224 only gives with 227 unpadded).
    width: multiplier on conv channels (96, 256, 384, 384, 256), for tiny test variants.
    fc: width of fc6 and fc7 (4096). classes: fc8 outputs (1000). seed: weight seed.
    """
    from compiler.builder import Builder   # here, not at the top: see compiler.zoo

    b = Builder("alexnet", dtype=parse_dtype(dtype), weights=weights, seed=seed)
    c = [max(2, int(round(n * width / 2)) * 2) for n in (96, 256, 384, 384, 256)]  # even, for group=2
    x = b.input("image", (batch, 3, image, image))
    x = _pool(b, _lrn(b, _conv(b, x, c[0], 11, "conv1", stride=4, pad=2), "norm1"), "pool1")
    x = _pool(b, _lrn(b, _conv(b, x, c[1], 5, "conv2", pad=2, group=2), "norm2"), "pool2")
    x = _conv(b, x, c[2], 3, "conv3", pad=1)   # conv3 reads both GPUs' maps: no groups
    x = _conv(b, x, c[3], 3, "conv4", pad=1, group=2)
    x = _pool(b, _conv(b, x, c[4], 3, "conv5", pad=1, group=2), "pool5")
    x = b.node("Flatten", [x], name="flatten", axis=1)
    # Dropout 0.5 (paper sec. 4.2) is the identity at inference; opset 12+ takes no ratio attribute.
    x = b.node("Dropout", [_fc(b, x, fc, "fc6")], name="drop6")
    x = b.node("Dropout", [_fc(b, x, fc, "fc7")], name="drop7")
    logits = _fc(b, x, classes, "fc8", relu=False)
    return b.build([logits])
