"""The built-in models: `build(name, **kwargs)` makes a Graph by name; each family is one module.

Every model takes batch, dtype and weights (False: shapes only, no arrays drawn), plus its own size overrides.
Importing the zoo imports neither the Builder nor the ops registry (each model imports the Builder when it builds),
so that listing the models (`accelsim models`) costs numpy and no more.
"""
from __future__ import annotations

import difflib
import inspect
from typing import TYPE_CHECKING, Any, Callable

from compiler.errors import ModelError
from compiler.zoo import options
from compiler.zoo.alexnet import alexnet
from compiler.zoo.bert import bert_base
from compiler.zoo.bitnet import bitnet_b158
from compiler.zoo.decoder import gpt2, llama
from compiler.zoo.matmulfree import matmulfree_lm
from compiler.zoo.resnet import resnet18, resnet50
from compiler.zoo.vit import vit_b16

if TYPE_CHECKING:
    from compiler.graph import Graph

MODELS: dict[str, Callable[..., Graph]] = {
    "alexnet": alexnet,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "vit_b16": vit_b16,
    "bert_base": bert_base,
    "gpt2": gpt2,
    "llama": llama,
    "bitnet_b158": bitnet_b158,
    "matmulfree_lm": matmulfree_lm,
}

# Weights that are state rather than learned parameters: BatchNorm's running statistics (torchvision
# counts them as buffers, not in its published parameter counts).
BUFFER_SUFFIXES = (".running_mean", ".running_var")


def build(name: str, **kwargs: Any) -> Graph:
    """The zoo model `name` built with `kwargs` (each model function's docstring lists its arguments).

    Common to all: batch; dtype, the float type weights and activations are stored in for simulation
    (fp32, fp16, bf16, fp8; integer types come from the quantize pass, ternary from bitnet_b158 and
    matmulfree_lm); weights (False: shape-only, nothing drawn, fast at any size); seed.
    """
    fn = model_function(name)
    accepted = inspect.signature(fn).parameters
    unknown = [key for key in kwargs if key not in accepted]
    if unknown:
        raise ModelError(f"model {name!r} takes no argument {', '.join(map(repr, unknown))}; it takes: "
                         f"{', '.join(accepted)}")
    for key, value in kwargs.items():
        options.check(name, key, value, accepted[key].default)
    return fn(**kwargs)


def model_function(name: str) -> Callable[..., Graph]:
    """The function building the zoo model `name`; a ModelError naming the models if there is none."""
    if name not in MODELS:
        close = difflib.get_close_matches(name, MODELS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ModelError(f"unknown model {name!r}; {hint}the zoo has: {', '.join(MODELS)}")
    return MODELS[name]


def option_names(name: str | None = None) -> frozenset[str]:
    """The keywords the built-in model `name` takes (batch, dtype, image, ...); without a name, every keyword some
    built-in model takes."""
    functions = MODELS.values() if name is None else [MODELS[name]]
    return frozenset(key for fn in functions for key in inspect.signature(fn).parameters)


def parameter_count(graph: Graph) -> int:
    """Elements of learned weights, the figure papers and frameworks publish: every weight but BatchNorm
    running statistics and the zoo's tables (Builder.const: shapes, masks, rotary tables), all of which
    the zoo names const*."""
    return sum(graph.tensors[name].elements for name in graph.weights
               if not name.endswith(BUFFER_SUFFIXES) and not name.rsplit("/", 1)[-1].startswith("const"))
