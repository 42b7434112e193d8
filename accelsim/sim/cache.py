"""Whole runs kept on disk between processes: `accelsim.run`'s Result as JSON under $ACCELSIM_CACHE/runs, beside
compiler.map.disk's mappings, so a run asked for again builds nothing and imports no engine (numba).

Invariant: a Result read back equals the one simulating would give now. The key holds everything a run reads: the
zoo model's name and options (or a hash of everything a Graph holds), the arch's content, dtype, fidelity, compat,
fuse, launch and caches, and a hash of every source of accelsim and compiler. A whole run is the unit, as no op's
result can then depend on context the key misses (what ran before, its neighbours, fusion, launch). Files are this
user's, under $ACCELSIM_CACHE/user-<uid>/runs, and replaced whole; one that is not a regular file of this user's,
is over RUN_BYTES, or does not carry its key and the digest of key and content (compiler.map.entry), or whose
Result is of another layout or out of range, is warned about, removed and the run computed again.

A file is three lines: a header (key, digest), the Result with its ops as rows, and the mappings. `store` checks,
field by field, that the Result reads back exactly before writing it, so `load` checks the digest, the layout and
the ranges (counts and times of every op: no negative, infinite or NaN value), not every type again; the mappings
are decoded when first asked for (a score of many runs needs their seconds only).
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import sys
from collections import abc
from pathlib import Path

import numpy as np

from accelsim.arch import Arch
from accelsim.results.result import Result
from compiler.dtypes import DType
from compiler.graph import Graph
from compiler.map import disk, entry
from compiler.mapping import Mapping

FORMAT = 4           # the file layout below; a change bumps it, and old files are never read again
RUN_BYTES = 64 << 20                   # a run's file: ~1 KiB per op; a larger one is refused before it is read
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("accelsim", "compiler")     # every module a run may import, and their data (accelsim/data)
GRAPH_BYTES = 64 << 20                 # a Graph holding more weight and constant bytes than this is not hashed


def key(model, arch: Arch, *, batch, dtype, fidelity: str, compat, fuse: str, launch, caches: str = "warm",
        options: dict) -> list | None:
    """What `accelsim.run(model, arch, ...)` depends on, as JSON values; None where it cannot be named in another
    process (a model file, whose content the build reads; a Graph holding an importer, a value of no plain type or
    over GRAPH_BYTES of arrays; a Pricing object; an option that is no plain value) or the cache is off: then
    nothing is read or written."""
    if folder() is None:
        return None
    model = graph_digest(model) if isinstance(model, Graph) else model if _zoo_name(model) else None
    if model is None:
        return None
    arch_content = disk.arch_digest(arch)
    named = [_plain(value) for value in (batch, compat, fuse, launch, caches, options)]
    if arch_content is None or None in named:
        return None
    given = ["DType", dtype.value] if isinstance(dtype, DType) else _plain(dtype)
    if given is None:
        return None
    return [FORMAT, model, *named, given, fidelity, arch_content, LOADED, np.__version__]


def load(entry_key: list, arch: Arch, recompute) -> Result | None:
    """The Result stored under `entry_key`, naming `arch`'s file (the key holds the arch's content, not where it
    lies); None if absent, or (warned about and removed) not a run this user stored under that key. Its mappings
    are decoded when first asked for; should they not decode then, `recompute()` (the run, computed) gives them."""
    where = disk.path(entry_key, folder())
    body = entry.read(where, entry_key, RUN_BYTES)
    if body is None:
        return None
    result_text, _, mappings_text = body.partition(b"\n")
    try:
        data = json.loads(result_text)
        result = Result.from_record(data, rows=True)
        problem = _out_of_range(data)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as error:
        problem = f"does not hold a run ({type(error).__name__}: {error})"
    if problem:
        return entry.bad(where, problem)
    return Result(model=result.model, arch={**result.arch, "file": str(arch.source_file)}, fidelity=result.fidelity,
                  ops=result.ops, notes=result.notes, memory=result.memory,
                  mappings=StoredMappings(mappings_text, recompute, where))


class StoredMappings(abc.Mapping):
    """A stored run's mappings (op name -> compiler.mapping.Mapping), decoded and checked on first use; if they
    do not read back exactly, the file is warned about and removed, and the run's own computed again."""

    def __init__(self, text: bytes, recompute, where: Path):
        self._text, self._recompute, self._where, self._mappings = text, recompute, where, None

    def _decoded(self) -> dict:
        if self._mappings is None:
            self._mappings = _decode_mappings(self._text)
            if self._mappings is None:
                entry.bad(self._where, "holds mappings that do not read back as they were written")
                self._mappings = dict(self._recompute().mappings)
            self._text = b""
        return self._mappings

    def __getitem__(self, name):
        return self._decoded()[name]

    def __iter__(self):
        return iter(self._decoded())

    def __len__(self):
        return len(self._decoded())


def _decode_mappings(text: bytes) -> dict | None:
    try:
        stored = json.loads(text)
        if type(stored) is not dict:
            return None
        decoded = {name: Mapping.from_dict(m) for name, m in stored.items()}     # JSON's keys are text
        if any(m.to_dict() != stored[name] for name, m in decoded.items()):
            return None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
        return None
    return decoded


def store(entry_key: list, result: Result) -> None:
    """Writes the file aside and renames it into place; a Result holding a value JSON cannot carry exactly (a
    numpy number) is not kept, nor is one computed by code that has changed on disk since this process imported
    it (the key would name the new code), nor anything where the folder cannot be written."""
    if source_digest() != LOADED:
        return
    data = result.to_record()
    try:
        if not _same(Result.from_record(json.loads(json.dumps(data))).to_record(), data):
            return
        body = "\n".join(json.dumps(part, separators=(",", ":")) for part in (
            result.to_record(rows=True), {name: m.to_dict() for name, m in result.mappings.items()}))
    except (TypeError, ValueError, KeyError):
        return
    if _out_of_range(data) is None:      # else `load` would refuse it each time
        entry.write(disk.path(entry_key, folder()), entry_key, body, RUN_BYTES)


def folder() -> Path | None:
    """Where this user's runs go; None when the cache is off or its user folder is not safe to use."""
    return entry.folder(disk.root(), "runs")


def _out_of_range(data: dict) -> str | None:
    """The first count or time of an op (Result.to_record's dict, or rows) that is negative, past int64, infinite
    or NaN."""
    for op in data["ops"]:
        values = op.values() if type(op) is dict else op
        for value in values:
            for number in value.values() if type(value) is dict else value if type(value) is list else (value,):
                if type(number) is int and not 0 <= number < 1 << 63 or \
                        type(number) is float and not (math.isfinite(number) and number >= 0):
                    return f"an op holds {number!r}, where counts and times are finite and not negative"
    return None


def _same(a: dict, b: dict) -> bool:
    """Equal as JSON text: every field there, nothing extra, and 1 is not 1.0 (as == would have it)."""
    return json.dumps(a) == json.dumps(b)


def graph_digest(graph: Graph) -> str | None:
    """A hash of every field of `graph`, its nodes and tensors, and its arrays' bytes; None where one cannot be
    named in another process (the ONNX importer a graph with control flow carries, an object of no plain type), or
    its arrays hold over GRAPH_BYTES. Fields kept out of comparison (a node's `resolved`) follow from the rest."""
    arrays = [a for table in (graph.weights, graph.constants) for a in table.values() if a is not None]
    if graph.import_body is not None or sum(getattr(a, "nbytes", 0) for a in arrays) > GRAPH_BYTES:
        return None
    digest = hashlib.sha256()
    try:
        _describe(graph, digest)
    except TypeError:
        return None
    return "graph:" + digest.hexdigest()


def _describe(value, digest) -> None:
    """Feeds `value` to `digest` as text that tells apart any two values of the types a Graph holds; a TypeError
    for any other type."""
    if type(value) in (bool, int, float, str, type(None)):
        digest.update(f"{type(value).__name__}:{value!r};".encode())
    elif type(value) in (list, tuple):
        digest.update(f"{type(value).__name__}[{len(value)}".encode())
        for item in value:
            _describe(item, digest)
        digest.update(b"]")
    elif type(value) is dict:
        digest.update(f"dict[{len(value)}".encode())
        for name, item in value.items():        # in order: a graph's tables keep the order it was built in
            _describe(name, digest)
            _describe(item, digest)
        digest.update(b"]")
    elif isinstance(value, np.ndarray):
        digest.update(f"array{value.dtype.str}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, np.generic):
        digest.update(f"scalar{value.dtype.str}:".encode() + value.tobytes())
    elif isinstance(value, enum.Enum):
        digest.update(f"{type(value).__qualname__}.{value.name};".encode())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        digest.update(f"{type(value).__qualname__}(".encode())
        for field in dataclasses.fields(value):
            if field.compare:
                _describe(field.name, digest)
                _describe(getattr(value, field.name), digest)
        digest.update(b")")
    else:
        raise TypeError(f"no digest for a {type(value).__name__}")


def _zoo_name(model) -> bool:
    """Whether accelsim.sim.model.load_model builds `model` from the zoo (a name, not a Graph or a file): then its
    graph follows from the name, the options and compiler.zoo's sources, which the key holds."""
    if not isinstance(model, str) or model.lower().endswith((".csv", ".onnx")) or "/" in model or "\\" in model:
        return False
    return not Path(model).exists()


def _plain(value) -> str | None:
    """`value` as text that names it in any process: plain numbers, strings, None, and lists, tuples and dicts of
    them; None for anything else (an object whose state its text may not show)."""
    if type(value) in (bool, int, float, str, type(None)):
        return repr(value)
    if type(value) in (tuple, list):
        inner = [_plain(item) for item in value]
        return None if None in inner else f"{type(value).__name__}({','.join(inner)})"
    if type(value) is dict:
        pairs = [(_plain(k), _plain(v)) for k, v in value.items()]
        if any(None in pair for pair in pairs):
            return None
        return "dict(" + ",".join(f"{k}:{v}" for k, v in sorted(pairs)) + ")"      # in any order given
    return None


def source_digest() -> str:
    """A hash of every .py and .json file of accelsim and compiler as they are now (and the Python version): an
    edited model, pass, mapper, pricer or engine never reads a Result an older one wrote (~10 ms)."""
    files = sorted(path for package in SOURCES for path in (ROOT / package).rglob("*")
                   if path.suffix in (".py", ".json") and "__pycache__" not in path.parts)
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for file in files:
        digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


# The sources as this process imports them: hashed once, as this module is imported. The pipeline is imported
# later, where a run computes, so `store` hashes them again: a run computed after any file changed keeps nothing
# (the code it ran may be older than the files the key would name).
LOADED = source_digest()
