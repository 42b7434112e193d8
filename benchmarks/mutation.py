"""Mutation testing of chosen modules against chosen tests, in a throwaway copy of the checkout (mutmut 3 writes a
mutants/ folder beside the code): prints mutants killed, survived and the score. The checkout is never touched.

Run: .venv/bin/pip install mutmut
     .venv/bin/python benchmarks/mutation.py accelsim/price/roofline.py accelsim/price/energy.py \\
         --tests tests/accelsim/price/test_roofline.py
(2026-12: 207 of 233 roofline and energy mutants killed, 89%; 189, 81%, with the tests before they were sharpened.)

mutmut skips decorated functions, so the numba kernels go through --by-text (benchmarks/text_mutation.py): no mutmut
needed, one mutant at a time with the JIT off, survivors listed by line:
     .venv/bin/python benchmarks/mutation.py --by-text accelsim/engine/tile/stalls.py accelsim/engine/tile/schedule.py \
         --tests tests/accelsim/engine
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from text_mutation import by_text

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="+", help="source files to mutate, relative to the checkout")
    parser.add_argument("--tests", nargs="+", required=True, help="test files that should kill the mutants")
    parser.add_argument("--by-text", action="store_true", help="mutate the source text (numba kernels) without mutmut")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (--by-text)")
    parser.add_argument("--every", type=int, default=1, help="test one mutant in this many (--by-text; a sample)")
    args = parser.parse_args()
    if args.by_text:
        with tempfile.TemporaryDirectory(prefix="accelsim-mutation-") as scratch:
            killed, timeouts, total, survivors = by_text(ROOT, Path(scratch), args.modules, args.tests, args.jobs,
                                                         args.every)
        for module, line, change in survivors:
            print(f"survived  {module}:{line}  {change}")
        print(f"{', '.join(args.modules)}: {killed + timeouts} of {total} mutants killed "
              f"({(killed + timeouts) / total:.0%}), {len(survivors)} survived, {timeouts} timed out")
        return 0
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        print("mutmut is not installed: .venv/bin/pip install mutmut", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="accelsim-mutation-") as scratch:
        copy = Path(scratch) / "accelsim"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(copy)], check=True)
        config = (f"\n[tool.mutmut]\npaths_to_mutate = {args.modules!r}\ntests_dir = {args.tests!r}\n"
                  f"also_copy = ['archs', 'compiler', 'accelsim', 'tests']\n").replace("'", '"')
        with (copy / "pyproject.toml").open("a") as file:
            file.write(config)
        done = subprocess.run([str(mutmut), "run"], cwd=copy, capture_output=True, text=True)
        counts = re.findall(r"(\d+)/(\d+)\s+\S+ (\d+) \S+ (\d+)\s+\S+ (\d+)\s+\S+ (\d+)\s+\S+ (\d+)",
                            done.stdout.replace("\r", "\n"))
        if not counts:
            print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
            return 1
        _, total, killed, _, timeouts, _, survived = map(int, counts[-1])
        listed = subprocess.run([str(mutmut), "results"], cwd=copy, capture_output=True, text=True).stdout
        for line in listed.splitlines():
            if line.strip().endswith(": survived"):
                print(f"survived  {line.strip().removesuffix(': survived')}")
        shutil.rmtree(copy / "mutants", ignore_errors=True)
    print(f"{', '.join(args.modules)}: {killed} of {total} mutants killed ({killed / total:.0%}), {survived} "
          f"survived, {timeouts} timed out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
