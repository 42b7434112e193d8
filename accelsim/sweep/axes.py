"""The axes and derived keys of a sweep spec, checked against the base arch before anything runs.

Invariant: every axis key path resolves in the base arch YAML, and every axis value, set alone on the base
(derived keys applied), passes accelsim.arch.schema at its own key; what fails only in combination with other
values is left to the points. `fail(key, message)` builds the spec's error (file and key named).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from accelsim.arch import ArchError
from accelsim.arch.schema import build_arch
from accelsim.sweep.derive import DeriveError, Derived, parse_derived
from accelsim.sweep.keypath import KeyPathError, Location, locate
from compiler.dtypes import DType
from compiler.errors import UserError

DTYPE_AXIS = "dtype"   # the one axis that is not a key path into the arch: the dtype the hardware computes in
_CHECK = "<sweep axis check>"


@dataclass(frozen=True)
class Axis:
    key: str                         # as written: a key path, or `dtype`
    values: tuple                    # as written in the spec (YAML scalars or lists)
    location: Location | None        # None for the dtype axis


def parse_axes(raw, base_doc: dict, fail) -> tuple[Axis, ...]:
    if not isinstance(raw, dict) or not raw:
        raise fail("axes", "expected a mapping from key path to a list of values, e.g. clock: [500 MHz, 1 GHz]")
    axes = []
    for key, values in raw.items():
        where = f"axes.{key}"
        if not isinstance(values, list) or not values:
            raise fail(where, f"{values!r} is not a non-empty list of values")
        if len({repr(v) for v in values}) != len(values):
            raise fail(where, f"{values!r} lists a value twice")
        if key == DTYPE_AXIS:
            for value in values:
                check_dtype(value, where, fail)
            axes.append(Axis(key, tuple(values), None))
            continue
        try:
            location = locate(base_doc, key)
        except KeyPathError as error:
            raise fail(where, str(error)) from None
        twin = next((a for a in axes if a.location is not None and a.location.segments == location.segments), None)
        if twin is not None:
            raise fail(where, f"names the same key as axes.{twin.key}")
        axes.append(Axis(key, tuple(values), location))
    return tuple(axes)


def parse_derived_keys(raw, base_doc: dict, axes: tuple[Axis, ...], fail) -> tuple[Derived, ...]:
    if not isinstance(raw, dict):
        raise fail("derive", "expected a mapping from key path to an expression")
    swept = {a.location.segments for a in axes if a.location is not None}
    out = []
    for key, expression in raw.items():
        try:
            derived = parse_derived(base_doc, key, expression)
        except (KeyPathError, DeriveError) as error:
            raise fail(f"derive.{key}", str(error)) from None
        if derived.target.segments in swept:
            raise fail(f"derive.{key}", "is also an axis; a key is either swept or derived")
        out.append(derived)
    return tuple(out)


def fitted(value, location: Location, base_doc: dict):
    """`dataflows: ws` means `[ws]`: an axis value for a list-valued key is wrapped in a list."""
    current = location.get(base_doc) if location.exists(base_doc) else None
    return [value] if isinstance(current, list) and not isinstance(value, list) else value


def check_values(axis: Axis, base_doc: dict, derived, base_file: Path, fail) -> None:
    """Each value set alone on the base must pass the schema at its own key (a unit, a type, a range)."""
    if axis.location is None:
        return
    for value in axis.values:
        doc = copy.deepcopy(base_doc)
        axis.location.set(doc, fitted(value, axis.location, base_doc))
        for d in derived:
            try:
                d.apply(doc)
            except DeriveError:
                pass   # judged per point; the value itself is still checked below
        try:
            build_arch(doc, _CHECK, base_file)
        except ArchError as error:
            message = str(error)
            prefix = f"{_CHECK}: {axis.location.schema_path}"
            if message.startswith(prefix) and message[len(prefix):len(prefix) + 1] in (":", ".", "["):
                detail = message[len(prefix):].lstrip(".[]0123456789").lstrip(": ")
                raise fail(f"axes.{axis.key}", f"value {value!r}: {detail}") from None


def check_dtype(value, where: str, fail) -> None:
    try:
        DType.parse(value) if isinstance(value, str) else DType.parse(repr(value))
    except UserError as error:
        raise fail(where, str(error)) from None
