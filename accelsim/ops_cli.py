"""`accelsim ops`: every ONNX op the frontend supports, the opsets it is read at, and the IR op kinds it lowers to.

The opsets come from the installed onnx's schemas (the op's versions inside the frontend's range); the IR kinds from
lowering the op's nodes in onnx's conformance cases (compiler/conformance.py), so they are what the compiler does,
not what a table claims. Ops left out by design are listed after, with the reason a model using them is refused.
"""
from __future__ import annotations

import argparse
from collections import defaultdict

FOLDED = "folded"        # computed at import time from constants: emits no IR


def add_ops_parser(sub) -> None:
    p = sub.add_parser("ops", help="list the supported ONNX ops, the opsets each is read at and the IR op kinds "
                                   "it lowers to (from lowering onnx's conformance cases; takes a few seconds)")
    p.add_argument("names", nargs="*", metavar="OP", help="only these ops (default: all)")
    p.set_defaults(handler=_ops)


def _ops(args: argparse.Namespace) -> int:
    from compiler.errors import UserError
    from compiler.frontend import OUT_OF_SCOPE
    from compiler.ops import REGISTRY

    unknown = [name for name in args.names if name not in REGISTRY and name not in OUT_OF_SCOPE]
    if unknown:
        raise UserError(f"{', '.join(unknown)}: not a supported ONNX op (`accelsim ops` lists them)")
    names = sorted(args.names or [*REGISTRY, *OUT_OF_SCOPE])
    supported = [name for name in names if name in REGISTRY]
    if supported:
        print(table(supported, lowered_kinds()), end="")
    refused = [name for name in names if name in OUT_OF_SCOPE]
    if refused:
        print("\nout of scope by design (refused with this reason):" if supported else
              "out of scope by design (refused with this reason):")
        for name in refused:
            print(f"  {name}: {OUT_OF_SCOPE[name]}")
    return 0


def table(names: list[str], kinds: dict[str, dict[str, str]]) -> str:
    """One line per op: name, opset range, the ONNX versions of the op in it, the IR kinds (or why none)."""
    rows = [("op", "opsets", "versions", "lowers to")]
    for name in names:
        first, last, versions = opsets(name)
        span = f"{first}-{last}" if versions else "-"
        lowered = kinds.get(name, {})
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


_HISTORY: dict[str, list[tuple[int, bool]]] = {}


def _history() -> dict[str, list[tuple[int, bool]]]:
    import onnx

    if not _HISTORY:
        for schema in onnx.defs.get_all_schemas_with_history():
            if schema.domain in ("", "ai.onnx"):
                _HISTORY.setdefault(schema.name, []).append((schema.since_version, schema.deprecated))
    return _HISTORY


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
