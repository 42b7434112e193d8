"""Progress counts the whole sweep, not the batch in hand, and a sweep that will take hours says so early."""
import io

from accelsim.sweep import progress
from accelsim.sweep.progress import Progress
from accelsim.sweep.strategies import GRID_BATCH, Adaptive, Grid, RandomSample


def test_strategies_say_how_many_points_they_plan():
    assert Grid((100, 100, 100)).planned == 10**6 > GRID_BATCH
    assert RandomSample((10, 10), 7, seed=1).planned == 7
    assert Adaptive((10, 10), seed=1, budget=30).planned == 30


def test_a_million_point_sweep_counts_a_million_rows_and_warns_when_long(monkeypatch):
    clock = iter(range(0, 10**6, 5))                   # each call: 5 s later
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    bar = Progress("sweep big.yaml", stream=out, planned=10**6)
    bar.add(GRID_BATCH, 0)
    for _ in range(5):
        bar.advance({"status": "ok"})
    text = out.getvalue()
    assert "/1000000 rows" in text and f"/{GRID_BATCH} rows" not in text
    assert "rows to go will take about" in text and " h " in text.split("will take about", 1)[1].split(";")[0]
    assert text.count("will take about") == 1


def test_a_short_sweep_does_not_warn(monkeypatch):
    clock = iter(range(0, 10**6))
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    bar = Progress("sweep small.yaml", stream=out, planned=20)
    bar.add(20, 0)
    for _ in range(20):
        bar.advance({"status": "ok"})
    assert "will take about" not in out.getvalue() and "20/20 rows (100%)" in out.getvalue()
