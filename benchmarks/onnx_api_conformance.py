"""onnx's node conformance cases two ways: the in-repo harness (compiler.conformance: the frontend and the reference
interpreter) and the public API as a user calls it (accelsim.validate.onnx_api: the model written to an .onnx file,
accelsim.evaluate fed the case's inputs as onnx ships them), with each one's counts, and every case whose verdict
differs between them (none, when the API takes what the harness takes).

Measured on the project's 2-core machine (onnx 1.23, opsets to 28): 1,808 cases in scope; the harness passes 1,731
(1,727 against onnx's data, 4 disputed against onnxruntime; 95.7%) in about 7 s, the API the same 1,731 in about
14 s. Before the API bound shape inputs from its inputs and took ml_dtypes arrays, it passed about 1,444 (79.9%):
bfloat16, float8 and int4 inputs were refused ("input 'x' is bfloat16, the model expects bf16 (stored as
float32)"), and so was every shape, size or k given as a graph input.
Run: .venv/bin/python benchmarks/onnx_api_conformance.py [--op Resize ...] [--list]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelsim.validate.onnx_api import run_all_api  # noqa: E402
from compiler.conformance import PASSING, node_cases, run_all, summary_line, tested_ops  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", action="append", default=[], help="only the cases of this op (repeatable)")
    parser.add_argument("--list", action="store_true", help="also list the cases neither way passes")
    args = parser.parse_args(argv)
    cases = node_cases()
    if args.op:
        tested = tested_ops(cases)
        cases = [c for c in cases if tested[c.name] in args.op]
    start = time.perf_counter()
    harness = run_all(cases)
    middle = time.perf_counter()
    api = run_all_api(cases)
    end = time.perf_counter()
    print(summary_line("harness", harness) + f" ({middle - start:.1f} s)")
    print(summary_line("public API", api) + f" ({end - middle:.1f} s)")
    by_case = {o.case: o for o in harness}
    differ = [o for o in api if (o.verdict in PASSING) != (by_case[o.case].verdict in PASSING)]
    print(f"{len(differ)} cases pass one way only")
    for o in differ:
        print(f"  {o.line()} (harness: {by_case[o.case].verdict.value})")
    if args.list:
        for o in api:
            if o.verdict not in PASSING and not o.by_design:
                print(f"  neither: {o.line()}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
