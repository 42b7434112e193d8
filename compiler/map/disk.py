"""The searched mappings kept on disk between processes: one small file per key under
$ACCELSIM_CACHE/user-<uid>/mappings (default ~/.cache/accelsim; ACCELSIM_CACHE=off keeps nothing), so a fresh
process skips the search. Whole runs are kept beside them, in runs/ (accelsim.sim.cache).

Invariant: a mapping read back equals the one the search would find now. The key holds everything the search
reads (op signature, the arch's content, budget, the cost model and what it is bound to) and the sources of the
mapper and the cost model. A file is this user's, carries its key and the digest of key and content, and is
replaced whole (compiler.map.entry); the mapping it holds must be the op's (its signature and loops), its tiles
nest (1 <= tile <= the enclosing level's), and it must be legal on the arch (compiler.map.legal). A file failing
any of this is warned about, removed and searched again. JSON, never pickle.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

from compiler.ir import Einsum
from compiler.map import entry
from compiler.map.legal import check
from compiler.mapping import Mapping
from compiler.memo import Memo, memo
from compiler.hardware import Arch

FORMAT = 2          # the file layout below; a change bumps it, and old files are never read again
MAPPING_BYTES = 1 << 20      # a mapping's file is a few KiB; a larger one is refused before it is read
AXES = ("rows", "cols", "lanes", "units")
DATAFLOWS = (None, "ws", "os", "is")
COMPILER = Path(__file__).resolve().parents[1]
# What the search reads besides the op and the arch; the cost model's own folder is added (source_digest).
MAPPER_SOURCES = ("map", "target", "mapping.py", "ir.py", "dtypes.py", "codegen/nest.py")


OFF = "off"         # ACCELSIM_CACHE=off: no file is read or written, mappings or runs


def root() -> Path | None:
    """The cache's folder, None when ACCELSIM_CACHE is "off": read each time, as a test (or a sweep) may point
    ACCELSIM_CACHE elsewhere."""
    where = os.environ.get("ACCELSIM_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "accelsim")
    return None if where == OFF else Path(where)


def folder() -> Path | None:
    """Where this user's mappings go; None when the cache is off or its user folder is not safe to use."""
    return entry.folder(root(), "mappings")


def key(signature: str, arch: Arch, budget: int, report: object) -> list[Any] | None:
    """What the search of one op depends on, as JSON-able values; None when the arch or the report has no content
    that another process could recognise, or the cache is off (then nothing is read or written)."""
    if folder() is None:
        return None
    content = arch_digest(arch)
    model = cost_model(report)
    if content is None or model is None:
        return None
    return [FORMAT, signature, content, budget, model[0], model[1], source_digest(model[2])]


def path(entry_key: list[Any], under: Path | None = None) -> Path:
    """The file of `entry_key` in `under` (by default the mappings' folder)."""
    name = hashlib.sha256(json.dumps(entry_key).encode()).hexdigest()[:40]
    where = under or folder()
    assert where is not None, "the cache is on: key() gave a key"
    return where / name[:2] / f"{name[2:]}.json"       # 256 subfolders: a sweep leaves many files


def load(entry_key: list[Any], op: Einsum, arch: Arch) -> Mapping | None:
    """The mapping stored under `entry_key` for `op` on `arch`, renamed to the op's name; None if absent or (warned
    about, removed) not a mapping of this op that is legal on `arch`."""
    where = path(entry_key)
    body = entry.read(where, entry_key, MAPPING_BYTES)
    if body is None:
        return None
    try:
        data = json.loads(body)
        mapping = Mapping.from_dict(data)
        problem = "does not read back as it was written" if mapping.to_dict() != data else \
            fault(mapping, entry_key[1], op, arch)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as error:
        problem = f"does not hold a mapping ({type(error).__name__}: {error})"
    if problem:
        entry.bad(where, problem)
        return None
    return mapping if mapping.op == op.name else dataclasses.replace(mapping, op=op.name)


def store(entry_key: list[Any], mapping: Mapping, op: Einsum, arch: Arch) -> None:
    """Writes the file aside and renames it into place; a folder that cannot be written is no error. A mapping
    `load` would refuse is not kept (it would be searched again each time, with a warning)."""
    if fault(mapping, entry_key[1], op, arch) is None:
        entry.write(path(entry_key), entry_key, json.dumps(mapping.to_dict(), separators=(",", ":")),
                    MAPPING_BYTES)


def fault(mapping: Mapping, signature: str, op: Einsum, arch: Arch) -> str | None:
    """Why `mapping` cannot be `op`'s mapping of `signature` on `arch`, or None: the op's signature and loops, every
    level's tile of every loop between 1 and the enclosing level's, loop orders over those dims, spatial loops that
    split a dim's innermost tile at most its extent ways (compiler.mapping.Spatial), each dim's GEMM role, then
    compiler.map.legal.check."""
    if mapping.signature != signature:
        return f"holds a mapping of another op ({mapping.signature})"
    if mapping.loops != tuple((d, e) for d, e in op.loops):
        return f"holds loops {list(mapping.loops)}, not the op's {list(op.loops)}"
    dims, outer = [d for d, _ in mapping.loops], dict(mapping.loops)
    if not mapping.levels or len({lv.level for lv in mapping.levels}) != len(mapping.levels):
        return "has no memory levels, or one twice"
    names = {level.name for level in arch.memory}
    for lv in mapping.levels:
        if lv.level not in names:
            return f"level {lv.level!r} is not one of {arch.name}'s"
        if [d for d, _ in lv.tile] != dims:
            return f"level {lv.level}: tiles dims {[d for d, _ in lv.tile]}, not the op's {dims}"
        wrong = next(((d, e) for d, e in lv.tile if not 1 <= e <= outer[d]), None)
        if wrong:
            return f"level {lv.level}: tile {wrong[0]}={wrong[1]}, outside 1..{outer[wrong[0]]}"
        if len(set(lv.order)) != len(lv.order) or not set(lv.order) <= outer.keys():
            return f"level {lv.level}: loop order {list(lv.order)} is not over distinct dims of {dims}"
        outer = dict(lv.tile)
    split = dict.fromkeys(outer, 1)        # how many ways the spatial loops split each dim's innermost tile
    for s in mapping.spatial:
        if s.dim not in outer or s.axis not in AXES or s.factor < 1:
            return f"spatial loop {s.dim} on {s.axis} x{s.factor}: not a dim, an axis of {AXES} and a factor >= 1"
        split[s.dim] *= s.factor
    over = next((d for d in split if split[d] > outer[d]), None)
    if over:
        return f"spatial loops split {over}'s innermost tile of {outer[over]} {split[over]} ways"
    if mapping.dataflow not in DATAFLOWS:
        return f"dataflow {mapping.dataflow!r} is none of ws, os, is"
    if [d for d, _ in mapping.parts] != dims or any(p not in "bmnk" or len(p) != 1 for _, p in mapping.parts):
        return f"GEMM roles {list(mapping.parts)} are not one of b, m, n, k per dim"
    illegal = check(mapping, op, arch)
    return None if illegal is None else f"is not legal on {arch.name}: {illegal}"


_DIGESTS: Memo[int, tuple[object, str | None]] = Memo("compiler.map.disk.arch_digest", 1024)


def arch_digest(arch: Arch) -> str | None:
    """A hash of the arch as loaded (every field but the file it came from, so a copy elsewhere shares entries);
    None if its text names objects by address. Worked out once per object: Archs are frozen."""
    known = _DIGESTS.get(id(arch))
    if known is not None and known[0] is arch:
        return known[1]
    if dataclasses.is_dataclass(arch):
        text = repr([(f.name, getattr(arch, f.name)) for f in dataclasses.fields(arch) if f.name != "source_file"])
    else:
        text = repr(arch)
    digest = None if " at 0x" in text else hashlib.sha256(text.encode()).hexdigest()[:32]
    _DIGESTS[id(arch)] = (arch, digest)      # holding the object: its id is not reused while it is here
    return digest


# keyed by the function itself, which the entry holds (so its id is not reused) until 256 later ones push it out
_MODELS: Memo[types.FunctionType, tuple[str, str, str]] = Memo("compiler.map.disk.cost_model", 256)
SCALARS = (bool, int, float, str, type(None))


def cost_model(report: object) -> tuple[str, str, str] | None:
    """(the report function's name and bytecode, what it closes over, its source folder): the cost model and what
    it is bound to. A closed-over number or string counts by value, anything else by its class: a per-op table
    by kind, accelsim.price.cost.reporter's Pricing by class (SCALE-Sim's prices apart from native ones; a
    Pricing holds no state). None for a callable that is not a plain function: its state cannot be named."""
    if not isinstance(report, types.FunctionType):
        return None
    known = _MODELS.get(report)
    if known is None:
        code = report.__code__
        consts = [sorted(map(repr, c)) if isinstance(c, frozenset) else c      # a set's order varies by process
                  for c in code.co_consts if not isinstance(c, types.CodeType)]
        body = hashlib.sha256(code.co_code + repr(consts).encode()).hexdigest()[:16]
        try:
            values = [cell.cell_contents for cell in report.__closure__ or ()]
        except ValueError:         # a cell not yet filled
            return None
        bound = ",".join(f"{name}={value!r}" if isinstance(value, SCALARS) else
                         f"{name}:{type(value).__module__}.{type(value).__qualname__}"
                         for name, value in zip(code.co_freevars, values))
        known = _MODELS[report] = (f"{report.__module__}.{report.__qualname__}:{body}", bound,
                                   str(Path(code.co_filename).resolve().parent))
    return known


@memo(size=64)
def source_digest(cost_folder: str) -> str:
    """A hash of the mapper's sources and of every .py file in the cost model's folder: an edited mapper or cost
    model never reads an entry an older one wrote (hashed once per process, a few milliseconds)."""
    files = []
    for name in MAPPER_SOURCES:
        where = COMPILER / name
        files += sorted(where.glob("*.py")) if where.is_dir() else [where]
    files += sorted(Path(cost_folder).glob("*.py"))
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for file in files:
        digest.update(file.name.encode() + b"\0" + (file.read_bytes() if file.is_file() else b"") + b"\0")
    return digest.hexdigest()[:32]
