"""`accelsim ops`: every ONNX op the frontend supports, the opsets it is read at, and the IR op kinds it lowers to.

The opsets come from the installed onnx's schemas (the op's versions inside the frontend's range); the IR kinds from
lowering the op's nodes in onnx's conformance cases (compiler/conformance.py), so they are what the compiler does,
not what a table claims. Ops left out by design are listed after, with the reason a model using them is refused.

Lowering every case takes seconds, so the catalogue is kept on disk (ACCELSIM_CACHE/user-<uid>/ops, as runs and
mappings are kept): keyed by a hash of every source of accelsim and compiler (the op registry included) and the
onnx, numpy and Python versions, so that any change of them computes it again. A file that is not this user's
regular file, is over CATALOGUE_BYTES, does not carry its key and digest (compiler.map.entry) or is not a
catalogue of the layout below is warned about, removed and computed again.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from accelsim.commands.command import Command
from compiler.memo import memo

FOLDED = "folded"        # computed at import time from constants: emits no IR
FORMAT = 1               # the catalogue's layout (`_valid`); a change bumps it
CATALOGUE_BYTES = 1 << 20          # ~30 KB for 171 ops; a larger file is refused before it is read


def add_ops(p: argparse.ArgumentParser) -> None:
    p.add_argument("names", nargs="*", metavar="OP", help="only these ops (default: all)")


def _ops(args: argparse.Namespace) -> int:
    from compiler.errors import UserError

    supported, out_of_scope = catalogue()
    unknown = [name for name in args.names if name not in supported and name not in out_of_scope]
    if unknown:
        raise UserError(f"{', '.join(unknown)}: not a supported ONNX op (`accelsim ops` lists them)")
    names = sorted(args.names or [*supported, *out_of_scope])
    shown = [name for name in names if name in supported]
    if shown:
        print(table(shown, supported), end="")
    refused = [name for name in names if name in out_of_scope]
    if refused:
        print("\nout of scope by design (refused with this reason):" if shown else
              "out of scope by design (refused with this reason):")
        for name in refused:
            print(f"  {name}: {out_of_scope[name]}")
    return 0


def catalogue() -> tuple[dict[str, list], dict[str, str]]:
    """(op -> [first opset, last opset, versions, {IR kind: note}] for every supported op, out-of-scope op -> the
    reason it is refused): read from the cache where it holds them for this code, else computed and stored."""
    from compiler.map import disk, entry

    where = entry.folder(disk.root(), "ops")
    key = catalogue_key() if where is not None else None
    if key is not None:
        body = entry.read(disk.path(key, where), key, CATALOGUE_BYTES)
        if body is not None:
            try:
                data = json.loads(body)
            except (ValueError, RecursionError):
                data = None
            if _valid(data):
                return data["ops"], data["out_of_scope"]
            entry.bad(disk.path(key, where), "does not hold a catalogue of ops of the current layout")
    from compiler.frontend import OUT_OF_SCOPE
    from compiler.ops import REGISTRY

    kinds = lowered_kinds()
    supported = {name: [*opsets(name)] + [kinds.get(name, {})] for name in REGISTRY}
    if key is not None:
        body = json.dumps({"ops": supported, "out_of_scope": dict(OUT_OF_SCOPE)}, separators=(",", ":"))
        entry.write(disk.path(key, where), key, body, CATALOGUE_BYTES)
    return supported, dict(OUT_OF_SCOPE)


def catalogue_key() -> list | None:
    """What the catalogue depends on: this code (every source of accelsim and compiler: the registry, lowering, the
    frontend's range and refusals) and the onnx whose schemas and conformance cases it reads."""
    from importlib.metadata import PackageNotFoundError, version

    import numpy as np

    from accelsim.sim.cache import LOADED, source_digest

    if source_digest() != LOADED:        # edited since this process imported it: the key would name the new code
        return None
    try:
        onnx_version = version("onnx")
    except PackageNotFoundError:
        return None
    return [FORMAT, "ops", LOADED, onnx_version, np.__version__, list(sys.version_info[:2])]


def _valid(data) -> bool:
    """Whether `data` is a catalogue `catalogue` wrote: each op's opsets as whole numbers, its kinds and notes and
    each refusal's reason as text."""
    def text(value) -> bool:
        return type(value) is str

    def whole(value) -> bool:
        return type(value) is int and 0 <= value < 1 << 16

    if type(data) is not dict or set(data) != {"ops", "out_of_scope"} or type(data["ops"]) is not dict or \
            type(data["out_of_scope"]) is not dict:
        return False
    for row in data["ops"].values():
        if type(row) is not list or len(row) != 4 or not (whole(row[0]) and whole(row[1])) or \
                type(row[2]) is not list or not all(map(whole, row[2])) or type(row[3]) is not dict or \
                not all(text(k) and text(v) for k, v in row[3].items()):
            return False
    return all(text(k) and text(v) for k, v in data["out_of_scope"].items())


def table(names: list[str], supported: dict[str, list]) -> str:
    """One line per op: name, opset range, the ONNX versions of the op in it, the IR kinds (or why none);
    `supported` as `catalogue` gives it."""
    rows = [("op", "opsets", "versions", "lowers to")]
    for name in names:
        first, last, versions, lowered = supported[name]
        span = f"{first}-{last}" if versions else "-"
        text = ", ".join(f"{kind} ({why})" if why else kind for kind, why in sorted(lowered.items())) \
            or "- (no conformance case reaches it)"
        rows.append((name, span, ", ".join(map(str, versions)) or "-", text))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3] for row in rows]
    return "\n".join(lines) + f"\n{len(names)} ops; opsets from the installed onnx's schemas, IR kinds from lowering " \
                              f"onnx's conformance cases ({FOLDED}: computed at import time)\n"


def opsets(name: str) -> tuple[int, int, list[int]]:
    """(first, last, versions): the opsets in the frontend's range at which `name`'s schema in effect is not
    deprecated, and those schemas' versions (the one in effect at `first` may be older than `first`)."""
    from compiler.frontend import SUPPORTED_OPSETS

    history = sorted(_history().get(name, []))
    live = []
    for opset in SUPPORTED_OPSETS:
        in_effect = [(since, deprecated) for since, deprecated in history if since <= opset]
        if in_effect and not in_effect[-1][1]:
            live.append((opset, in_effect[-1][0]))
    if not live:
        return 0, 0, []
    return live[0][0], live[-1][0], sorted({since for _, since in live})


@memo(size=1)
def _history() -> dict[str, list[tuple[int, bool]]]:
    """Op -> (the opset that gave it a version, whether that version is deprecated), in onnx's order."""
    import onnx

    history: dict[str, list[tuple[int, bool]]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx"):
            history.setdefault(schema.name, []).append((schema.since_version, schema.deprecated))
    return history


def lowered_kinds(cases=None) -> dict[str, dict[str, str]]:
    """Op -> {IR kind or 'folded' or 'eval only' -> a note}: what lowering each op's nodes gave, over every
    conformance case that imports."""
    from compiler.conformance import import_case, node_cases
    from compiler.errors import UserError
    from compiler.ops.interpret import folded
    from compiler.ops.shapes import opdef

    kinds: dict[str, dict[str, str]] = defaultdict(dict)
    for case in node_cases() if cases is None else cases:
        try:
            graph, _ = import_case(case)
        except Exception:  # refused or broken at import: the conformance run reports it; nothing to lower
            continue
        for node in graph.nodes:
            if folded(graph, node):
                kinds[node.op].setdefault(FOLDED, "")
                continue
            try:
                lowered = opdef(graph, node).lower(node, graph)
            except UserError as error:        # data-dependent shapes: numerics only
                kinds[node.op].setdefault("eval only", _reason(str(error)))
                continue
            except Exception as error:        # a bug in the op's lowering: shown, not hidden
                kinds[node.op].setdefault("lowering fails", type(error).__name__)
                continue
            for op in lowered:
                kinds[node.op].setdefault(op.kind.value, "")
    return kinds


def _reason(message: str, limit: int = 70) -> str:
    """A refusal's own words without the file and node it names, cut at a word."""
    text = message.split("): ", 1)[-1]
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


COMMAND = Command("ops", "list the supported ONNX ops, the opsets each is read at and the IR op kinds it lowers to "
                  "(from lowering onnx's conformance cases: about 10 seconds the first time, then read from the cache)",
                  add_ops, _ops)
