"""ONNX conformance: every node case of the installed onnx package's backend test set, imported by the ONNX frontend
and run by the numpy reference interpreter (as `accelsim eval` runs a model), compared with the outputs onnx ships.

Invariant: each case ends in exactly one Verdict. A refusal is a clean ModelError/UserError, either out of scope by
design (compiler.errors.OutOfScopeError) or not yet supported; anything else escaping is a crash. Integers and bools
compare exactly, floats within onnx's own backend-runner tolerances (the case's rtol/atol; two ulps for bfloat16).
"""
from __future__ import annotations

import argparse
import enum
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.dtypes import DType
from compiler.errors import OutOfScopeError, UserError
from compiler.frontend import from_model
from compiler.graph import Graph
from compiler.ops import REGISTRY, OpDef
from compiler.ops.interpret import run_graph

NEWEST_STABLE_OPSET = 21      # the opset the summary also reports separately (onnxruntime's long-time ceiling)
BF16_RTOL = 2.0 ** -6         # onnx's runner: two bfloat16 ulps, whatever the case's rtol


class Verdict(enum.Enum):
    passed = "pass"
    refused = "refused"
    mismatch = "mismatch"
    crash = "crash"


@dataclass(frozen=True)
class Outcome:
    case: str
    op: str                   # the op the case tests (an expanded case: the function op it expands)
    opset: int | None         # the default ONNX domain's version; None when the model imports only other domains
    verdict: Verdict
    reason: str = ""          # empty for a pass
    by_design: bool = False   # a refusal because the op or type is out of scope by design

    def line(self) -> str:
        kind = "refused (out of scope by design)" if self.by_design else self.verdict.value
        return f"{self.case} [{self.op}, opset {self.opset}]: {kind}: {self.reason}"


def node_cases() -> list:
    """onnx's node test cases (onnx.backend.test.case.TestCase: model + inputs + reference outputs), in onnx's order.
    onnx generates them once per process, most from numpy's global random state: seeded here, so every run sees the
    same inputs. Generating them evaluates onnx's own numpy references, which warn on purpose (overflow, 1/0)."""
    from onnx.backend.test.case.node import collect_testcases

    state = np.random.get_state()
    np.random.seed(0)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return list(collect_testcases())
    finally:
        np.random.set_state(state)


def tested_ops(cases: list) -> dict[str, str]:
    """Case name -> the op it tests: the single node's op type; an expanded case (`<name>_expanded[_verN]`, the
    function body inlined) takes the op of the case it expands."""
    single = {c.name: c.model.graph.node[0].op_type for c in cases if len(c.model.graph.node) == 1}
    ops = {}
    for c in cases:
        base = c.name.split("_expanded")[0]
        ops[c.name] = single.get(base) or single.get(c.name) or c.model.graph.node[0].op_type
    return ops


def case_opset(model: onnx.ModelProto) -> int | None:
    versions = {imp.domain: imp.version for imp in model.opset_import}
    return versions.get("", versions.get("ai.onnx"))


def run_case(case, op: str) -> Outcome:
    opset = case_opset(case.model)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reason = _run(case)
    except OutOfScopeError as error:
        return Outcome(case.name, op, opset, Verdict.refused, _first_line(error, case.name), by_design=True)
    except UserError as error:
        return Outcome(case.name, op, opset, Verdict.refused, _first_line(error, case.name))
    except Exception as error:  # a bug in accelsim: what the harness is here to find
        return Outcome(case.name, op, opset, Verdict.crash, f"{type(error).__name__}: {_first_line(error, case.name)}")
    if reason:
        return Outcome(case.name, op, opset, Verdict.mismatch, reason)
    return Outcome(case.name, op, opset, Verdict.passed)


def import_case(case) -> tuple[Graph, dict[str, np.ndarray]]:
    """The case's model as a Graph, and the feeds for its runtime inputs (inputs read as shapes bound at import)."""
    given = dict(zip([info.name for info in case.model.graph.input], map(_array, case.data_sets[0][0])))
    static = {name: given[name] for name in static_inputs(case.model.graph) if name in given}
    graph = from_model(case.model, source=case.name, input_values=static)
    return graph, {name: value for name, value in given.items() if name in graph.inputs}


def _run(case) -> str:
    """Import, run and compare one case: a mismatch's description, or '' when every output agrees."""
    graph, feeds = import_case(case)
    expected = case.data_sets[0][1]
    actual = run_graph(graph, feeds)
    if len(expected) != len(graph.outputs):
        return f"{len(graph.outputs)} outputs, onnx ships {len(expected)}"
    for name, want in zip(graph.outputs, expected):
        reason = compare(_array(want), np.asarray(actual[name]), graph.tensor(name).dtype, case.rtol, case.atol)
        if reason:
            return f"output {name!r}: {reason}"
    return ""


def _array(value):
    """onnx ships a value numpy has no type for (float8 variants, int4) as a TensorProto, and a sequence as a list
    (kept as it is: the frontend refuses sequences before any value is read)."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value if isinstance(value, list) or value is None else np.asarray(value)


def static_inputs(g: onnx.GraphProto) -> set[str]:
    """Graph inputs whose values import needs: those a node reads for their values (its OpDef's value_inputs: a
    shape, axes, pads), directly, through the nodes computing them (an expanded function's shape arithmetic) or
    from inside a control-flow body. accelsim compiles static shapes, so these are bound as an exporter with fixed
    shapes would have them. The walk stops at ops known from shapes alone (Shape, Size): their inputs need no values."""
    return _needed(g) & {info.name for info in g.input}


def _needed(g: onnx.GraphProto, wanted: Iterable[str] = ()) -> set[str]:
    """Names in `g`, or in the scopes around it, whose values `g`'s nodes need at import (`wanted`: names whose
    values are needed already, such as a body's outputs when the node owning the body is needed)."""
    needed = set(wanted)
    for node in reversed(g.node):                 # ONNX lists nodes in topological order
        definition = REGISTRY.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        whole = any(name in needed for name in node.output)
        if whole and not (definition and _known_from_shapes(definition)):
            needed.update(node.input)
        if definition:
            needed.update(node.input[i] for i in definition.value_inputs if i < len(node.input))
        for attr in node.attribute:
            for body in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                local = {info.name for info in (*body.input, *body.initializer)} | \
                    {name for inner in body.node for name in inner.output}
                outputs = [info.name for info in body.output] if whole else []
                needed |= _needed(body, outputs) - local    # what the body needs from outside it
    return needed


def _known_from_shapes(definition) -> bool:
    return type(definition).fold_from_shapes is not OpDef.fold_from_shapes


def compare(want: np.ndarray, got: np.ndarray, dtype: DType, rtol: float, atol: float) -> str:
    """'' when `got` (as the interpreter holds `dtype`) equals the shipped `want`, else what differs."""
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    shipped = shipped_dtype(want.dtype)
    if shipped != dtype:
        return f"dtype {dtype.value}, expected {shipped.value if shipped else want.dtype}"
    if not dtype.is_float:
        bad = want.astype(got.dtype) != got
        if bad.any():
            return _first_difference(want, got, bad, "exact")
        return ""
    if dtype == DType.bf16:
        rtol = max(rtol, BF16_RTOL)
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    close = np.isclose(got64, want64, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        return _first_difference(want64, got64, ~close, f"rtol {rtol:g}, atol {atol:g}")
    return ""


def shipped_dtype(dtype: np.dtype) -> DType | None:
    """The DType of a shipped array (onnx ships bfloat16, float8, int4... as ml_dtypes arrays)."""
    try:
        return DType.from_numpy(dtype)
    except UserError:
        return None


def _first_difference(want, got, bad, rule: str) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} values differ ({rule}); at {list(index)}: {got[index]!r}, "
            f"expected {want[index]!r}")


def _first_line(error: BaseException, source: str = "") -> str:
    """The message's first line, without the case name the frontend puts first (the outcome names the case)."""
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line.removeprefix(f"{source}: ") if source else line


# -- a whole run ----------------------------------------------------------------------------------------------------

def run_all(cases: list | None = None) -> list[Outcome]:
    cases = node_cases() if cases is None else cases
    ops = tested_ops(cases)
    return [run_case(case, ops[case.name]) for case in cases]


def counts(outcomes: Iterable[Outcome]) -> Counter:
    """Verdict value -> cases, and the refusals split again under 'by design' and 'not yet' (supported)."""
    tally: Counter = Counter({verdict.value: 0 for verdict in Verdict})
    for o in outcomes:
        tally[o.verdict.value] += 1
        if o.verdict == Verdict.refused:
            tally["by design" if o.by_design else "not yet"] += 1
    return tally


def in_scope_pass_fraction(outcomes: list[Outcome]) -> float:
    """Passed cases over the cases not refused by design."""
    in_scope = [o for o in outcomes if not o.by_design]
    return sum(o.verdict == Verdict.passed for o in in_scope) / len(in_scope) if in_scope else 1.0


def summary_line(label: str, outcomes: list[Outcome]) -> str:
    tally = counts(outcomes)
    total = len(outcomes)
    in_scope = total - tally["by design"]
    fraction = f"{tally['pass'] / in_scope:.1%}" if in_scope else "n/a"
    return (f"{label}: {total} cases: {tally['pass']} pass, {tally['refused']} refused ({tally['by design']} out of "
            f"scope by design, {tally['not yet']} not yet supported), {tally['mismatch']} mismatch, "
            f"{tally['crash']} crash; {fraction} of the {in_scope} cases in scope pass")


def failure_table(outcomes: list[Outcome], limit: int | None = None) -> str:
    """Ops with failing cases (not yet supported, mismatch, crash), most cases first, with each op's first reason."""
    failing: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.verdict != Verdict.passed and not o.by_design:
            failing[o.op].append(o)
    rows = sorted(failing.items(), key=lambda item: (-len(item[1]), item[0]))[:limit]
    lines = [f"{'op':<28} {'cases':>5}  {'verdicts':<28} first reason"]
    for op, items in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(Counter(o.verdict.value for o in items).items()))
        reason = items[0].reason
        lines.append(f"{op:<28} {len(items):>5}  {verdicts:<28} {reason[:160]}")
    return "\n".join(lines)


def report(outcomes: list[Outcome], limit: int | None = 40) -> str:
    stable = [o for o in outcomes if o.opset is not None and o.opset <= NEWEST_STABLE_OPSET]
    return "\n".join([
        summary_line(f"opsets <= {NEWEST_STABLE_OPSET}", stable),
        summary_line(f"all opsets (to {onnx.defs.onnx_opset_version()})", outcomes),
        "",
        failure_table(outcomes, limit),
    ]) + "\n"


def check(ops: list[str] | None = None, every_case: bool = False, all_ops: bool = False) -> tuple[str, bool]:
    """Run the cases (of `ops` only, if given) and return the report and whether none mismatched or crashed."""
    cases = node_cases()
    if ops:
        tested = tested_ops(cases)
        cases = [c for c in cases if tested[c.name] in ops]
    outcomes = run_all(cases)
    text = report(outcomes, None if all_ops else 40)
    if every_case:
        text += "".join(o.line() + "\n" for o in outcomes if o.verdict != Verdict.passed)
    return text, not any(o.verdict in (Verdict.mismatch, Verdict.crash) for o in outcomes)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", action="append", default=[], help="only the cases of this op (repeatable)")
    parser.add_argument("--list", action="store_true", help="also print every case that does not pass, one a line")
    parser.add_argument("--all-ops", action="store_true", help="the failure table lists every op, not the first 40")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compiler.conformance", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    text, clean = check(args.op, args.list, args.all_ops)
    print(text, end="")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
