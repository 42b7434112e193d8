"""User-facing errors: every one names the file, node, key or value at fault.

The CLI turns a UserError into one line on stderr and a non-zero exit; anything
else escaping is a bug in accelsim, not in the user's input.
"""


class UserError(Exception):
    """Bad input from the user: a file, a model, an option or a preset."""


class ModelError(UserError):
    """A model (ONNX file, zoo model, built graph) that cannot be imported, shaped or run."""


class MissingWeightsError(ModelError):
    """Numerics asked for weights the model does not carry (simulation needs only shapes)."""


class MappingError(UserError):
    """An op the target cannot run, or no mapping of it fits: names the op, the operand, the level and the bytes."""


class OutOfScopeError(ModelError):
    """A model using what accelsim leaves out by design (strings, sequences, image decoding...); the message says why."""


class CapacityWarning(UserWarning):
    """A model that does not fit its device's memory, said before it is simulated as if it did."""
