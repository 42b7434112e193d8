"""Col2Im: the inverse of im2col. Each column of the input is one sliding block (kernel positions by channel);
the blocks are added back into an image of `image_shape`, overlaps summing (strides, dilations, pads as Conv).
One Map: an add per input element, spread over the output's elements.

Invariant: image_shape and block_shape are compile-time; the input is (N, C * prod(block), number of blocks).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import ArrayLike

from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Map
from compiler.ops.base import OpDef, const_input, fail, given, operand, out, output_operand, register, require


def geometry(node: Node, x_shape: tuple[int, ...], image: ArrayLike, block: ArrayLike
             ) -> tuple[int, list[int], list[int], list[int], list[int], list[int], list[int]]:
    """(channels, image, block, dilations, pads, strides, blocks per spatial axis), checked against the input."""
    image = [int(v) for v in np.asarray(image).reshape(-1)]
    block = [int(v) for v in np.asarray(block).reshape(-1)]
    dims = len(image)
    dilations = list(node.attr("dilations", [1] * dims))
    pads = list(node.attr("pads", [0] * 2 * dims))
    strides = list(node.attr("strides", [1] * dims))
    if len(block) != dims or len(dilations) != dims or len(strides) != dims or len(pads) != 2 * dims:
        raise fail(node, f"image_shape {image}, block_shape {block}, dilations {dilations}, strides {strides} "
                         f"and pads {pads} (twice as long) must describe the same {dims} spatial axes")
    if len(x_shape) != 3:
        raise fail(node, f"the input has shape {list(x_shape)}; Col2Im needs (N, C * prod(block), blocks)")
    per_channel = math.prod(block)
    if per_channel == 0 or x_shape[1] % per_channel:
        raise fail(node, f"input dimension 1 ({x_shape[1]}) must be a multiple of prod(block_shape {block})")
    counts = [(image[i] + pads[i] + pads[i + dims] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(dims)]
    if min(counts, default=1) < 1 or math.prod(counts) != x_shape[2]:
        raise fail(node, f"the input holds {x_shape[2]} blocks, but image {image} with block {block}, pads {pads}, "
                         f"strides {strides} and dilations {dilations} has {counts} = {math.prod(counts)}")
    return x_shape[1] // per_channel, image, block, dilations, pads, strides, counts


def col2im(node: Node, x: np.ndarray, image: ArrayLike, block: ArrayLike) -> np.ndarray:
    channels, image, block, dilations, pads, strides, counts = geometry(node, x.shape, image, block)
    dims = len(image)
    cols = x.reshape((x.shape[0], channels, *block, *counts))
    padded = np.zeros((x.shape[0], channels) + tuple(image[i] + pads[i] + pads[i + dims] for i in range(dims)),
                      dtype=x.dtype)
    for offset in itertools.product(*(range(k) for k in block)):
        window = tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                       for o, d, s, n in zip(offset, dilations, strides, counts))
        padded[(slice(None), slice(None)) + window] += cols[(slice(None), slice(None)) + offset]
    inner = tuple(slice(pads[i], pads[i] + image[i]) for i in range(dims))
    return padded[(slice(None), slice(None)) + inner]


@register("Col2Im")
class Col2Im(OpDef):
    value_inputs = (1, 2)

    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        x = require(node, ins, 3)[0]
        image = const_input(node, graph, 1, "image_shape")
        block = const_input(node, graph, 2, "block_shape")
        channels, image_size, *_ = geometry(node, x.shape, image, block)
        return [out(node, (x.shape[0], channels, *image_size), x.dtype)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        x, image, block = given(node, args, 3)
        return [col2im(node, np.asarray(x), image, block)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        image, block = const_input(node, graph, 1, "image_shape"), const_input(node, graph, 2, "block_shape")
        x = graph.tensor(node.inputs[0])
        per_element = max(1, math.ceil(x.elements / max(1, graph.tensor(node.outputs[0]).elements)))
        # the shapes are compile-time constants: only the columns are read
        return [Map(name=node.name, node=node.name, op=node.op, inputs=(operand(graph, node.inputs[0]),),
                    output=output_operand(node, graph), ops_per_element=per_element,
                    fn=lambda a: col2im(node, np.asarray(a), image, block))]
