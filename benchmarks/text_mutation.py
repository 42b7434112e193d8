"""Mutation by source text, for code mutmut cannot reach: mutmut 3 skips decorated functions, and every numba kernel
is decorated. One mutant at a time is written into a throwaway copy and the chosen tests run with the JIT off (the
kernels as plain Python: same arithmetic, no compile per mutant); a test failing, erroring or running past three
times the clean run's time kills it."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import tokenize
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SWAPS = {"+": "-", "-": "+", "*": "//", "//": "*", "/": "*", "%": "//", "<": "<=", "<=": "<", ">": ">=", ">=": ">",
         "==": "!=", "!=": "==", "+=": "-=", "-=": "+=", "*=": "//=", "and": "or", "or": "and", "True": "False",
         "False": "True", "break": "continue", "continue": "break", "not": ""}


def mutants(source: str) -> list[tuple[int, str, str]]:
    """(line, description, mutated source) for every operator, comparison, boolean and integer literal in an
    indented line (a function's body, as mutmut), outside decorators, imports, strings and comments."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        row, col = token.start
        if token.type not in (tokenize.OP, tokenize.NAME, tokenize.NUMBER):
            continue
        if not lines[row - 1][:1].isspace() or lines[row - 1].lstrip().startswith(("@", "import ", "from ")):
            continue
        if token.type == tokenize.NUMBER:
            if not token.string.isdigit():
                continue
            new = str(int(token.string) + 1)
        elif token.string in SWAPS:
            new = SWAPS[token.string]
        else:
            continue
        at = starts[row - 1] + col
        mutated = source[:at] + new + source[at + len(token.string):]
        try:
            compile(mutated, "<mutant>", "exec")
        except SyntaxError:
            continue
        found.append((row, f"col {col + 1}: {token.string!r} -> {new!r}", mutated))
    return found


def run_tests(copy: Path, tests: list[str], timeout: float | None) -> str:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p",
                               "no:randomly", *tests], cwd=copy, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if done.returncode == 0 else "killed"


def by_text(root: Path, scratch: Path, modules: list[str], tests: list[str], jobs: int,
            every: int = 1) -> tuple[int, int, int, list]:
    """Returns (killed, timed out, total, survivors as (module, line, change)); `every`: test one mutant in that
    many (a deterministic sample of a large module)."""
    copies = []
    for j in range(jobs):
        copy = scratch / f"copy{j}"
        subprocess.run(["git", "clone", "-q", str(root), str(copy)], check=True)
        copies.append(copy)
    t0 = time.perf_counter()
    if run_tests(copies[0], tests, None) != "survived":
        raise SystemExit(f"the tests fail before any mutation: {' '.join(tests)}")
    timeout = 3 * (time.perf_counter() - t0) + 10
    work = [(module, line, change, text) for module in modules
            for line, change, text in mutants((root / module).read_text())][::every]
    free = list(copies)

    def one(item):
        module, line, change, text = item
        copy = free.pop()
        target = copy / module
        original = target.read_text()
        try:
            target.write_text(text)
            return module, line, change, run_tests(copy, tests, timeout)
        finally:
            target.write_text(original)
            free.append(copy)

    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(one, work))
    killed = sum(r[3] == "killed" for r in results)
    timeouts = sum(r[3] == "timeout" for r in results)
    return killed, timeouts, len(results), [r[:3] for r in results if r[3] == "survived"]
