"""How close accelsim's GPU model is to published kernel times (validation/published/published.csv), this tree beside
an earlier revision: per suite MAPE, median, worst, Spearman and the geometric mean of measured / predicted.

The earlier revision is checked out into a temporary `git worktree` under /tmp (removed afterwards) and scores the
same rows (this tree's CSV, given to it by path) with its own model, kernels alone: `harness` (the host time a
source's timing adds, in dataset.yaml) is this tree's, so the kernels-alone columns compare like with like and the
last column is what `accelsim validate score validation/published` scores now.
Run: .venv/bin/python benchmarks/published_gpu.py [--before REV]   (REV: 5ce3d66, before the block scheduler)
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSV = ROOT / "validation" / "published" / "published.csv"
# Run inside a tree: every row's kernel seconds, predicted by that tree's model, as JSON on stdout.
# A tree older than the block-scaled keys prices `scaledgemm M N K BLOCK DTYPE` as the plain `gemm M N K DTYPE` it
# knew (and `scaledbgemm` as `bgemm`); one older than the `a100_80gb` preset predicts its rows on the `a100` it had.
PREDICT = """
import csv, json, sys
from accelsim.arch import load_arch
from accelsim.validate import cases
from compiler.errors import UserError

def arch(name):
    try:
        return load_arch(name)
    except UserError:
        if name != "a100_80gb":
            raise
        return load_arch("a100")

def case(key):
    try:
        return cases.parse(key)
    except UserError:
        words = key.split()
        if not words[0].startswith("scaled"):
            raise
        return cases.parse(" ".join([words[0][len("scaled"):], *words[1:-2], words[-1]]))
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
print(json.dumps({r["case"]: cases.predict(case(r["key"]), arch(r["arch"])) for r in rows}))
"""


def kernel_seconds(tree: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", PREDICT, str(CSV)], cwd=tree, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"predicting in {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def stats(pairs: list[tuple[str, float, float]]) -> dict:
    from accelsim.validate.score import metrics

    m = metrics([x for _, x, _ in pairs], [p for _, _, p in pairs], [c for c, _, _ in pairs])
    m["geomean"] = math.exp(sum(math.log(x / p) for _, x, p in pairs) / len(pairs))
    return m


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="5ce3d66", help="the revision to compare with (default: 5ce3d66)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from accelsim.validate import published_gpu

    rows = published_gpu.read(CSV)
    host = published_gpu.harness(CSV.parent / "dataset.yaml")
    with tempfile.TemporaryDirectory(prefix="accelsim-before-") as tmp:
        folder = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(folder), args.before],
                       check=True)
        try:
            before = kernel_seconds(folder)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=True)
    now = {p.row.case: p for p in published_gpu.predictions(CSV)}
    print(f"{len(rows)} published rows; before = {args.before}, kernels alone; now with each suite's harness last")
    print(f"{'suite':<22} {'n':>3}  {'before: MAPE  median  rho  meas/pred':>38}"
          f"  {'now: MAPE  median  rho  meas/pred':>35}"
          f"  {'now + harness: MAPE  meas/pred':>31}")
    for suite in dict.fromkeys(r.suite for r in rows):
        mine = [r for r in rows if r.suite == suite]
        b = stats([(r.case, r.measured_s, before[r.case]) for r in mine])
        k = stats([(r.case, r.measured_s, now[r.case].kernel_s) for r in mine])
        h = stats([(r.case, r.measured_s, now[r.case].seconds) for r in mine])
        print(f"{suite:<22} {len(mine):>3}  {b['mape']:>14.1%} {b['median']:>7.1%} {b['spearman']:>5.3f}"
              f" {b['geomean']:>9.3f}"
              f"  {k['mape']:>11.1%} {k['median']:>7.1%} {k['spearman']:>5.3f} {k['geomean']:>9.3f}"
              f"  {h['mape']:>20.1%} {h['geomean']:>10.3f}"
              f"  {'(harness ' + format(host[suite] * 1e6, 'g') + ' us)' if suite in host else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
