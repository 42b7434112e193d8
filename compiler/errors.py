"""User-facing errors: every one names the file, node, key or value at fault.

The CLI turns a UserError into one line on stderr and a non-zero exit; anything
else escaping is a bug in accelsim, not in the user's input.
"""
import os


class UserError(Exception):
    """Bad input from the user: a file, a model, an option or a preset."""


class ModelError(UserError):
    """A model (ONNX file, zoo model, built graph) that cannot be imported, shaped or run."""


class UnknownValueError(ModelError):
    """A value the model needs at import (a shape, axes, sizes, a count) that only a run would compute; `tensors`
    names the tensors it lacks, so the frontend can say which graph inputs to bind."""

    def __init__(self, message: str, tensors: tuple[str, ...] = ()):
        super().__init__(message)
        self.tensors = tuple(tensors)


class MissingWeightsError(ModelError):
    """Numerics asked for weights the model does not carry (simulation needs only shapes)."""


class MappingError(UserError):
    """An op the target cannot run, or no mapping of it fits: names the op, the operand, the level and the bytes."""


class OutOfScopeError(ModelError):
    """A model using what accelsim leaves out by design (strings, sequences, image decoding...); the message says
    why."""


class CapacityWarning(UserWarning):
    """A model that does not fit its device's memory, said before it is simulated as if it did."""


class CacheWarning(UserWarning):
    """A file of the on-disk cache not used (damaged, not a regular file, too large, another user's): names it and
    says why; the result is computed again."""


def read_text(path: str | os.PathLike[str], error: type[UserError] = UserError, shown: str | None = None) -> str:
    """The UTF-8 text of a file the user gave, newlines as open() reads them. One that cannot be read, or is not
    UTF-8, is `error` naming the file (as `shown`, else its path), the line and the first bad byte."""
    from pathlib import Path

    shown = str(path) if shown is None else shown
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise error(f"{shown}: cannot read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"{shown}: line {line}: byte 0x{data[e.start]:02x} is not UTF-8 text; save the file as UTF-8"
                    ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")    # universal newlines, as open() reads text
