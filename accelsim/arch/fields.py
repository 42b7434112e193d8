"""Typed readers of one YAML document's fields, shared by the arch and system schemas (accelsim.arch.schema,
accelsim.arch.system_schema): each returns the value checked or raises an ArchError that starts `<file>: <key
path>: ` and quotes the value at fault (cut short), with the allowed keys or names and a close match when one is.
"""
from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from accelsim.arch import units
from compiler.hardware import ArchError
from compiler.references import quoted

E = TypeVar("E", bound=enum.Enum)


class YamlFile:
    """The file being read, for messages: every error starts `<file>: <key path>: `."""

    def __init__(self, shown: str):
        self.shown = shown

    def error(self, path: str, message: str) -> ArchError:
        return ArchError(f"{self.shown}: {path or '(top level)'}: {message}")


def key_at(path: str, key: str | int) -> str:
    """The key path one level down: `memory` and 1 -> `memory[1]`, `memory[1]` and `bandwidth` ->
    `memory[1].bandwidth`."""
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def as_mapping(f: YamlFile, value: Any, path: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict:
    """`value` as a mapping with every `required` key and no key outside `required` and `optional`."""
    allowed = (*required, *optional)
    if not isinstance(value, dict):
        raise f.error(path, f"{is_not(value, path, 'a mapping')}; expected keys {', '.join(allowed)}")
    if not path and value and not any(key in allowed for key in value):   # another kind of file: its keys unshown
        raise f.error(path, f"the document has none of the keys {', '.join(allowed)}")
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise f.error(key_at(path, key), f"unknown key {quoted(key)}; {hint}allowed: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise f.error(key_at(path, key), f"missing key {key!r} (required: {', '.join(required)})")
    return value


def is_not(value: Any, path: str, expected: str) -> str:
    """`<value> is not <expected>`: the whole document by its type only (a file that is one long string, a key or
    a token, is never quoted back), any other value quoted and cut short."""
    if path:
        return f"{quoted(value)} is not {expected}"
    return f"the document is not {expected} (it is {'empty' if value is None else f'a {type(value).__name__}'})"


def as_list(f: YamlFile, value: Any, path: str) -> list:
    """`value` as a non-empty list."""
    if not isinstance(value, list) or not value:
        raise f.error(path, is_not(value, path, "a non-empty list"))
    return value


def as_text(f: YamlFile, value: Any, path: str) -> str:
    """`value` as a string with something in it besides spaces."""
    if not isinstance(value, str) or not value.strip():
        raise f.error(path, f"{quoted(value)} is not a non-empty string")
    return value


def as_count(f: YamlFile, value: Any, path: str, minimum: int = 1) -> int:
    """`value` as a whole count (`8`, `1k`; accelsim.arch.units) of at least `minimum`."""
    try:
        n = units.parse_count(value)
    except units.UnitError as e:
        raise f.error(path, str(e)) from None
    if n < minimum:
        raise f.error(path, f"{quoted(value)} must be at least {minimum}")
    return n


def as_quantity(f: YamlFile, value: Any, path: str, parse: Callable[[Any], float], positive: bool = True) -> float:
    """`value` read by one of accelsim.arch.units' parsers (`parse`: `900 GB/s` -> bytes per second), above zero
    when `positive`."""
    try:
        x = parse(value)
    except units.UnitError as e:
        raise f.error(path, str(e)) from None
    if positive and x <= 0:
        raise f.error(path, f"{quoted(value)} must be greater than zero")
    return x


def as_enum(f: YamlFile, value: Any, path: str, enum_cls: type[E], what: str) -> E:
    """`value` as the member of `enum_cls` it names (`what` names the vocabulary in the message)."""
    return enum_cls(one_of(f, value, path, [m.value for m in enum_cls], what))


def one_of(f: YamlFile, value: Any, path: str, names: list[str], what: str) -> str:
    """`value` when it is one of `names`."""
    if isinstance(value, str) and value in names:
        return value
    close = difflib.get_close_matches(str(value), names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise f.error(path, f"unknown {what} {quoted(value)}; {hint}use one of {', '.join(names)}")
