"""The CI guard: every committed dataset under validation/ is predicted again by the current model and must still meet
its targets (a change that makes accelsim less accurate on measured hardware fails here)."""
from pathlib import Path

import pytest

from accelsim.validate.score import score

ROOT = Path(__file__).resolve().parents[3]
DATASETS = sorted(path.parent for path in (ROOT / "validation").glob("**/dataset.yaml"))


@pytest.mark.parametrize("folder", DATASETS or [pytest.param(None, marks=pytest.mark.skip(
    reason="no dataset under validation/ yet (validation/<target>/<name>/dataset.yaml)"))],
    ids=[str(d.relative_to(ROOT / "validation")) for d in DATASETS] or ["none"])
def test_dataset_meets_its_targets(folder):
    # validation/published holds two CSVs: its workloads.csv (whole models, about a minute each time) is scored on
    # a sample by tests/accelsim/validate/test_published_workloads.py, its kernel times here
    target = folder / "published.csv" if (folder / "workloads.csv").is_file() else folder
    [result] = score([target], repredict=True)
    assert result.suites, f"{folder}: no suites scored"
    misses = result.misses
    assert not misses, "targets missed with the current model:\n" + "\n".join(m.text() for m in misses)
