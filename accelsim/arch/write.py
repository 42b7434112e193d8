"""Writing hardware descriptions: a mapping in the schema's shape becomes archs/*.yaml text, in the presets' style.

Writers (SCALE-Sim conversion, host detection) build data, not text: `arch_yaml` checks it with the schema the
reader uses before it writes a line, so a writer cannot produce a file the reader refuses. Comments travel beside
the data: `notes` maps a key path (`clock`, `memory[0].bandwidth`, `compute[1]`) to the comment written after it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from accelsim.arch.schema import build_arch

COMMENT = "     # "
_PLAIN = re.compile(r"[A-Za-z0-9_.][\w .:/%+-]*")
_NUMBER = re.compile(r"[-+]?(\d[\d_]*)?\.?\d*([eE][-+]?\d+)?")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"}


def arch_yaml(data: dict, header: list[str] | tuple[str, ...] = (), notes: dict[str, str] | None = None,
              shown: str = "<generated arch>") -> str:
    """The YAML text of `data` (an arch document, checked by accelsim.arch.schema first: an ArchError naming the
    key if it is not one), `header` lines as comments at the top, `notes` as comments after their keys."""
    build_arch(data, shown, Path(shown))
    notes = notes or {}
    lines = [f"# {line}" if line else "#" for line in header]
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(_noted(f"{key}:", notes.get(key)))
            for i, item in enumerate(value):
                lines += _block(item, f"{key}[{i}]", notes, indent="  ", first="- ")
        elif isinstance(value, dict):
            lines.append(_noted(f"{key}:", notes.get(key)))
            lines += _block(value, key, notes, indent="  ", first="")
        else:
            lines.append(_noted(f"{key}: {_flow(value)}", notes.get(key)))
    return "\n".join(lines) + "\n"


def _block(item: dict, path: str, notes: dict, indent: str, first: str) -> list[str]:
    """One mapping as block lines (a list item's first key on the dash line); nested values in flow style."""
    lines = []
    for j, (key, value) in enumerate(item.items()):
        lead = indent + (first if j == 0 else " " * len(first))
        note = notes.get(f"{path}.{key}") or (notes.get(path) if j == 0 else None)
        lines.append(_noted(f"{lead}{key}: {_flow(value)}", note))
    return lines


def _flow(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return _scalar(str(value))


def _scalar(text: str) -> str:
    """Plain where YAML reads the same string back (`24 MiB`, `pe_array`), else a JSON string (a YAML string)."""
    plain = (_PLAIN.fullmatch(text) and not text.endswith((" ", ":")) and ": " not in text and " #" not in text
             and text.lower() not in _RESERVED and not _NUMBER.fullmatch(text))
    return text if plain else json.dumps(text)


def _noted(line: str, note: str | None) -> str:
    return f"{line}{COMMENT}{note}" if note else line
