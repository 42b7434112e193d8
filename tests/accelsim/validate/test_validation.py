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
    [result] = score([folder], repredict=True)
    assert result.suites, f"{folder}: no suites scored"
    misses = result.misses
    assert not misses, "targets missed with the current model:\n" + "\n".join(m.text() for m in misses)
