"""Pipeline schedules against their closed forms: uniform stages take (m + p - 1)(F + B) with GPipe and 1F1B, and
the interleaved schedule shrinks the bubble by its number of chunks (Narayanan et al. 2021, sec. 2.2)."""
import pytest

from accelsim.parallel.schedule import order, run_schedule


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("pp, m", [(4, 8), (2, 1), (8, 32), (1, 5)])
def test_uniform_stages_take_the_closed_form(schedule, pp, m):
    t = run_schedule([1.0] * pp, [2.0] * pp, [0.0] * (pp - 1), schedule, m)
    assert t.seconds == pytest.approx((m + pp - 1) * 3.0)
    assert all(b == pytest.approx(3 * m) for b in t.busy)
    assert t.bubble(0) == pytest.approx((pp - 1) * 3.0)


@pytest.mark.parametrize("pp, m, v", [(4, 8, 2), (4, 16, 4), (2, 4, 2)])
def test_the_interleaved_bubble_is_divided_by_the_chunks(pp, m, v):
    t = run_schedule([1.0 / v] * (pp * v), [2.0 / v] * (pp * v), [0.0] * (pp * v - 1), "interleaved", m, v)
    assert t.seconds == pytest.approx(3.0 * m + 3.0 * (pp - 1) / v)


def test_hops_delay_gpipe_at_its_ends_and_1f1b_at_every_micro_batch():
    """GPipe's passes queue behind each other, so only the fill and the drain wait on the 2 x 3 hops. 1F1B has no
    slack: stage 0's backward of micro-batch i waits on i's round trip, so each micro-batch pays two hops."""
    base = run_schedule([1.0] * 4, [2.0] * 4, [0.0] * 3, "gpipe", 8).seconds
    assert run_schedule([1.0] * 4, [2.0] * 4, [0.25] * 3, "gpipe", 8).seconds == pytest.approx(base + 2 * 3 * 0.25)
    assert run_schedule([1.0] * 4, [2.0] * 4, [0.25] * 3, "1f1b", 8).seconds == pytest.approx(base + 2 * 8 * 0.25)


def test_the_slowest_stage_sets_the_pace():
    t = run_schedule([1.0, 1.0, 2.0, 1.0], [2.0, 2.0, 4.0, 2.0], [0.0] * 3, "1f1b", 16)
    assert t.seconds >= 16 * 6.0 and t.bubble(2) < t.bubble(0)


def test_1f1b_keeps_at_most_pp_minus_stage_forwards_in_flight():
    """What bounds its activation memory (GPipe holds all m)."""
    pp, m = 4, 8
    for s, plan in enumerate(order("1f1b", pp, m)):
        live = peak = 0
        for kind, _, _ in plan:
            live += 1 if kind == "F" else -1
            peak = max(peak, live)
        assert peak == pp - s
    assert all(sum(k == "F" for k, _, _ in plan[:m]) == m for plan in order("gpipe", pp, m))
