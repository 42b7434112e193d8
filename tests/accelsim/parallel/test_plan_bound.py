"""The planner's branch and bound (accelsim.parallel.bound): the plans it leaves unsimulated change nothing it shows.
Against an exhaustive search of the same space, the best plans and the Pareto front are the same, in the same order,
every pruned plan's lower bound is at most its simulated step time, and each pruned plan is truly behind the best and
dominated; on made-up plans, a plan is pruned exactly when the rule says."""
from dataclasses import dataclass

import pytest

from accelsim.parallel.bound import ahead, needed, rounds
from accelsim.parallel.search import search

TINY = dict(layers=4, hidden=64, heads=4, seq=64, vocab=512)
SPACE = dict(devices=4, batch=8, optimizer="adamw", recompute=("none", "full"), zero=(0, 3), top=2, workers=1)


@pytest.fixture(scope="module")
def both():
    return search("gpt2", "dgx_a100", **SPACE, **TINY), search("gpt2", "dgx_a100", exhaustive=True, **SPACE, **TINY)


def test_pruning_shows_what_an_exhaustive_search_shows(both):
    pruned, every = both
    assert pruned.pruned and not every.pruned
    assert len(pruned.ranked) + len(pruned.pruned) == len(every.ranked)
    assert [(s.text, s.seconds, s.pareto, s.memory) for s in pruned.shown] == \
        [(s.text, s.seconds, s.pareto, s.memory) for s in every.shown]
    assert [d.text for d in pruned.discarded] == [d.text for d in every.discarded]
    assert pruned.table().splitlines()[2:] == every.table().splitlines()[2:]      # the first line counts them


def test_every_pruned_plan_is_bounded_below_and_dominated(both):
    pruned, every = both
    simulated = {s.text: s for s in every.ranked}
    for p in pruned.pruned:
        truth = simulated[p.text]
        assert p.at_least <= truth.seconds and p.memory["peak"] == truth.memory["peak"]
        faster = [s for s in pruned.ranked if s.seconds < p.at_least]
        assert len(faster) >= pruned.top and any(s.memory["peak"] <= p.memory["peak"] for s in faster)
        assert not truth.pareto and every.ranked.index(truth) >= pruned.top


@dataclass(frozen=True)
class Plan:
    seconds: float
    memory: dict


def test_a_plan_is_needed_until_top_faster_ones_and_a_smaller_faster_one_are_known():
    fast_small, fast_big = Plan(1.0, {"peak": 10}), Plan(2.0, {"peak": 50})
    assert needed(3.0, 20, [fast_small], top=2)                     # only one faster plan: it may be second
    assert not needed(3.0, 20, [fast_small, fast_big], top=2)       # two faster, and one of them no larger
    assert needed(3.0, 5, [fast_small, fast_big], top=2)            # smaller than every faster plan: on the front
    assert needed(2.0, 80, [fast_small, fast_big], top=2)           # a tie in time is not faster


def test_rounds_simulate_the_lowest_bounds_first_and_stop_when_nothing_is_needed():
    lower = {0: 1.0, 1: 5.0, 2: 2.0, 3: 9.0, 4: 9.5, 5: 9.6}
    peak = {0: 10, 1: 10, 2: 30, 3: 40, 4: 5, 5: 50}
    truth = {i: Plan(lower[i] * 1.1, {"peak": peak[i]}) for i in lower}
    asked = []

    def run(indices):
        asked.append(indices)
        return {i: truth[i] for i in indices}
    scored, left = rounds(list(lower), lower, peak, top=2, workers=1, program=lambda i: i, run=run)
    assert asked == [[0, 2, 1, 3], [4]]          # the lowest bounds first; then plan 4, the smallest: on the front
    assert left == [5] and set(scored) == {0, 1, 2, 3, 4}   # plan 5: behind plans 0 and 2, and larger than plan 0
    again, _ = rounds(list(lower), lower, peak, top=1, workers=1, program=lambda i: 0, run=lambda ix: {
        i: truth[i] for i in ix})
    assert set(again) == set(lower)                          # plans sharing their programs go together


def test_ahead_is_the_next_round_as_far_as_the_plans_simulated_so_far_tell():
    lower = {0: 1.0, 1: 5.0, 2: 2.0, 3: 9.0, 4: 9.5, 5: 9.6}         # as above: rounds asks [0, 2, 1, 3], then [4]
    peak = {0: 10, 1: 10, 2: 30, 3: 40, 4: 5, 5: 50}
    truth = {i: Plan(lower[i] * 1.1, {"peak": peak[i]}) for i in lower}
    order = sorted(lower, key=lambda i: (lower[i], i))

    def next_round(scored, busy):
        return ahead(order, lower, peak, scored, busy, top=2, workers=1, program=lambda i: i)
    assert next_round({}, {0, 2, 1, 3}) == [4, 5]                      # nothing known yet: both may be needed
    assert next_round({0: truth[0], 2: truth[2]}, {1, 3}) == [4]       # plan 5 is behind 0 and 2, and larger than 0
    assert next_round({i: truth[i] for i in range(5)}, set()) == []    # the last round is done: nothing ahead
    assert ahead(order, lower, peak, {}, set(), top=2, workers=1, program=lambda i: i % 2) == [0, 2, 1, 3, 4, 5]
