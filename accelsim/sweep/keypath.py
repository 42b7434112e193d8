"""Key paths into an arch YAML document: `compute.pe_array.array.rows`, `memory.dram.bandwidth`, `clock`.

A segment names a mapping key, or a list element by its `name` (`pe_array`) or its index (`0`). Invariant:
`locate` either returns where the path lands (and the schema's spelling of it, `compute[0].array.rows`, the
one accelsim.arch.schema's messages use) or raises KeyPathError saying which segment is wrong and what
exists there; it never creates anything but a missing last key of a mapping, which the schema then judges.
"""
from __future__ import annotations

from dataclasses import dataclass


class KeyPathError(ValueError):
    """A key path that does not lead anywhere in the document."""


@dataclass(frozen=True)
class Location:
    """Where a key path lands: `container[slot]`, spelled `schema_path` the way arch_schema writes it."""

    segments: tuple[str | int, ...]   # dict keys and list indices from the top
    schema_path: str

    def get(self, doc):
        node = doc
        for segment in self.segments:
            node = node[segment]
        return node

    def exists(self, doc) -> bool:
        node = doc
        for segment in self.segments:
            if isinstance(node, dict) and segment in node or isinstance(node, list) and segment < len(node):
                node = node[segment]
            else:
                return False
        return True

    def set(self, doc, value) -> None:
        node = doc
        for segment in self.segments[:-1]:
            node = node[segment]
        node[self.segments[-1]] = value


def locate(doc, key: str) -> Location:
    """Resolve `key` in `doc` (the parsed YAML); the last segment may be a key the mapping lacks."""
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise KeyPathError(f"{key!r} is not a key path like compute.pe_array.array.rows")
    parts = key.split(".")
    node, segments, schema = doc, [], ""
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the top level"
        if isinstance(node, dict):
            if part not in node and not last:
                raise KeyPathError(f"no key {part!r} under {where} (keys there: {', '.join(map(str, node))})")
            segments.append(part)
            schema = f"{schema}.{part}" if schema else part
            node = node.get(part)
        elif isinstance(node, list):
            index = _element(node, part, where)
            segments.append(index)
            schema = f"{schema}[{index}]"
            node = node[index]
        else:
            raise KeyPathError(f"{where} is the value {node!r}, it has no key {part!r}")
    return Location(tuple(segments), schema)


def _element(items: list, part: str, where: str) -> int:
    if part.isdigit():
        index = int(part)
        if index >= len(items):
            raise KeyPathError(f"index {index} is past the end of {where} ({len(items)} entries)")
        return index
    names = [item.get("name") for item in items if isinstance(item, dict)]
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == part:
            return index
    shown = ", ".join(str(n) for n in names if n is not None) or "none named"
    raise KeyPathError(f"no entry named {part!r} in {where} (entries: {shown}; or an index 0-{len(items) - 1})")
