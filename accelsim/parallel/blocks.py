"""A training step of a model of identical blocks priced from stages of 2 and 3 blocks: the planner's fast report.

A stage's time and work add up over its ops, so a stage of k blocks takes its 2-block version plus k - 2 times what its
second block adds to the 1-block one; likewise its tensor-parallel collectives, gradients, parameters and FLOPs. Its
memory is the highest point of the k-block program's liveness curve, and every node of the first block, the last
block or outside the blocks holds bytes affine in k and in the micro-batch (block j's forward keeps j - 1 blocks'
activations, its backward k - j blocks' gradients; activations scale with the batch): following each such node
through stages of 2 and 3 blocks at micro-batches 1 and 2 gives the curve at any k and micro-batch, with no
simulation, so a plan that does not fit is known before anything is simulated.
Invariant: for a model of identical blocks this equals train_parallel (tests/accelsim/parallel/test_plan_blocks.py).
"""
from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np

from accelsim.arch.system import System
from accelsim.results.parallel import CATEGORIES, ParallelResult, add_up
from accelsim.parallel.groups import groups
from accelsim.parallel.plan import Plan
from accelsim.parallel.rank import partition
from accelsim.parallel.train import (assemble, fsdp_units, rank_memory, rank_model_flops, simulate_stage, stage_key,
                                     stage_passes)
from accelsim.sim.model import load_model
from accelsim.sim.train import training_form
from compiler import zoo
from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.memo import Memo
from compiler.parallel.pipeline import BLOCK, blocks, split, structure
from compiler.train import Optimizer, training_graph
from compiler.train.memory import ACTIVATIONS, WORKSPACE
from compiler.train.recompute import MODES

POINTS = (2, 3)       # blocks per stage the lines go through (k = 1 is its own point: its first block is its last)
TIMED = (1, 2)        # blocks per stage simulated: time adds up over ops, so the first block's is no different
SAMPLES = (2, 3)      # micro-batches they go through (1 is its own: a batch of one broadcasts, and reduces nothing)


@dataclass(frozen=True)
class Setting:
    """What every stage of a search shares: the model, the device, the step's dtype, optimizer and loss."""

    model: str
    options: tuple                # the zoo builder's options as sorted (key, value) pairs, without `layers`
    system: System
    compute: DType
    update: Optimizer
    loss: str


def block_count(model, options: dict) -> int | None:
    """How many identical blocks a zoo model has (its `layers` option), or None when it has no such option or its
    blocks are not that many (the planner then simulates every plan whole)."""
    if isinstance(model, str) and model in zoo.MODELS:
        parameter = inspect.signature(zoo.MODELS[model]).parameters.get("layers")
        if parameter is not None:
            count = options.get("layers", parameter.default)
            probe = load_model(model, batch=1, **training_form(model, {**options, "layers": 2}))
            return count if isinstance(count, int) and len(blocks(probe)) == 2 else None
    return None


class Blocks:
    """The fast report for one Setting, in one process: stage graphs, liveness lines and simulated stages cached."""

    def __init__(self, setting: Setting, count: int):
        self.setting, self.count = setting, count
        self.options = dict(setting.options)
        self._graphs: dict[tuple, list] = {}
        self._invalid: dict[tuple, ModelError] = {}
        self._cuts: dict[tuple, list] = {}
        self._alike: bool | None = None
        self._lines: dict[tuple, Lines] = {}
        self._flops: dict[tuple, float] = {}
        # stage passes kept (per plan's tp and micro-batch count)
        self._roles: Memo[tuple, dict] = Memo("accelsim.parallel.blocks: stage passes", 4096)
        probe = load_model(setting.model, batch=1, **training_form(setting.model, {**self.options, "layers": 1}))
        self.prefix = BLOCK.match(next(n.name for n in probe.nodes if BLOCK.match(n.name))).group(1)
        shape = probe.tensors[probe.outputs[0]].shape if probe.outputs else ()
        self.per_sample = shape[1] if len(shape) == 3 else None     # tokens per sample: [batch, tokens, vocab]

    # -- memory, before any simulation -------------------------------------------------------------------------
    def stage_memory(self, plan: Plan, recompute: str, micro: int) -> list[dict]:
        """Each pipeline stage's memory at its peak (compiler.train.memory's, one micro-batch), in stage order."""
        stages, k = self._shape(plan)
        lines = [self._line(plan, recompute, plan.microbatches > 1, *self._family(stages, i), micro)
                 for i in range(min(stages, 3))]
        return [lines[_family_index(s, stages)].at(k, micro) for s in range(stages)]

    def floor(self, plan: Plan, recompute: str, micro: int) -> dict | None:
        """A lower bound on device_memory from liveness already worked out, or None: the weights and optimizer state
        (the same whatever the recomputation and accumulation) and the activations kept for the backward pass (as
        many with gradient accumulation or without, fewer the more is recomputed), with what follows from them."""
        stages, k = self._shape(plan)
        keys = [_line_key(plan, r, a, *self._family(stages, i), self._points(plan, micro))
                for i in range(min(stages, 3)) for r in MODES[MODES.index(recompute):] for a in (True, False)]
        found = {}
        for key in keys:
            if key in self._lines:
                found.setdefault(key[5:7], self._lines[key])        # per stage class: the least recomputed first
        if len(found) < min(stages, 3):
            return None
        lines = [found[self._family(stages, i)] for i in range(min(stages, 3))]
        least = [{**{c: 0 for c in CATEGORIES}, **{c: m[c] for c in ("weights", "optimizer", "saved_activations")}}
                 for m in (lines[_family_index(s, stages)].at(k, micro) for s in range(stages))]
        return self.device_memory(plan, least)

    def device_memory(self, plan: Plan, stage_memory: list[dict]) -> dict:
        """The fullest device's memory by category (ParallelResult.memory): its stages' activations times the
        micro-batches in flight, ZeRO's shards (accelsim.parallel.train)."""
        per_stage = [rank_memory({"run": SimpleNamespace(memory=m)}, plan, s) for s, m in enumerate(stage_memory)]
        devices = [add_up(per_stage[d::plan.pp]) for d in range(plan.pp)]
        fullest = max(range(plan.pp), key=lambda d: devices[d]["peak"])
        capacity = self.setting.system.device.memory[0].capacity_total
        return {**devices[fullest], "capacity": capacity, "device": fullest}

    def _family(self, stages: int, i: int) -> tuple[int, int]:
        """The cut-down model (its stages, which one) that stage class i of `stages` stages is priced on: the first
        and last of 3 stand for those of 2 when they are the same program (they are, for a decoder)."""
        n = min(stages, 3)
        if n != 2:
            return n, i
        if self._alike is None:
            self._alike = all(structure(self._cut(2, kk, 2)[j].graph) == structure(self._cut(3, kk, 2)[2 * j].graph)
                              for kk in POINTS for j in (0, 1))
        return (3, 2 * i) if self._alike else (2, i)

    def _line(self, plan: Plan, recompute: str, accumulate: bool, n: int, i: int, micro: int) -> Lines:
        points = self._points(plan, micro)
        key = _line_key(plan, recompute, accumulate, n, i, points)
        if key not in self._lines:
            ks, ms = points
            steps = {(kk, m): self._step(plan, recompute, accumulate, n, kk, m, i) for kk in ks for m in ms}
            self._lines[key] = Lines.through(steps)
        return self._lines[key]

    def _points(self, plan: Plan, micro: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The blocks per stage and micro-batches a stage's liveness is followed through, for this plan."""
        return (1,) if self._shape(plan)[1] == 1 else POINTS, (1,) if micro == 1 else SAMPLES

    def _step(self, plan: Plan, recompute: str, accumulate: bool, n: int, kk: int, micro: int, i: int):
        stage, shard = self._stages(plan, n, kk, micro)[i]
        return training_graph(shard, loss=self.setting.loss if i == n - 1 else "stage", optimizer=self.setting.update,
                              accumulate=accumulate, recompute=recompute, input_grads=i > 0)

    def _stages(self, plan: Plan, n: int, kk: int, micro: int) -> list:
        """The n stages of the model cut down to n x kk blocks, each one tensor-parallel rank's share."""
        key = (plan.tp, plan.sp, plan.groups, n, kk, micro)
        if plan.tp > 1 and (plan.tp, plan.sp, plan.groups) in self._invalid:
            raise self._invalid[(plan.tp, plan.sp, plan.groups)]
        if key not in self._graphs:
            try:
                self._graphs[key] = [(s, partition(s.graph, plan) if plan.tp > 1 else s.graph)
                                     for s in self._cut(n, kk, micro)]
            except ModelError as error:     # tp not dividing the heads: so for every plan of that tp
                self._invalid[(plan.tp, plan.sp, plan.groups)] = error
                raise
        return self._graphs[key]

    def _cut(self, n: int, kk: int, micro: int) -> list:
        """The model cut down to n x kk blocks, in n pipeline stages."""
        if (n, kk, micro) not in self._cuts:
            options = training_form(self.setting.model, {**self.options, "layers": n * kk})
            graph = load_model(self.setting.model, batch=micro, **options)
            graph.outputs = graph.outputs[:1]
            self._cuts[(n, kk, micro)] = split(graph, n)
        return self._cuts[(n, kk, micro)]

    def _shape(self, plan: Plan) -> tuple[int, int]:
        stages = plan.pp * plan.chunks
        if self.count % stages:
            raise ModelError(f"pipeline degree {stages} does not divide the model's {self.count} blocks")
        return stages, self.count // stages

    # -- the step, simulated ---------------------------------------------------------------------------------------
    def result(self, plan: Plan, recompute: str, micro: int, fidelity: str = "tile",
               stage_memory: list[dict] | None = None) -> ParallelResult:
        """The step as train_parallel simulates it at `fidelity`, from simulated stages of 1 and 2 blocks
        (`stage_memory`: what stage_memory says, when known)."""
        stages, k = self._shape(plan)
        n = min(stages, 3)
        memory = stage_memory or self.stage_memory(plan, recompute, micro)
        by_kind = groups(plan.tp, plan.dp, plan.pp)
        used: set[tuple] = set()
        families = [self._family(stages, i) for i in range(n)]
        if k <= len(TIMED):
            classes = [self._role(plan, by_kind, recompute, micro, *f, k, used, fidelity) for f in families]
        else:       # each kind of stage grows by its own block: BERT's middle stages also return the mask's gradient
            classes = [_extend(*(self._role(plan, by_kind, recompute, micro, *f, kk, used, fidelity) for kk in TIMED),
                               k - TIMED[-1]) for f in families]
        roles = []
        for s in range(stages):
            role = dict(classes[_family_index(s, stages)])
            kept = {key: v for key, v in role["run"].memory.items() if key.startswith("capacity")}
            role["run"] = replace(role["run"], memory={**kept, **memory[s]})
            role["stage"] = SimpleNamespace(blocks=tuple(f"{self.prefix}.{b}" for b in range(s * k, (s + 1) * k)))
            roles.append(role)
        return assemble(self.setting.system, plan, roles, micro, self.per_sample, None, len(used))

    def _role(self, plan: Plan, by_kind: dict, recompute: str, micro: int, n: int, i: int, kk: int, used: set,
              fidelity: str) -> dict:
        stage, shard = self._stages(plan, n, kk, micro)[i]
        steps = 2 if plan.microbatches > 1 else 1        # one program serves every count of micro-batches but 1
        st = self.setting
        key = stage_key(shard, st.system.device, st.compute, micro, steps, st.update,
                        st.loss if i == n - 1 else "stage", recompute, fidelity, i > 0)
        used.add(key)
        if (key, plan.microbatches) not in self._roles:     # the same for every dp, schedule and ZeRO stage
            run, step = simulate_stage(key, shard)
            role = stage_passes(st.system, by_kind, plan, stage, run, step)
            del role["step"]                                 # its graph, no longer needed (memory, for a planner)
            # the model's FLOPs: forward and backward, not what is recomputed, whatever the fidelity
            flops_key = (plan.tp, plan.sp, plan.groups, n, kk, micro, i, steps)
            if flops_key not in self._flops:
                self._flops[flops_key] = rank_model_flops(stage.graph, run, plan.tp) / steps
            role["model_flops"] = self._flops[flops_key] * plan.microbatches
            self._roles[(key, plan.microbatches)] = role
        return dict(self._roles[(key, plan.microbatches)])


def _line_key(plan: Plan, recompute: str, accumulate: bool, n: int, i: int, points: tuple) -> tuple:
    return (plan.tp, plan.sp, plan.groups, recompute, accumulate, n, i, points)


def _family_index(s: int, stages: int) -> int:
    """Which of the cut-down model's stages stage s of `stages` is like: the first, a middle one or the last."""
    return 0 if s == 0 else min(stages, 3) - 1 if s == stages - 1 else 1


ADDITIVE = ("forward", "backward", "optimizer", "grad_bytes", "params", "model_flops")


def _extend(one: dict, two: dict, more: int) -> dict:
    """A stage of 1 block with `more` blocks added, each adding what the second block of its 2-block version adds."""
    out = {**two, **{f: two[f] + more * (two[f] - one[f]) for f in ADDITIVE}}
    keys = sorted(set(one["tp_comm"]) | set(two["tp_comm"]))
    out["tp_comm"] = {k: two["tp_comm"].get(k, 0.0) + more * (two["tp_comm"].get(k, 0.0) - one["tp_comm"].get(k, 0.0))
                      for k in keys}
    out["transfers"] = two["transfers"] + _added(one["transfers"], two["transfers"]) * more
    return out


def _added(one: list[dict], two: list[dict]) -> list[dict]:
    """The tensor-parallel collectives a second block adds (named as in the 2-block stage): those it holds beyond the
    1-block stage's, by collective, phase, size and time (BERT's mask gradient is all-reduced outside the blocks)."""
    def key(t: dict) -> tuple:
        return t["collective"], t["phase"], t["bytes"], t["seconds"]
    extra = Counter(key(t) for t in two) - Counter(key(t) for t in one)
    added = []
    for t in reversed(two):
        if extra[key(t)] > 0:
            added.append(t)
            extra[key(t)] -= 1
    return added[::-1]


@dataclass(frozen=True)
class Lines:
    """Bytes live at each followed node, by category, as value + slope per block + slope per sample + their product
    (from stages of k0 and k0 + 1 blocks at micro-batches m0 and m0 + 1); the activations kept for the backward
    pass and every gradient's bytes, the same way; and the two largest FSDP units (a block, or what lies outside the
    blocks: the same for any k >= 2)."""

    k0: int
    m0: int
    base: np.ndarray              # [nodes, categories] at k0 blocks, micro-batch m0
    per_block: np.ndarray
    per_sample: np.ndarray
    both: np.ndarray
    saved: tuple[int, int, int, int]
    # each node's place in the schedule of k0 blocks and of more: a stage of 2 recomputes its first block during its
    # last block's backward pass, one of 3 or more during a middle block's, so the order (liveness's tie-break
    # between two nodes holding as many bytes) is the 2-block stage's at k0 and the 3-block stage's above
    order: tuple[np.ndarray, np.ndarray]
    names: tuple[tuple[str, ...], tuple[str, ...]]
    gradients: tuple[int, int, int, int] = (0, 0, 0, 0)      # every gradient's bytes, as `saved`
    units: tuple[int, ...] = ()       # the two largest FSDP units' bytes: the same at k0 blocks and more (k0 = 2)

    @classmethod
    def through(cls, steps: dict) -> Lines:
        k0, k1 = min(k for k, _ in steps), max(k for k, _ in steps)
        m0, m1 = min(m for _, m in steps), max(m for _, m in steps)
        rows = {point: dict(_followed(step)) for point, step in steps.items()}
        keys = list(rows[(k0, m0)])
        if any(set(r) != set(keys) for r in rows.values()):
            raise ModelError("the model's blocks are not alike: stages of 2 and 3 blocks differ in more than a block")
        curve, saved, grads = {}, {}, {}
        for point, step in steps.items():
            profile, saved[point], grads[point] = step.profile()
            curve[point] = np.array([profile[rows[point][key]] for key in keys], dtype=np.int64)
        order = tuple(np.array([rows[(k, m0)][key] for key in keys]) for k in (k0, k1))
        names = tuple(tuple(steps[(k, m0)].graph.nodes[rows[(k, m0)][key]].name for key in keys) for k in (k0, k1))
        a, b, c, d = (curve[p] for p in ((k0, m0), (k1, m0), (k0, m1), (k1, m1)))
        return cls(k0, m0, a, b - a, c - a, d - c - b + a, _affine(saved, k0, k1, m0, m1), order, names,
                   _affine(grads, k0, k1, m0, m1), tuple(fsdp_units(steps[(k0, m0)])))

    def at(self, k: int, micro: int) -> dict:
        """The stage's memory at k blocks and micro-batch `micro`, as compiler.train.memory reports it."""
        x, y = k - self.k0, micro - self.m0
        live = self.base + x * self.per_block + y * self.per_sample + x * y * self.both
        total = live.sum(axis=1)
        which = 0 if k == self.k0 else 1
        highest = np.flatnonzero(total == total.max())
        peak = int(highest[np.argmin(self.order[which][highest])])      # the first highest node, as liveness picks
        memory = {c: int(live[peak, j]) for j, c in enumerate(CATEGORIES)}
        passing = live[:, ACTIVATIONS] + live[:, WORKSPACE]
        highest = np.flatnonzero(passing == passing.max())
        high = int(highest[np.argmin(self.order[which][highest])])
        return {**memory, "peak": sum(memory.values()), "peak_node": self.names[which][peak],
                "saved_activations": _at(self.saved, x, y), "gradients_total": _at(self.gradients, x, y),
                "transient_activations": int(live[high, ACTIVATIONS]),
                "transient_workspace": int(live[high, WORKSPACE]),
                "units": list(self.units)}


def _affine(value: dict, k0: int, k1: int, m0: int, m1: int) -> tuple[int, int, int, int]:
    """A figure measured at (k0, m0), (k1, m0), (k0, m1), (k1, m1) as value, slope per block, per sample, both."""
    a, b, c, d = (value[p] for p in ((k0, m0), (k1, m0), (k0, m1), (k1, m1)))
    return a, b - a, c - a, d - c - b + a


def _at(line: tuple[int, int, int, int], x: int, y: int) -> int:
    v0, vk, vm, vkm = line
    return v0 + x * vk + y * vm + x * y * vkm


def _followed(step) -> list[tuple[tuple[str, int], int]]:
    """The nodes followed from one stage to the next, in schedule order: those outside the blocks, of the first block
    and of the last, each keyed by (where, how many of those came before it), with its index in the schedule."""
    label, made = [], {}
    for node in step.graph.nodes:
        m = BLOCK.match(step.owner.get(node.name) or node.name)
        # a node outside the blocks that reads a block's tensor is followed with that block (a decoder's per-layer
        # present_key.i, its final norm after the last block), so each stage has the same nodes outside them
        mine = f"{m.group(1)}.{m.group(2)}" if m else next((made[i] for i in node.inputs if made.get(i)), None)
        label.append(mine)
        made.update((o, mine) for o in node.outputs if o)
    order = list(dict.fromkeys(x for x in label if x))
    first, last = (order[0], order[-1]) if order else (None, None)
    followed, seen = [], {}
    for i, x in enumerate(label):
        place = "outside" if x is None else "first" if x == first else "last" if x == last else None
        if place is not None:
            followed.append(((place, seen.get(place, 0)), i))
            seen[place] = seen.get(place, 0) + 1
    return followed
