"""The planner's limits: its space comes from prime factors (a batch of 10^18 is 361 divisors, not 10^18 trials), a
budget keeps every split of the devices, a time limit answers with the best plans priced so far and says how many it
skipped, --workers never exceeds the CPUs this process may use, and progress goes to stderr."""
import io
import itertools
import json

import pytest

import accelsim.parallel.search as search_module
import accelsim.parallel.space as space_module
from accelsim.cli import main
from accelsim.parallel.search import Question, PlanPool, search
from accelsim.parallel.space import candidates, divisors, factors
from accelsim.parallel.progress import SearchProgress
from accelsim.arch.system_load import load_system
from accelsim.results.plans import Scored

TINY = dict(layers=4, hidden=64, heads=4, seq=64, vocab=512)
NARROW = dict(recompute=("none", "full"), zero=(0, 3))


def test_divisors_are_those_of_trial_division_and_come_from_the_prime_factors():
    assert all(divisors(n) == [d for d in range(1, n + 1) if n % d == 0] for n in range(1, 2000))
    assert factors(720720) == {2: 4, 3: 2, 5: 1, 7: 1, 11: 1, 13: 1}
    mersenne = (2**31 - 1) * (2**61 - 1)           # two large primes: trial division to its root is 10^14 steps
    assert divisors(mersenne) == [1, 2**31 - 1, 2**61 - 1, mersenne]
    assert len(divisors(10**18)) == 19 * 19


def test_a_batch_of_10_to_the_18_enumerates_its_divisors_not_its_range(monkeypatch):
    """It hung in a range(1, batch + 1) loop. Inference on 8 devices of a 2-block model: tp in 1, 2, 4, 8 and pp in
    1, 2 (dividing the blocks); each split has one candidate per micro-batch count, i.e. per divisor of
    10^18 / dp = 2^(18 - a) 5^18 for dp = 2^a, of which there are (19 - a) x 19."""
    monkeypatch.setattr(space_module, "MAX_MICROBATCHES", 10**18)
    space = candidates(8, 10**18, 2, training=False)
    expected = sum((19 - (8 // (tp * pp)).bit_length() + 1) * 19 for tp in (1, 2, 4, 8) for pp in (1, 2)
                   if tp * pp <= 8)
    assert len(space) == expected == 2356
    assert all(c.micro(10**18) * c.plan.microbatches * c.plan.dp == 10**18 for c in space)


def test_micro_batch_counts_stop_at_the_most_a_schedule_is_priced_for():
    """A schedule is priced pass by pass: 5 x 10^8 micro-batches on 2 stages never finished. Counts above 4,096 are
    left out: of 10^9 / dp = 2^(9 - log2 dp) x 5^9, the divisors 2^a 5^b up to 4,096, for each of the 7 splits."""
    space = candidates(8, 10**9, 2, training=False)

    def kept(dp: int) -> set[int]:
        return {2**a * 5**b for a in range(10 - dp.bit_length() + 1) for b in range(10) if 2**a * 5**b <= 4096}
    splits = [(tp, pp, 8 // (tp * pp)) for tp in (1, 2, 4, 8) for pp in (1, 2) if tp * pp <= 8]
    for tp, pp, dp in splits:
        assert {c.plan.microbatches for c in space if (c.plan.tp, c.plan.pp) == (tp, pp)} == kept(dp)
    assert len(space) == sum(len(kept(dp)) for _, _, dp in splits) and max(c.plan.microbatches for c in space) == 4000


def test_a_budget_keeps_every_split_with_its_fewest_micro_batches():
    whole = candidates(8, 720720, 4, training=True)
    some = candidates(8, 720720, 4, training=True, limit=500)
    assert len(some) == 500 < len(whole) and {c.text for c in some} <= {c.text for c in whole}
    assert {(c.plan.dp, c.plan.tp, c.plan.pp) for c in some} == {(c.plan.dp, c.plan.tp, c.plan.pp) for c in whole}
    for split, kept in itertools.groupby(sorted(some, key=_split), key=_split):
        counts = sorted({c.plan.microbatches for c in kept})
        every = sorted({c.plan.microbatches for c in whole if _split(c) == split})
        assert counts == every[:len(counts)]          # the fewest micro-batch counts, none skipped between
    assert [c.text for c in some] == sorted(c.text for c in some)


def _split(c) -> tuple:
    return c.plan.dp, c.plan.tp, c.plan.pp


class Clock:
    """time.time() that moves on one second at every call: the time limit falls after as many checks, the same on
    every machine."""

    def __init__(self, real):
        self.now, self.real = 0.0, real

    def time(self) -> float:
        self.now += 1.0
        return self.now

    def perf_counter(self) -> float:
        return self.real.perf_counter()


@pytest.fixture(scope="module")
def unlimited():
    return search("gpt2", "dgx_a100", devices=4, batch=4, optimizer="adamw", workers=1, **NARROW, **TINY)


@pytest.mark.parametrize("limit", [60, 100])
def test_a_time_limit_answers_with_the_best_priced_so_far_and_says_so(monkeypatch, unlimited, limit):
    """46 candidates: the limit falls while their lower bounds are worked out (60 checks: the first round of
    simulations still runs, so there is an answer) or after the first round (100)."""
    monkeypatch.setattr(search_module, "time", Clock(search_module.time))
    cut = search("gpt2", "dgx_a100", devices=4, batch=4, optimizer="adamw", workers=1, time_limit=limit, **NARROW,
                 **TINY)
    assert cut.skipped > 0 and cut.ranked and f"time limit of {limit} s was reached" in cut.cut_short
    assert len(cut.ranked) + len(cut.pruned) + len(cut.discarded) + cut.skipped == cut.candidates
    truth = {s.text: s.seconds for s in unlimited.ranked}
    assert all(s.seconds == truth[s.text] for s in cut.ranked)     # what it priced, it priced right
    assert cut.best.seconds >= unlimited.best.seconds
    table = cut.table()
    assert f"search cut short: the time limit of {limit} s was reached" in table
    assert f"{cut.candidates - cut.skipped} of {cut.candidates} candidates priced, {cut.skipped} skipped" in table
    out = cut.to_dict()
    assert out["skipped"] == cut.skipped and "time limit" in out["cut_short"]
    assert unlimited.to_dict()["cut_short"] is None and unlimited.skipped == 0


def test_a_time_limit_that_passes_before_anything_is_priced_is_still_an_answer(monkeypatch):
    monkeypatch.setattr(search_module, "time", Clock(search_module.time))
    cut = search("gpt2", "dgx_a100", devices=4, batch=4, optimizer="adamw", workers=1, time_limit=1, **NARROW, **TINY)
    assert cut.skipped == cut.candidates and not cut.ranked
    assert "no plan was priced before the search was cut short" in cut.table()


def test_workers_are_capped_by_the_cpus_this_process_may_use(monkeypatch):
    monkeypatch.setattr(search_module, "usable_cpus", lambda: 1)
    question = Question("gpt2", tuple(sorted(TINY.items())), load_system("dgx_a100"), 8, 8, True, "bf16", "sgd",
                        "tile", 4)
    space = candidates(8, 8, 4, training=True)
    assert len({c.plan.tp for c in space}) == 4
    with PlanPool(question, space, 1000) as pool:
        assert pool.workers == 1 and pool._pool is None
        assert pool.notes == ["--workers 1000: capped at the 1 CPU this process may use"]
    with PlanPool(question, space, None) as pool:           # the default, as well: no note, as it was not asked
        assert pool.workers == 1 and pool.notes == []


def test_progress_counts_settled_candidates_and_names_the_best_so_far(monkeypatch):
    monkeypatch.setattr("accelsim.parallel.progress.QUIET_S", 0.0)
    stream = io.StringIO()
    bar = SearchProgress("plan gpt2", 4, True)
    bar.stream = stream
    fast = Scored({}, "dp=2,tp=1,pp=1", 0.5, 0.1, {"peak": 1}, "compute-bound")
    bar.settle([fast, None, None, None])
    bar.settle([fast, None, None, None], {1: Scored({}, "dp=1,tp=2,pp=1", 0.25, 0.1, {"peak": 1}, "x")}, 2)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("plan gpt2: 1/4 candidates settled (25%)") and "best so far 500 ms" in lines[0]
    assert lines[-1].startswith("plan gpt2: 4/4 candidates settled (100%)") and "(dp=1,tp=2,pp=1)" in lines[-1]
    quiet = SearchProgress("plan gpt2", 4, False)
    quiet.stream = io.StringIO()
    quiet.settle([fast])
    quiet.close()
    assert quiet.stream.getvalue() == ""


PLAN = ["plan", "gpt2", "--system", "dgx_a100", "--devices", "2", "--batch", "2", "--train", "--opt", "layers=2",
        "--opt", "hidden=64", "--opt", "heads=4", "--seq", "32", "--opt", "vocab=256", "--recompute", "none",
        "--zero", "0"]


@pytest.mark.parametrize("argv, message", [
    (["--time-limit", "-1"], "--time-limit -1: must be a number of seconds, at least 0"),
    (["--time-limit", "nan"], "--time-limit nan"),
    (["--budget", "0"], "--budget 0: must be a positive integer"),
])
def test_plan_refuses_a_bad_limit(argv, message, capsys):
    assert main([*PLAN, *argv]) == 2 and message in capsys.readouterr().err


def test_plan_json_on_stdout_is_quiet_on_stderr_and_counts_nothing_skipped(capsys):
    assert main([*PLAN, "--json", "-", "--time-limit", "0"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["skipped"] == 0 and out["cut_short"] is None and "candidates settled" not in captured.err


def test_a_tensor_split_that_cannot_be_made_is_found_once_not_per_plan(monkeypatch):
    """720,720 devices: 14,063 of 14,094 inference plans split the heads some impossible way, and each one loaded and
    partitioned the model again to say so (most of two minutes). A tp that does not divide the 4 heads is now found
    once, and none of its plans is simulated."""
    simulated = []
    real = search_module._simulate
    monkeypatch.setattr(search_module, "_simulate", lambda q, c: simulated.append(c.plan.tp) or real(q, c))
    found = search("gpt2", "dgx_a100", devices=8, batch=8, training=False, workers=1, fidelity="roofline",
                   **{**TINY, "layers": 2})
    invalid = [d for d in found.discarded if d.kind == "invalid"]
    assert {d.plan["tp"] for d in invalid} == {8} and 8 not in simulated and set(simulated) == {1, 2, 4}
    assert all("tensor degree 8 does not divide the 4 heads" in d.reason for d in invalid)
    assert len(found.ranked) + len(found.discarded) == found.candidates
