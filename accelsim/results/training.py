"""A simulated training step: its time split into forward, backward and optimizer, its memory against the device's,
throughput, model FLOPs and MFU, the time to train, and the per-layer view; with JSON, CSV and table views.

Invariant: step seconds = microsteps x (forward + recompute + backward) + optimizer, where forward includes the
loss and backward the gradient accumulation; model FLOPs count the multiply-adds the step needs (2 per MAC),
recomputation excluded (MFU, not hardware FLOPs utilisation). The JSON layout is versioned (TRAIN_SCHEMA_VERSION)
and documented in docs/training.md.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

from accelsim.results.result import Result
from accelsim.results.units import binary, seconds as show_seconds, si

TRAIN_SCHEMA_VERSION = 1
PHASES = ("forward", "recompute", "backward", "optimizer")


@dataclass(frozen=True)
class Layer:
    name: str                        # the forward node
    op: str
    seconds: dict[str, float]        # per phase, for the whole step (micro-steps included)
    bound: str                       # of the layer's longest op


@dataclass(frozen=True)
class TrainResult:
    result: Result                   # one micro-step's forward and backward, and the optimizer, op by op
    phase_of: dict[str, str]         # IR op name -> forward, backward or optimizer
    layers: list[Layer]
    microsteps: int
    batch: int
    tokens_per_sample: int | None    # language models: tokens per sequence
    memory: dict                     # compiler.train.memory.Memory.to_dict() plus capacity
    model_flops: float
    peak_flops: float
    samples: int | None = None       # the training length, when one was given
    notes: list[str] = field(default_factory=list)

    @property
    def phase_seconds(self) -> dict[str, float]:
        once = {p: 0.0 for p in PHASES}
        for op in self.result.ops:
            once[self.phase_of[op.name]] += op.seconds
        return {p: s * (1 if p == "optimizer" else self.microsteps) for p, s in once.items()}

    @property
    def seconds(self) -> float:
        return sum(self.phase_seconds.values())

    @property
    def fits(self) -> bool:
        return self.memory["peak"] <= self.memory["capacity"]

    def throughput(self) -> dict:
        rate = {"samples_per_second": self.batch / self.seconds if self.seconds else 0.0}
        if self.tokens_per_sample:
            rate["tokens_per_second"] = rate["samples_per_second"] * self.tokens_per_sample
        return rate

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.seconds * self.peak_flops) if self.seconds and self.peak_flops else 0.0

    @property
    def steps(self) -> int | None:
        return None if self.samples is None else -(-self.samples // self.batch)

    def to_dict(self) -> dict:
        d = {"version": TRAIN_SCHEMA_VERSION, "model": self.result.model, "arch": self.result.arch,
             "batch": self.batch, "microsteps": self.microsteps,
             "step": {"seconds": self.seconds, **self.phase_seconds},
             "memory": self.memory, "fits": self.fits, "throughput": self.throughput(),
             "model_flops": self.model_flops, "mfu": self.mfu,
             "layers": [{"name": l.name, "op": l.op, "bound": l.bound, **{f"{p}_seconds": l.seconds[p] for p in PHASES}}
                        for l in self.layers],
             "notes": self.notes + self.result.notes}
        if self.steps is not None:
            d["steps"] = self.steps
            d["time_to_train_seconds"] = self.steps * self.seconds
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_csv(self) -> str:
        """One row per layer: its op, bound and seconds per phase."""
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["layer", "op", "bound", *(f"{p}_seconds" for p in PHASES)])
        for layer in self.layers:
            writer.writerow([layer.name, layer.op, layer.bound, *(f"{layer.seconds[p]:.6g}" for p in PHASES)])
        return buffer.getvalue()

    def table(self, limit: int | None = 20) -> str:
        """The layers that take longest, then the step, memory and throughput."""
        shown = [p for p in PHASES if p != "recompute" or any(l.seconds[p] for l in self.layers)]
        lines = [f"{'layer':<36} {'op':<20} " + " ".join(f"{p:>10}" for p in shown) + "  bound"]
        ranked = sorted(self.layers, key=lambda l: -sum(l.seconds.values()))
        for layer in ranked[:limit] if limit else ranked:
            times = " ".join(f"{show_seconds(layer.seconds[p]):>10}" for p in shown)
            lines.append(f"{layer.name[:36]:<36} {layer.op[:20]:<20} {times}  {layer.bound}")
        if limit and len(ranked) > limit:
            lines.append(f"... {len(ranked) - limit} more layers (--limit 0 for all)")
        phase = self.phase_seconds
        lines += ["", f"step {show_seconds(self.seconds)}: " + ", ".join(f"{p} {show_seconds(phase[p])}" for p in shown)
                      + (f" ({self.microsteps} micro-batches)" if self.microsteps > 1 else "")]
        rate = self.throughput()
        per = f"{rate['samples_per_second']:,.1f} samples/s"
        if "tokens_per_second" in rate:
            per += f", {rate['tokens_per_second']:,.0f} tokens/s"
        lines.append(f"{per}; model {si(self.model_flops, 'FLOP')} per step, MFU {self.mfu:.1%}")
        m = self.memory
        split = ", ".join(f"{k} {binary(m[k])}"
                          for k in ("weights", "gradients", "optimizer", "activations", "workspace"))
        lines.append(f"memory {binary(m['peak'])} of {binary(m['capacity'])} ({split})"
                     + ("" if self.fits else "  DOES NOT FIT"))
        if self.steps is not None:
            lines.append(f"time to train: {self.steps:,} steps, {duration(self.steps * self.seconds)}")
        for note in self.notes + self.result.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines) + "\n"


def duration(value: float) -> str:
    """A training run's length: seconds up to a minute, then minutes, hours or days."""
    for factor, unit in ((86400, "days"), (3600, "hours"), (60, "minutes")):
        if value >= factor:
            return f"{value / factor:.3g} {unit}"
    return show_seconds(value)
