"""`search`: the planner, a search over parallel plans that, like the mapper, sees only a report function.

The space: dp x tp x pp = the devices, the micro-batch count (a whole micro-batch), and for training the pipeline
schedule (1F1B; interleaved with 2 chunks where the blocks divide), recomputation (none, selective, full) and the
ZeRO stage (0-3, with dp above 1). A plan whose weights and optimizer state alone, from the model's own sizes, exceed a
device is discarded unsimulated; the rest are priced by `report` (accelsim.parallel.blocks for a model of identical
blocks, whose memory is known before it simulates; train_parallel or run_parallel otherwise), in a process pool.
Plans that fit but cannot be among the best or on the Pareto front are left unsimulated (accelsim.parallel.bound).
A time limit and a budget bound the work (accelsim.parallel.space): past the limit nothing more is priced, and the
answer is the best of what was, saying it was cut short. Progress goes to stderr (accelsim.parallel.progress).
Invariant: every candidate is scored, pruned with its lower bound, discarded with its reason, or (cut short) skipped,
and the same question gives the same answer in the same order (ties between plans broken by their text), whatever
the pool does.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, replace

from accelsim.arch.system import System
from accelsim.arch.system_load import load_system
from accelsim.collector import COLLECT_AFTER, paused
from accelsim.results.parallel import CATEGORIES
from accelsim.results.plans import Discarded, PlanSearch, Pruned, Scored, pareto
from accelsim.parallel.blocks import Blocks, Setting, block_count
from accelsim.parallel.bound import ahead, needed, rounds
from accelsim.parallel.bottleneck import bottleneck
from accelsim.parallel.plan import SEARCH_BUDGET as BUDGET, Plan
from accelsim.parallel.progress import SearchProgress
from accelsim.parallel.space import MAX_MICROBATCHES, ZERO, Candidate, candidates
from accelsim.parallel.rank import partition
from accelsim.parallel.workers import Workers
from accelsim.sim.memory import at_dtypes, dtypes
from accelsim.sim.model import load_model
from accelsim.sim.train import STORED, compute_dtype, is_zoo_model, training_form
from compiler.dtypes import DType
from compiler.errors import ModelError, UserError
from compiler.memo import Memo
from compiler.parallel.pipeline import blocks
from compiler.compile import Options, compile_graph
from compiler.train import Optimizer, training_graph
from compiler.train.recompute import MODES

MAX_WORKERS = 8
POOL_FROM = 48                 # candidates to simulate before a process pool pays for starting its workers
GIB = 2**30


@dataclass(frozen=True)
class Question:
    """What is asked, as every worker needs it."""

    model: str
    options: tuple             # the model's options as sorted (key, value) pairs
    system: System
    devices: int
    batch: int
    training: bool
    compute: str
    optimizer: str
    fidelity: str
    blocks: int | None         # identical blocks, when accelsim.parallel.blocks prices the model's stages


def search(model: str, system: str | os.PathLike | System, *, devices: int | None = None, batch: int,
           training: bool = True, optimizer: str = "sgd", dtype: str | None = None, top: int = 10,
           workers: int | None = None, fidelity: str = "tile", recompute: tuple[str, ...] = MODES,
           zero: tuple[int, ...] = ZERO, exhaustive: bool = False, time_limit: float | None = None,
           budget: int | None = BUDGET, progress: bool = False, **model_options) -> PlanSearch:
    """The plans for one training step (or, without `training`, one batch of inference) of `model` with global batch
    `batch` on `devices` of `system`, ranked by step time; those that do not fit are discarded with their reason.
    `recompute` and `zero` narrow the space to those recomputation modes and ZeRO stages. Plans that cannot be among
    the best `top` or on the Pareto front are left unsimulated (`pruned`, with their lower bound) unless
    `exhaustive`. The search prices at most `budget` candidates and stops pricing after `time_limit` seconds (None:
    no limit; `accelsim plan` gives 60 s); cut short, it answers with the best of what it priced and says so
    (`cut_short`, `skipped`).
    `progress`: candidates settled and the best so far on stderr (accelsim.sweep.progress)."""
    start = time.perf_counter()
    until = None if not time_limit else time.time() + time_limit     # wall-clock: the same in every worker
    sys_ = load_system(system)
    sys_ = sys_.sliced(sys_.fit(devices))     # plans on a torus are priced on the slice they run on
    n = sys_.fit().devices
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise UserError(f"batch {batch!r}: must be a positive integer")
    Optimizer(optimizer)                                     # an unknown one fails here, not in every worker
    compute = compute_dtype(sys_.device, dtype) if training else None
    if is_zoo_model(model) and compute is not None:
        model_options.setdefault("dtype", STORED.get(compute, compute).value)
    options = tuple(sorted(model_options.items()))
    alike = block_count(str(model), model_options) if training else None
    question = Question(str(model), options, sys_, n, batch, training, compute.value if compute else (dtype or ""),
                        optimizer, fidelity, alike)
    count = alike or len(blocks(load_model(model, batch=1, **training_form(model, dict(options)))))
    for mode in recompute:
        if mode not in MODES:
            raise UserError(f"recompute mode {mode!r}: choose among {', '.join(MODES)}")
    for stage in zero:
        if stage not in ZERO:
            raise UserError(f"ZeRO stage {stage!r}: choose among {', '.join(map(str, ZERO))}")
    space = candidates(n, batch, count, training, tuple(recompute), tuple(zero), limit=budget and budget + 1)
    if not space:
        raise UserError(f"batch {batch} does not split over any data-parallel degree of {n} devices (dp x tp x pp = "
                        f"{n}, and dp must divide the batch); use a batch that a divisor of {n} divides")
    cut = []
    if budget and len(space) > budget:
        space = candidates(n, batch, count, training, tuple(recompute), tuple(zero), limit=budget)
        cut.append(f"the space has more than {budget:,} candidates (the budget): each split of the devices was given "
                   f"its fewest micro-batch counts")
    share, notes = batch // min(c.plan.dp for c in space), []      # the most samples a replica takes
    if share > MAX_MICROBATCHES:
        notes.append(f"micro-batch counts above {MAX_MICROBATCHES:,} are not searched (a replica takes up to "
                     f"{share:,} samples): a pipeline schedule is priced pass by pass")
    bar = SearchProgress(f"plan {model}", len(space), progress)
    with PlanPool(question, space, workers, until, bar) as pool:   # its workers start while the bound is worked out
        bound = _state_bound(question, count)
        kept, discarded, scored = [], [], []
        for c in space:
            need = bound(c.plan)
            if need > sys_.device.memory[0].capacity_total:
                discarded.append(Discarded(c.fields(batch), c.text, "weights and optimizer state",
                                           f"the weights{' and optimizer state' * training} alone need at least "
                                           f"{need / GIB:,.2f} GiB per device, of {_capacity(sys_) / GIB:,.2f} GiB"))
            else:
                kept.append(c)
        bar.discarded = len(discarded)
        records, pruned = _evaluate(pool, question, kept, top, exhaustive)
        for record in records:
            if record is not None:
                (discarded if isinstance(record, Discarded) else scored).append(record)
    bar.close()
    skipped = len(space) - len(scored) - len(pruned) - len(discarded)
    if skipped:
        cut.insert(0, f"the time limit of {time_limit:g} s was reached")
    if not skipped and not scored and all(d.kind == "invalid" for d in discarded):
        raise UserError(f"no plan can split {model}'s batch of {batch} over {n} devices of {sys_.name}: every one of "
                        f"the {len(space)} candidates is invalid, e.g. {discarded[0].text}: {discarded[0].reason}")
    scored.sort(key=lambda s: (s.seconds, s.text))
    on_front = pareto(scored)
    ranked = [replace(s, pareto=i in on_front) for i, s in enumerate(scored)]
    discarded.sort(key=lambda d: d.text)
    return PlanSearch(str(model), sys_.name, n, batch, training, len(space), ranked, discarded, top,
                      time.perf_counter() - start, pool.workers, notes=notes + pool.notes, pruned=pruned,
                      cut_short="; ".join(cut), skipped=skipped)


def _capacity(sys_: System) -> int:
    return sys_.device.memory[0].capacity_total


def _state_bound(question: Question, count: int):
    """plan -> bytes a device holds at least: the whole model's weights (and optimizer state), as liveness counts
    them, over tp x pp (a device holds at least its share: replicated layers and tied weights only add), and over dp
    where ZeRO shards them."""
    weights, state = _state(question, count)

    def bound(plan: Plan) -> int:
        share = plan.tp * plan.pp
        return (weights // share) // (plan.dp if plan.zero >= 3 else 1) + \
            (state // share) // (plan.dp if plan.zero >= 1 else 1)
    return bound


def _state(question: Question, count: int) -> tuple[int, int]:
    """The whole model's weights and optimizer state in bytes (one device, no plan)."""
    options = dict(question.options)
    if not question.training:             # at the dtype the run holds them in (fp16 weights of an fp32-built model)
        graph = load_model(question.model, batch=1, **options)
        target = DType.parse(question.compute) if question.compute else question.system.device.native_dtype
        held = at_dtypes(graph, dtypes(compile_graph(graph, Options(dtype=target))))
        return sum(held.tensors[w].nbytes for w in held.weights if w not in held.constants), 0
    if question.blocks is not None:        # a Blocks of its own: the workers' start with nothing worked out
        plan, report = Plan(), _blocks(question, cached=False)
        memory = report.device_memory(plan, report.stage_memory(plan, "none", 1))
    else:                   # the model whole, one device: its memory from liveness, nothing simulated
        graph = load_model(question.model, batch=1, **training_form(question.model, options))
        graph.outputs = graph.outputs[:1]
        memory = training_graph(graph, optimizer=Optimizer(question.optimizer)).memory().to_dict()
    return memory["weights"], memory["optimizer"]


# -- evaluation: in this process or a pool; each worker keeps its caches -------------------------------------------
_BLOCKS: Memo[Question, Blocks] = Memo("accelsim.parallel.search: blocks per question", 8)


def _blocks(question: Question, cached: bool = True) -> Blocks:
    if question not in _BLOCKS or not cached:
        setting = Setting(question.model, tuple((k, v) for k, v in question.options if k != "layers"),
                          question.system, DType.parse(question.compute), Optimizer(question.optimizer),
                          "cross_entropy")
        if not cached:
            return Blocks(setting, question.blocks)
        _BLOCKS[question] = Blocks(setting, question.blocks)
    return _BLOCKS[question]


class PlanPool:
    """Tasks run in this process, or in a process pool kept for the whole search (its workers started as `starting`
    says); each task stops pricing at `until` (time.time()) and leaves the rest of its items None."""

    def __init__(self, question: Question, space: list[Candidate], workers: int | None, until: float | None = None,
                 bar: SearchProgress | None = None):
        self.question, self.until, self.bar = question, until, bar
        self.notes: list[str] = []
        tasks = len({c.plan.tp for c in space})
        usable = usable_cpus()
        if workers is not None and workers > usable:
            self.notes.append(f"--workers {workers}: capped at the {usable} CPU{'s' * (usable != 1)} this process "
                              f"may use")
        wanted = min(workers or MAX_WORKERS, usable, max(tasks, 1))
        if workers is None and len(space) < POOL_FROM:
            wanted = 1
        self.workers = max(wanted, 1)
        self._pool = None
        if self.workers > 1:
            self._pool = Workers(self.workers, starting(), run_task,
                                 _blocks if question.blocks is not None else _started, (question,))

    def __enter__(self) -> PlanPool:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.close()

    def idle(self) -> bool:
        """Whether a worker has nothing to do (never, in this process)."""
        return self._pool is not None and self._pool.idle()

    def wait(self) -> None:
        """Until a worker finishes its task."""
        if self._pool is not None:
            self._pool.pump()

    def late(self) -> bool:
        return self.until is not None and time.time() > self.until

    def each(self, work, jobs: list[list[int]], items: list, near=lambda job: ()):
        """(job, work(question, its items)) for each job (a list of indices into `items`), as they finish; `near(job)`
        names what the job builds, for a later task that shares it (accelsim.parallel.workers)."""
        if self._pool is None:
            for job in jobs:
                yield job, run_task(work, self.question, [items[i] for i in job], self.until)
            return
        tasks = {self.submit(work, [items[i] for i in job], near=near(job)): n for n, job in enumerate(jobs)}
        for task in self._pool.as_completed(list(tasks)):
            yield jobs[tasks[task]], task.result()

    def submit(self, work, items: list, timed: bool = True, near: tuple = ()):
        """work(question, items) started in a worker (here: done now), as something with .result(); `timed`: it
        stops at the time limit; `near`: what it shares with earlier tasks (their worker is preferred)."""
        until = self.until if timed else None
        if self._pool is None:
            return _Done(run_task(work, self.question, items, until))
        return self._pool.submit(work, self.question, items, until, near=near)


def starting() -> str:
    """How workers start: forked where that is safe (Linux, and this process runs no other thread: forking a threaded
    process can hang), so each starts at once with this process's imports (spawned, each imported accelsim again, a
    second of CPU apiece, before its first task); spawned otherwise."""
    if sys.platform.startswith("linux") and threading.active_count() == 1:
        return "fork"
    return "spawn"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, where the OS has one), not the machine's."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:         # macOS, Windows
        return os.cpu_count() or 1


def _started(question: Question) -> None:
    """Nothing: a worker started (and its imports done) while the search is set up."""


def run_task(work, question: Question, items: list, until: float | None) -> list:
    """work(question, items, until) with the cyclic garbage collector paused (accelsim.collector): a search makes
    millions of objects that live to its end (stage programs, mappings, liveness lines) and few cycles; a task that
    made more than COLLECT_AFTER collects once."""
    with paused(COLLECT_AFTER):
        return work(question, items, until)


@dataclass(frozen=True)
class _Done:
    value: list
    done: bool = True

    def result(self) -> list:
        return self.value


def _late(until: float | None) -> bool:
    return until is not None and time.time() > until


def _evaluate(pool: PlanPool, question: Question, kept: list[Candidate], top: int, exhaustive: bool) -> tuple:
    """(each kept candidate scored, discarded, or None where pruned or skipped; the pruned, as Pruned). A model of
    identical blocks in rounds: its memory, per tp (the liveness of each tp's stages once); the plans that fit priced
    at roofline fidelity, per tp and micro-batch (the same ops), each tp's as soon as its memory is known; then those
    that could be among the best `top` or on the Pareto front simulated (accelsim.parallel.bound), unless
    `exhaustive` or the search is at roofline fidelity already, when every plan that fits is scored. Past the time
    limit every task leaves what it has not priced None: skipped."""
    records: list = [None] * len(kept)
    blocks_ = question.blocks is not None and question.training
    prune = blocks_ and question.fidelity != "roofline" and not exhaustive
    settle = pool.bar.settle if pool.bar is not None else lambda *_: None
    second = []
    def near(i: int) -> tuple:      # what a task on plan i builds: its tp's and micro-batch's stages, its tp's lines
        return ("tp", kept[i].plan.tp, kept[i].micro(question.batch)), ("tp", kept[i].plan.tp)

    for job, out in pool.each(measure, _groups(range(len(kept)), lambda i: kept[i].plan.tp), kept,
                              lambda job: near(job[0])[1:]):
        for i, record in zip(job, out):
            records[i] = record
        settle(records)
        if blocks_:
            fit = [i for i in job if records[i] is not None and not isinstance(records[i], Discarded)]
            for group in _groups(fit, lambda i: kept[i].micro(question.batch)):
                second.append((group, pool.submit(lower_bound if prune else score,
                                                  [(kept[i], records[i]) for i in group], near=near(group[0]))))
    if not prune:
        for group, future in second:
            for i, record in zip(group, future.result()):
                records[i] = record
            settle(records)
        return [r if isinstance(r, (Scored, Discarded)) else None for r in records], []
    lower: dict[int, tuple[float, dict]] = {}
    for group, future in second:
        lower.update((i, b) for i, b in zip(group, future.result()) if b is not None)

    found = {"any": False}      # whether a plan is simulated yet: the first round is, even past the time limit
    done: dict[int, Scored] = {}                  # every plan simulated, in its round or ahead of it
    early: list[tuple[list[int], object]] = []    # tasks started ahead of their round, while a worker was idle
    least = {i: s for i, (s, _) in lower.items()}
    peak = {i: m["peak"] for i, (_, m) in lower.items()}
    order = sorted(lower, key=lambda i: (least[i], i))

    def key(i: int) -> tuple:
        return kept[i].plan.tp, kept[i].micro(question.batch)

    def start(group: list[int], timed: bool = True):
        return pool.submit(score, [(kept[i], records[i]) for i in group], timed=timed, near=near(group[0]))

    def run(indices: list[int]) -> dict:
        """The round's plans simulated; a worker left idle before the round ends simulates the next round's likely
        plans (bound.ahead): once their round comes they are done, and if it never comes nothing is reported."""
        mine = [(group, task) for group, task in early if set(group) & set(indices)]
        flying = {i for group, _ in early for i in group}
        tasks = mine + [(group, start(group, found["any"]))
                        for group in _groups([i for i in indices if i not in done and i not in flying], key)]
        while not all(task.done for _, task in tasks):
            if pool.idle():
                busy = {i for group, _ in tasks + early for i in group}
                nxt = _groups(ahead(order, least, peak, done, busy, top, pool.workers,
                                    lambda i: _program(kept[i], question.batch)), key)
                if nxt:
                    early.append((nxt[0], start(nxt[0])))
                    continue
            pool.wait()
        for group, task in tasks:
            done.update((i, s) for i, s in zip(group, task.result()) if s is not None)
        early[:] = [(group, task) for group, task in early if (group, task) not in mine]
        return {i: done[i] for i in indices if i in done}

    def stop(scored: dict, waiting: list[int]) -> bool:
        settle(records, scored, len(lower) - len(waiting) - len(scored))
        found["any"] = bool(scored)
        return bool(scored) and pool.late()

    scored, left = rounds(list(lower), least, peak, top, pool.workers,
                          lambda i: _program(kept[i], question.batch), run, stop)
    pruned = [Pruned(kept[i].fields(question.batch), kept[i].text, lower[i][0], lower[i][1]) for i in left
              if not needed(lower[i][0], peak[i], scored.values(), top)]      # the rest: skipped at the time limit
    return [scored.get(i, r if isinstance(r, Discarded) else None) for i, r in enumerate(records)], pruned


def _program(c: Candidate, batch: int) -> tuple:
    """What names a plan's stage programs: its tensor split, micro-batch, recomputation and whether it accumulates."""
    p = c.plan
    return p.tp, p.sp, p.groups, c.micro(batch), c.recompute, p.microbatches > 1


def _groups(indices, key) -> list[list[int]]:
    """The indices grouped by key, the biggest group first (then in order of first appearance)."""
    groups_: dict = {}
    for i in indices:
        groups_.setdefault(key(i), []).append(i)
    return sorted(groups_.values(), key=lambda g: -len(g))


def measure(question: Question, task: list[Candidate], until: float | None = None) -> list:
    """Each candidate discarded, or its stages' memory (a model of identical blocks, before simulating), or scored.
    The most recomputed first, with gradient accumulation first: what their liveness shows bounds the others'."""
    out: list = [None] * len(task)
    for j in sorted(range(len(task)), key=lambda j: _first(task[j])):
        if _late(until):
            break
        c = task[j]
        try:
            if question.blocks is not None and question.training:
                report, micro = _blocks(question), c.micro(question.batch)
                floor = report.floor(c.plan, c.recompute, micro)
                if floor is not None and floor["peak"] > floor["capacity"]:
                    out[j] = _over(question, c, floor, "at least ")
                    continue
                stages = report.stage_memory(c.plan, c.recompute, micro)
                out[j] = _over(question, c, report.device_memory(c.plan, stages)) or stages
            else:
                _check_split(question, c.plan)
                result = _simulate(question, c)
                out[j] = _over(question, c, result.memory) or _scored(question, c, result.memory, result)
        except UserError as error:          # tp not dividing the heads, say: the partition pass names the value
            out[j] = Discarded(c.fields(question.batch), c.text, "invalid", f"invalid: {error}")
    return out


_SPLITS: Memo[tuple, ModelError | None] = Memo("accelsim.parallel.search: tensor splits", 4096)


def _check_split(question: Question, plan: Plan) -> None:
    """Raise what splitting the model `plan.tp` ways raises, found once per tensor split and process: every plan of
    that split would raise it from one of its stages (the partition pass splits op by op), after loading the model
    again (720,720 devices: 14,063 of 14,094 plans invalid, each for its tp, took most of two minutes)."""
    key = (question, plan.tp, plan.sp, plan.groups)
    if plan.tp > 1 and key not in _SPLITS:
        options = dict(question.options)
        graph = load_model(question.model, batch=1, **(training_form(question.model, options) if question.training
                                                        else options))
        try:
            partition(graph, plan)
            _SPLITS[key] = None
        except ModelError as error:
            _SPLITS[key] = error
    if _SPLITS.get(key) is not None:
        raise _SPLITS[key]


def _first(c: Candidate) -> tuple:
    return -MODES.index(c.recompute) if c.recompute else 0, c.plan.microbatches == 1, c.text


def score(question: Question, task: list[tuple[Candidate, list]], until: float | None = None) -> list:
    """Each candidate that fits, simulated from its stages of 1 and 2 blocks (accelsim.parallel.blocks)."""
    out: list = [None] * len(task)
    for j, (c, stages) in enumerate(task):
        if _late(until):
            break
        report = _blocks(question)
        result = report.result(c.plan, c.recompute, c.micro(question.batch), question.fidelity, stages)
        out[j] = _scored(question, c, report.device_memory(c.plan, stages), result)
    return out


def lower_bound(question: Question, task: list[tuple[Candidate, list]], until: float | None = None) -> list:
    """Each candidate's step time at roofline fidelity (a lower bound on its tile time) and its device memory."""
    out: list = [None] * len(task)
    for j, (c, stages) in enumerate(task):
        if _late(until):
            break
        report = _blocks(question)
        result = report.result(c.plan, c.recompute, c.micro(question.batch), "roofline", stages)
        out[j] = (result.seconds, report.device_memory(c.plan, stages))
    return out


def _over(question: Question, c: Candidate, memory: dict, least: str = "") -> Discarded | None:
    if memory["peak"] <= memory["capacity"]:
        return None
    largest = sorted(((memory[k], k) for k in CATEGORIES), reverse=True)[:2]
    return Discarded(c.fields(question.batch), c.text, "over capacity",
                     f"device {memory['device']} (pipeline position) needs {least}{memory['peak'] / GIB:,.2f} GiB at "
                     f"its peak, of {memory['capacity'] / GIB:,.2f} GiB; largest: "
                     f"{', '.join(f'{k} {least}{b / GIB:,.2f} GiB' for b, k in largest)}")


def _scored(question: Question, c: Candidate, memory: dict, result) -> Scored:
    return Scored(c.fields(question.batch), c.text, result.seconds, result.mfu(), dict(memory),
                  bottleneck(result, question.system))


def _simulate(question: Question, c: Candidate):
    """The step simulated whole: train_parallel, or run_parallel for inference."""
    options = dict(question.options)
    if not question.training:
        from accelsim.parallel.run import run_parallel
        return run_parallel(question.model, question.system, devices=question.devices, parallel=c.plan,
                            batch=question.batch, dtype=question.compute or None, **options)
    from accelsim.parallel.train import train_parallel
    options.pop("dtype", None)    # the zoo model's stored dtype, which train_parallel sets from the compute dtype too
    return train_parallel(question.model, question.system, devices=question.devices, parallel=c.plan,
                          batch=question.batch, optimizer=question.optimizer, dtype=question.compute,
                          recompute=c.recompute, fidelity=question.fidelity, **options)
