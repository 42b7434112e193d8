"""A frozen dataclass copied with some fields changed, at a fifth of dataclasses.replace's cost.

replace() runs the class's __init__ again, setting every frozen field through object.__setattr__; passes that touch
each op of a 100,000-op model (a dtype, a fused flag, a kernel name) spent a third of its simulation there. `but`
copies the instance's fields and sets the changed ones: use it only for changes that cannot make the object invalid,
since __post_init__ does not run again. Values derived from the fields and kept on the instance (compiler.mapping's
signature), under the key DERIVED, are left behind, to be worked out again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
DERIVED = "_signature"      # one key, tested inline: a loop over a tuple of names cost a tenth of each copy


def but(obj: T, **changes: Any) -> T:
    copy = _new(obj.__class__)
    state = copy.__dict__
    state.update(obj.__dict__)
    if DERIVED in state:            # a test and a del: cheaper than pop's default where it is absent, as it mostly is
        del state[DERIVED]
    fields = len(state)
    state.update(changes)
    if len(state) != fields:        # a name the instance did not hold: checked then, not name by name on every copy
        for name in changes:
            if name not in obj.__dataclass_fields__:
                raise TypeError(f"{type(obj).__name__} has no field {name}")
    return copy


_new = object.__new__
