"""ONNX conformance: every node case of the installed onnx package's backend test set, imported by the ONNX frontend
and run by the numpy reference interpreter (as `accelsim eval` runs a model), compared with the outputs onnx ships.

Invariant: each case ends in exactly one Verdict. A refusal is a clean ModelError/UserError, either out of scope by
design (compiler.errors.OutOfScopeError) or not yet supported; anything else escaping is a crash. Integers and bools
compare exactly, floats within onnx's own backend-runner tolerances (the case's rtol/atol; two ulps for bfloat16).
A DISPUTED case (onnx's data and onnxruntime part ways, the spec does not side with onnx) is checked against
onnxruntime's outputs for the same model and inputs instead.
"""
from __future__ import annotations

import argparse
import enum
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

if TYPE_CHECKING:                       # onnx is imported where a case is read: `accelsim validate --help` needs none
    import onnx

from compiler.dtypes import DType
from compiler.errors import OutOfScopeError, UserError
from compiler.graph import Graph

# onnx.backend.test.case.TestCase, whose model and data sets a node case always has (the class types them optional)
Case = Any

NEWEST_STABLE_OPSET = 21      # the opset the summary also reports separately (onnxruntime's long-time ceiling)
BF16_RTOL = 2.0 ** -6         # onnx's runner: two bfloat16 ulps, whatever the case's rtol


# Cases whose shipped outputs onnxruntime (the project's numerical oracle) does not give, where the spec text does not
# side with onnx's data: accelsim follows onnxruntime. Case name -> why.
DISPUTED = {
    "test_resize_downsample_scales_linear_align_corners":
        "align_corners divides by the output length (the spec's length_resized, onnxruntime); "
        "onnx's data by scale*length",
    "test_resize_downsample_scales_cubic_align_corners":
        "align_corners divides by the output length (the spec's length_resized, onnxruntime); "
        "onnx's data by scale*length",
    "test_maxunpool_export_with_output_shape":
        "indices index the output_shape tensor, as MaxPool of it records them (onnxruntime); onnx's data indexes the "
        "4x4 it computes and pads that to 5x5; the spec leaves it open",
    "test_attention_4d_causal_fp16_expanded":
        "an fp16 Softmax node: onnx's reference rounds x - max, exp, sum and divide to fp16, onnxruntime computes in "
        "fp32 and rounds once; Softmax's spec names no inner precision",
}


class Verdict(enum.Enum):
    passed = "pass"
    disputed = "pass (onnxruntime)"     # a DISPUTED case equal to onnxruntime, whose outputs onnx's data differs from
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


def node_cases() -> list[Case]:
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


def tested_ops(cases: list[Case]) -> dict[str, str]:
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


def run_case(case: Case, op: str, execute: Execute | None = None) -> Outcome:
    """The case's outcome, its outputs computed by `execute` (default: the frontend and the reference interpreter,
    as `accelsim eval` runs them; accelsim.validate.onnx_api passes the public API's)."""
    opset = case_opset(case.model)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            verdict, reason = _run(case, execute or interpret)
    except OutOfScopeError as error:
        return Outcome(case.name, op, opset, Verdict.refused, _first_line(error, case.name), by_design=True)
    except UserError as error:
        return Outcome(case.name, op, opset, Verdict.refused, _first_line(error, case.name))
    except Exception as error:  # a bug in accelsim: what the harness is here to find
        return Outcome(case.name, op, opset, Verdict.crash, f"{type(error).__name__}: {_first_line(error, case.name)}")
    return Outcome(case.name, op, opset, verdict, reason)


def case_inputs(case: Case) -> dict[str, np.ndarray]:
    """The case's input arrays by graph input name (narrow types as the ml_dtypes arrays onnx ships)."""
    return dict(zip([info.name for info in case.model.graph.input], map(_array, case.data_sets[0][0])))


def import_case(case: Case) -> tuple[Graph, dict[str, np.ndarray]]:
    """The case's model as a Graph, and the feeds for its runtime inputs (inputs read as shapes bound at import,
    as `accelsim eval` binds them from its --inputs: compiler.bind.static_inputs)."""
    from compiler.frontend import from_model

    given = case_inputs(case)
    graph = from_model(case.model, source=case.name, feeds=given)
    return graph, {name: value for name, value in given.items() if name in graph.inputs}


def interpret(case: Case) -> tuple[Graph, dict[str, np.ndarray]]:
    """The case's Graph and its outputs by the reference interpreter."""
    from compiler.ops.interpret import run_graph

    graph, feeds = import_case(case)
    return graph, run_graph(graph, feeds)


Execute = Callable[..., "tuple[Graph, dict[str, np.ndarray]]"]   # case -> (its Graph, its outputs by name)


def _run(case: Case, execute: Execute) -> tuple[Verdict, str]:
    """Import, run and compare one case: pass, or a mismatch and what differs (a DISPUTED case: see _settle)."""
    graph, actual = execute(case)
    shipped = [_array(want) for want in case.data_sets[0][1]]
    reason = _differences(graph, actual, shipped, case)
    if case.name in DISPUTED:
        return _settle(case, graph, actual, shipped, reason)
    return (Verdict.mismatch, reason) if reason else (Verdict.passed, "")


def _settle(case: Case, graph: Graph, actual: dict[str, np.ndarray], shipped: list[np.ndarray], reason: str
            ) -> tuple[Verdict, str]:
    """A DISPUTED case passes against onnxruntime only while the dispute stands: accelsim fails onnx's data and
    equals onnxruntime's outputs (the case's tolerances), so onnx's data is not onnxruntime's. Else the entry is
    stale (accelsim passes onnx's data) or accelsim is wrong (it differs from onnxruntime): a mismatch."""
    if not reason:
        return Verdict.mismatch, "equals onnx's shipped data: take it off DISPUTED"
    oracle = onnxruntime_outputs(case)
    against_ort = _differences(graph, actual, oracle, case)
    if against_ort:
        return Verdict.mismatch, f"disputed, but differs from onnxruntime too: {against_ort}"
    return Verdict.disputed, f"{DISPUTED[case.name]} (against onnx's data: {reason})"


def onnxruntime_outputs(case: Case) -> list[np.ndarray]:
    """onnxruntime's outputs (CPU) for the case's model and inputs."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3          # no warnings about initializers a function body leaves unused
    session = onnxruntime.InferenceSession(case.model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    feeds = {info.name: _array(value) for info, value in zip(case.model.graph.input, case.data_sets[0][0])}
    outputs: list[np.ndarray] = session.run(None, feeds)
    return outputs


def _differences(graph: Graph, actual: dict[str, np.ndarray], expected: list[np.ndarray], case: Case) -> str:
    """'' when every output of `actual` equals `expected` (in graph output order), else the first difference."""
    if len(expected) != len(graph.outputs):
        return f"{len(graph.outputs)} outputs, expected {len(expected)}"
    for name, want in zip(graph.outputs, expected):
        reason = compare(np.asarray(want), np.asarray(actual[name]), graph.tensor(name).dtype, case.rtol, case.atol)
        if reason:
            return f"output {name!r}: {reason}"
    return ""


def _array(value: Any) -> Any:
    """onnx ships a value numpy has no type for (float8 variants, int4) as a TensorProto, and a sequence as a list
    (kept as it is: the frontend refuses sequences before any value is read)."""
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return value if isinstance(value, list) or value is None else np.asarray(value)


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


def _first_difference(want: np.ndarray, got: np.ndarray, bad: np.ndarray, rule: str) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} values differ ({rule}); at {list(index)}: {got[index]!r}, "
            f"expected {want[index]!r}")


def _first_line(error: BaseException, source: str = "") -> str:
    """The message's first line, without the case name the frontend puts first (the outcome names the case)."""
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line.removeprefix(f"{source}: ") if source else line


# -- a whole run ----------------------------------------------------------------------------------------------------

def run_all(cases: list[Case] | None = None, execute: Execute | None = None) -> list[Outcome]:
    cases = node_cases() if cases is None else cases
    ops = tested_ops(cases)
    return [run_case(case, ops[case.name], execute) for case in cases]


def counts(outcomes: Iterable[Outcome]) -> Counter[str]:
    """Verdict value -> cases, and the refusals split again under 'by design' and 'not yet' (supported)."""
    tally: Counter[str] = Counter({verdict.value: 0 for verdict in Verdict})
    for o in outcomes:
        tally[o.verdict.value] += 1
        if o.verdict == Verdict.refused:
            tally["by design" if o.by_design else "not yet"] += 1
    return tally


PASSING = (Verdict.passed, Verdict.disputed)


def in_scope_pass_fraction(outcomes: list[Outcome]) -> float:
    """Passed cases (against onnx's data or, disputed, onnxruntime's) over the cases not refused by design."""
    in_scope = [o for o in outcomes if not o.by_design]
    return sum(o.verdict in PASSING for o in in_scope) / len(in_scope) if in_scope else 1.0


def summary_line(label: str, outcomes: list[Outcome]) -> str:
    tally = counts(outcomes)
    total = len(outcomes)
    in_scope = total - tally["by design"]
    passing = tally[Verdict.passed.value] + tally[Verdict.disputed.value]
    fraction = f"{passing / in_scope:.1%}" if in_scope else "n/a"
    return (f"{label}: {total} cases: {tally['pass']} pass, {tally[Verdict.disputed.value]} pass against "
            f"onnxruntime (disputed), {tally['refused']} refused ({tally['by design']} out of scope by design, "
            f"{tally['not yet']} not yet supported), {tally['mismatch']} mismatch, {tally['crash']} crash; "
            f"{fraction} of the {in_scope} cases in scope pass")


def failure_table(outcomes: list[Outcome], limit: int | None = None) -> str:
    """Ops with failing cases (not yet supported, mismatch, crash), most cases first, with each op's first reason."""
    failing: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.verdict not in PASSING and not o.by_design:
            failing[o.op].append(o)
    rows = sorted(failing.items(), key=lambda item: (-len(item[1]), item[0]))[:limit]
    lines = [f"{'op':<28} {'cases':>5}  {'verdicts':<28} first reason"]
    for op, items in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(Counter(o.verdict.value for o in items).items()))
        reason = items[0].reason
        lines.append(f"{op:<28} {len(items):>5}  {verdicts:<28} {reason[:160]}")
    return "\n".join(lines)


def disputed_table(outcomes: list[Outcome]) -> str:
    """The cases passing against onnxruntime instead of onnx's data, each with why ('' when none ran)."""
    disputed = [o for o in outcomes if o.verdict == Verdict.disputed]
    if not disputed:
        return ""
    return "\n".join(["disputed: onnx's data and onnxruntime part ways; accelsim equals onnxruntime:"] +
                     [f"  {o.case} [{o.op}]: {DISPUTED[o.case]}" for o in disputed]) + "\n\n"


def report(outcomes: list[Outcome], limit: int | None = 40) -> str:
    import onnx

    stable = [o for o in outcomes if o.opset is not None and o.opset <= NEWEST_STABLE_OPSET]
    return "\n".join([
        summary_line(f"opsets <= {NEWEST_STABLE_OPSET}", stable),
        summary_line(f"all opsets (to {onnx.defs.onnx_opset_version()})", outcomes),
        "",
        disputed_table(outcomes) + failure_table(outcomes, limit),
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
        text += "".join(o.line() + "\n" for o in outcomes if o.verdict not in PASSING)
    return text, not any(o.verdict in (Verdict.mismatch, Verdict.crash) for o in outcomes)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", action="append", default=[], help="only the cases of this op (repeatable)")
    parser.add_argument("--list", action="store_true",
                        help="also print every case that does not pass, one a line (disputed cases are listed anyway)")
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
