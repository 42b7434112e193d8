"""The planner's result: every candidate plan either scored (step time, MFU, memory at the fullest device, its
bottleneck in words), pruned (it fits, but a lower bound puts it behind the best and off the front) or discarded
with its reason, or skipped when the search was cut short (time limit, budget); the best ranked by step time, and
the Pareto front of step time against memory. JSON and table views.

Invariant: `ranked` is sorted by (seconds, plan text), so the same search gives the same output in the same order;
a plan is on the front when no other is at least as fast and as small, and faster or smaller.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from accelsim.results.units import binary, seconds as show

PLANS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Scored:
    plan: dict                     # dp, tp, pp, mb, micro_batch, schedule, chunks, zero, sp, recompute
    text: str                      # the plan as `--parallel` takes it, and its recomputation
    seconds: float
    mfu: float
    memory: dict                   # the fullest device's bytes by category, peak and capacity
    bottleneck: str
    pareto: bool = False

    def to_dict(self) -> dict:
        return {"plan": self.plan, "text": self.text, "seconds": self.seconds, "mfu": self.mfu,
                "memory": self.memory, "bottleneck": self.bottleneck, "pareto": self.pareto}


@dataclass(frozen=True)
class Discarded:
    plan: dict
    text: str
    kind: str                      # invalid, weights and optimizer state, over capacity
    reason: str

    def to_dict(self) -> dict:
        return {"plan": self.plan, "text": self.text, "kind": self.kind, "reason": self.reason}


@dataclass(frozen=True)
class Pruned:
    """A plan that fits but was not simulated: its lower bound alone puts it behind the best and off the front."""

    plan: dict
    text: str
    at_least: float                # seconds: the step at roofline fidelity, a lower bound on its tile time
    memory: dict

    def to_dict(self) -> dict:
        return {"plan": self.plan, "text": self.text, "at_least_seconds": self.at_least, "memory": self.memory}


@dataclass(frozen=True)
class PlanSearch:
    model: str
    system: str
    devices: int
    batch: int
    training: bool
    candidates: int
    ranked: list[Scored]           # every plan that fits, fastest first
    discarded: list[Discarded]
    top: int
    seconds: float = 0.0           # wall-clock time the search took
    workers: int = 1
    notes: list[str] = field(default_factory=list)
    pruned: list[Pruned] = field(default_factory=list)     # fit, but provably behind the best and off the front
    cut_short: str = ""            # why the search stopped before pricing every candidate ("": it did not)
    skipped: int = 0               # candidates left unpriced when it was cut short

    @property
    def best(self) -> Scored | None:
        return self.ranked[0] if self.ranked else None

    @property
    def front(self) -> list[Scored]:
        return [s for s in self.ranked if s.pareto]

    @property
    def shown(self) -> list[Scored]:
        """The top plans, then those of the Pareto front beyond them, in rank order."""
        return [s for i, s in enumerate(self.ranked) if i < self.top or s.pareto]

    def reasons(self) -> dict[str, int]:
        return dict(sorted(Counter(d.kind for d in self.discarded).items()))

    def to_dict(self) -> dict:
        return {"version": PLANS_SCHEMA_VERSION, "model": self.model, "system": self.system, "devices": self.devices,
                "batch": self.batch, "training": self.training, "candidates": self.candidates,
                "fitting": len(self.ranked) + len(self.pruned), "simulated": len(self.ranked),
                "plans": [s.to_dict() for s in self.shown], "pruned": [p.to_dict() for p in self.pruned],
                "discarded": [d.to_dict() for d in self.discarded], "discarded_by_reason": self.reasons(),
                "cut_short": self.cut_short or None, "skipped": self.skipped, "notes": list(self.notes)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def table(self) -> str:
        what = "training step" if self.training else "inference batch"
        reasons = ", ".join(f"{n:,} {kind}" for kind, n in self.reasons().items())
        lines = [f"{self.model} on {self.system}, {self.devices:,} devices, batch {self.batch:,}, one {what}: "
                 f"{self.candidates:,} candidate plans, {len(self.ranked) + len(self.pruned):,} fit"
                 + (f" ({len(self.ranked):,} simulated, {len(self.pruned):,} behind the best {self.top} and off the "
                    f"Pareto front by a lower bound)" if self.pruned else "")
                 + f", {len(self.discarded):,} discarded"
                 + (f" ({reasons})" if reasons else "") + f"; searched in {self.seconds:,.1f} s on {self.workers} "
                 f"worker{'s' * (self.workers != 1)}"]
        if self.cut_short:
            counts = (f"; {self.candidates - self.skipped:,} of {self.candidates:,} candidates priced, "
                      f"{self.skipped:,} skipped" if self.skipped else "")
            lines.append(f"search cut short: {self.cut_short}{counts}. The plans below are the best of those priced, "
                         f"not necessarily the best of the space (raise --time-limit or --budget, or narrow the "
                         f"search with --recompute, --zero, --devices)")
        if not self.ranked:
            lines.append("no plan was priced before the search was cut short" if self.skipped else "no plan fits")
        else:
            lines += ["", f"best {min(self.top, len(self.ranked))} by step time (* on the Pareto front of time and "
                          f"memory):"]
            lines += _rows([s for s in self.ranked[:self.top]])
            beyond = [s for s in self.front if s not in self.ranked[:self.top]]
            if beyond:
                lines += ["", "the rest of the Pareto front (less memory, more time):"]
                lines += _rows(beyond)
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _rows(plans: list[Scored]) -> list[str]:
    width = max(len(s.text) for s in plans)
    out = [f"  {'plan':<{width}}  {'step':>9} {'MFU':>6} {'memory':>10}  bottleneck"]
    for s in plans:
        mark = "*" if s.pareto else " "
        out.append(f"{mark} {s.text:<{width}}  {show(s.seconds):>9} {s.mfu:>6.1%} {binary(s.memory['peak']):>10}  "
                   f"{s.bottleneck}")
    return out


def pareto(scored: list[Scored]) -> set[int]:
    """Indices of the plans no other plan dominates in (seconds, peak memory): none is at least as fast and as small
    and faster or smaller. `scored` sorted by seconds."""
    front, best_before = set(), None        # the least memory among strictly faster plans
    i = 0
    while i < len(scored):
        j = i
        while j < len(scored) and scored[j].seconds == scored[i].seconds:
            j += 1
        least = min(s.memory["peak"] for s in scored[i:j])
        for k in range(i, j):
            peak = scored[k].memory["peak"]
            if peak == least and (best_before is None or peak < best_before):
                front.add(k)
        best_before = least if best_before is None else min(best_before, least)
        i = j
    return front
