"""What the built-in models' options mean and which values each takes: one declaration that `build` checks a value
against and `accelsim models NAME` lists, so the listing and the checks cannot disagree.

A model function's signature gives its options and their defaults; a default's type gives the values allowed (an
int default: an integer of at least 1, or 0 where the default is 0; a float: a finite number above 0; a bool: true
or false), CHOICES the values of a text option, and MEANINGS what each option does. Every option of every model has
a meaning (a test checks it), so a new option cannot be added without one.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import NoReturn

from compiler.dtypes import DType
from compiler.errors import ModelError

MEANINGS = {
    "batch": "samples per run",
    "dtype": "float type weights and activations are stored in",
    "weights": "draw weights (false: shapes only, nothing drawn)",
    "seed": "seed the weights are drawn from",
    "image": "input image side, pixels",
    "width": "multiplier on every layer's channels (small test variants)",
    "classes": "classifier outputs",
    "fc": "width of the fc6 and fc7 layers",
    "patch": "patch side, pixels",
    "seq": "context length, tokens",
    "mode": "prefill: all seq tokens at once; decode: 1 token over `past` cached ones",
    "past": "tokens already in the KV cache in decode mode",
    "layers": "blocks (depth)",
    "hidden": "model width",
    "heads": "attention heads (hidden must be a multiple)",
    "mlp": "feed-forward width",
    "vocab": "vocabulary size",
    "max_positions": "longest context the position table holds",
    "latent": "the training form: float latent weights quantised in the forward pass",
}

CHOICES = {"mode": ("prefill", "decode")}
# dtype: the float types (compiler.zoo.layers.parse_dtype refuses the others, naming how to get them)
FLOAT_DTYPES = tuple(d.value for d in DType if d.is_float)

# What a default of None stands for, and the least integer such an option takes.
NONE_MEANS = {"past": "seq - 1", "mlp": "4 x hidden"}
NONE_LEAST = {"past": 0}


def allowed(key: str, default: object) -> str:
    """The values option `key` with this default takes, in words."""
    if key in CHOICES:
        return " | ".join(CHOICES[key])
    if key == "dtype":
        return f"a float type: {', '.join(FLOAT_DTYPES[:6])}, ..."
    if isinstance(default, bool):
        return "true | false"
    if isinstance(default, int):
        return f"integer >= {min(default, 1)}"
    if isinstance(default, float):
        return "number > 0"
    return f"integer >= {NONE_LEAST.get(key, 1)}" if default is None else "any"


def check(model: str, key: str, value: object, default: object) -> None:
    """A ModelError naming the option unless `value` is one `allowed(key, default)` describes: `--opt image=abc`
    is refused here, not deep inside the model's code (dtype is parse_dtype's to check)."""
    def fail(expected: str) -> NoReturn:
        raise ModelError(f"model {model!r} option {key}={value!r}: expected {expected}")

    if key in CHOICES:
        if value not in CHOICES[key]:
            fail(" or ".join(map(repr, CHOICES[key])))
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            fail("true or false")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            fail("an integer")
        if value < min(default, 1):
            fail(f"an integer of at least {min(default, 1)}")
    elif isinstance(default, float):       # a multiplier (width): nan, inf, 0 or -1 makes no model
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail("a number")
        if not (math.isfinite(value) and value > 0):
            fail("a finite number above 0")
    elif default is None and value is not None:
        least = NONE_LEAST.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            fail(f"an integer of at least {least}")


def describe(fn: Callable[..., object]) -> list[tuple[str, str, str, str]]:
    """(option, default, allowed values, meaning) for each option of the model function `fn`, in signature order."""
    rows = []
    for key, parameter in inspect.signature(fn).parameters.items():
        default = parameter.default
        shown = NONE_MEANS.get(key, "none") if default is None else \
            default.value if isinstance(default, DType) else str(default).lower() if isinstance(default, bool) \
            else str(default)
        rows.append((key, shown, allowed(key, default), MEANINGS.get(key, "")))
    return rows
