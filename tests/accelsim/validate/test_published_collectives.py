"""Published collective measurements (validation/collectives/published.csv: nccl-tests tables from NVIDIA,
Microsoft and others, 66 rows) predicted again by accelsim.comm, scored on nccl-tests' bus bandwidth.

Measured when the dataset was made (validation/collectives/README.md has the table): collective_intranode (53
rows, 8 B to 16 GiB, 4-8 GPUs on one NVSwitch) MAPE 25.8%, median 8.8%, Spearman 0.988; collective_internode
(12 rows, 16 and 32 GPUs) MAPE 22.3%, median 12.3%, Spearman 1.000; the 34 rows of 1 GiB and more
(bandwidth-bound) MAPE 3.3%, the 32 smaller ones 47.7%. Before NVLS's switch-side rate, its start-up, the
library's algorithm list and NCCL's protocols were modelled, the same rows scored 94.3% and 101.3% (1 GiB and
more: 32.0%). The project aims at 10%: what is left is mostly the A100 rows
between 32 KiB and 128 MiB, measured with nccl-tests -g 8 (one thread launching on all 8 GPUs), which take 2-3x
the time accelsim predicts (the MPI-launched NDmv4 1 KiB rows and the DGX H100 sweep do not), and the bandwidth
ramp between 16 MiB and 512 MiB that NCCL's own tuner does not model either.

The targets live in validation/collectives/dataset.yaml (also read by `accelsim validate score`); a model change
that loses accuracy misses them. Run this file directly to print the per-row table.
"""
from __future__ import annotations

import math
import shutil

import pytest

from accelsim.arch.system_load import load_system, system_names
from accelsim.cli import main
from accelsim.comm import OPS
from accelsim.validate import collectives
from accelsim.validate.score import metrics, score

LARGE = 1 << 30            # rows of at least 1 GiB: bandwidth-bound
LARGE_MAPE = 0.05          # measured 3.3%
TUNER_AGREES = 12          # of the 13 rows whose source names the algorithm NCCL chose by itself


@pytest.fixture(scope="module")
def found() -> list[collectives.Prediction]:
    return collectives.predictions()


def test_the_data_is_well_formed():
    rows = collectives.read()
    assert len(rows) >= 30
    assert len({r.case for r in rows}) == len(rows), "case names repeat"
    assert {r.suite for r in rows} == {"collective_intranode", "collective_internode", "collective_tpu"}
    for r in rows:
        assert r.system in system_names() and r.op in OPS, r.case
        slice_ = load_system(r.system).fit(r.devices)
        crosses = len(slice_.active) > 1
        assert crosses == (r.suite == "collective_internode") or r.suite == "collective_tpu", r.case
        assert r.busbw > 0 and r.size > 0
        if r.time_us is not None and r.busbw_GBps:      # a printed busbw agrees with the printed time
            assert r.busbw / 1e9 == pytest.approx(r.busbw_GBps, rel=0.01, abs=0.01), r.case


def test_every_suite_meets_its_target():
    [result] = score([collectives.DATA])
    lines = [f"{s.suite}: MAPE {s.metrics['mape']:.1%}, median {s.metrics['median']:.1%}, worst "
             f"{s.metrics['worst']:.1%} ({s.metrics['worst_case']}), Spearman {s.metrics['spearman']:.3f}"
             for s in result.suites]
    print("\n".join(lines))
    assert {s.suite for s in result.suites if not s.target.report_only} == \
        {"collective_intranode", "collective_internode"}, "a scored suite has lost its target"
    assert not result.misses, "; ".join(m.text() for m in result.misses)


def test_bandwidth_bound_rows_are_close(found):
    """At 1 GiB and more the model is link rates and efficiencies: every row within 20%, their MAPE within
    LARGE_MAPE."""
    large = [p for p in found if p.row.size >= LARGE]
    m = metrics([p.row.busbw for p in large], [p.busbw for p in large], [p.row.case for p in large])
    print(f"{m['count']} rows of 1 GiB or more: MAPE {m['mape']:.1%}, worst {m['worst']:.1%} ({m['worst_case']})")
    assert m["mape"] <= LARGE_MAPE
    assert m["worst"] <= 0.20


def test_the_tuner_mostly_picks_what_nccl_picked(found):
    judged = [p for p in found if p.agrees is not None]
    assert len(judged) == 13
    assert sum(p.agrees for p in judged) >= TUNER_AGREES, [p.row.case for p in judged if not p.agrees]


def test_the_model_does_not_hide_in_the_median(found):
    """The suites' MAPE is a mean: the rows the model gets right must be most of them (median under 15%), and
    no row may be off by more than a factor of 4."""
    for suite in ("collective_intranode", "collective_internode"):
        errors = sorted(p.error for p in found if p.row.suite == suite)
        assert errors[len(errors) // 2] <= 0.15, suite
    assert all(1 / 4 <= p.busbw / p.row.busbw <= 4 for p in found), \
        [p.row.case for p in found if not 1 / 4 <= p.busbw / p.row.busbw <= 4]


def test_validate_score_takes_the_folder(tmp_path, capsys):
    """`accelsim validate score validation/collectives` prints the suites and passes; the same rows held to a
    target the model cannot reach exit 1 with a MISS line."""
    assert main(["validate", "score", str(collectives.DATA)]) == 0
    out = capsys.readouterr().out
    assert "collective_intranode" in out and "PASS" in out and "MISS" not in out
    strict = tmp_path / "strict"
    strict.mkdir()
    shutil.copy(collectives.DATA / "published.csv", strict / "published.csv")
    (strict / "dataset.yaml").write_text("targets:\n  collective_internode: {mape: 0.01}\n")
    assert main(["validate", "score", str(strict)]) == 1
    assert "MISS" in capsys.readouterr().out


if __name__ == "__main__":
    table = collectives.predictions()
    print(collectives.table(table))
    print(f"geometric-mean ratio {math.exp(sum(math.log(p.busbw / p.row.busbw) for p in table) / len(table)):.2f}")
