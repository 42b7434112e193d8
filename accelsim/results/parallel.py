"""A parallel run on a system of devices, training and inference alike (ParallelResult; `training` says which):
per device role (a pipeline stage's tensor- and data-parallel ranks, alike) its compute, communication by
collective and link level, the pipeline bubble and its memory; a training step adds each role's backward pass,
optimizer and exposed data-parallel communication, and the time to train. In total the step's (or the batch's)
time, throughput, model FLOPs and MFU. JSON, CSV and table views.

Invariant: a device's step = its pipeline span (compute, blocking tensor-parallel collectives, waits) + exposed
data-parallel communication + its optimizer (both zero for inference); the step is the slowest device's. The JSON
keeps the single-device fields of accelsim.results.training (`step`, `memory` at the fullest device's peak,
`throughput`, `model_flops`, `mfu`, `time_to_train_seconds`) and adds `training`, `system`, `device_count` (all the
devices), `plan`, `devices` (one entry per role, with `count`: the tp x dp devices that play it) and
`communication`.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

from accelsim.results.result import Result
from accelsim.results.units import binary, seconds as show, si
from accelsim.results.training import duration

PARALLEL_SCHEMA_VERSION = 2
CATEGORIES = ("weights", "gradients", "optimizer", "activations", "workspace")
# what a training step's workspace holds (accelsim.parallel.train.rank_memory): the backward pass's own temporaries,
# ZeRO 3's gathered weights of one unit and the next, and the gradients being reduce-scattered
WORKSPACE = ("temporaries", "gathered_weights", "gradient_bucket")


@dataclass(frozen=True, kw_only=True)
class Role:
    stage: int
    device: int                       # the pipeline position (devices stage % pp hold stage `stage`)
    blocks: tuple[str, ...]
    result: Result                    # one rank of the stage, one micro-batch, simulated op by op
    model_flops: float                # the rank's share of the model's FLOPs in the step
    forward: float                    # seconds in the step, every micro-batch, with blocking collectives
    backward: float = 0.0             # training only, as are optimizer and exposed: zero for inference
    optimizer: float = 0.0
    bubble: float                     # waiting inside the pipeline's span
    exposed: float = 0.0              # data-parallel communication not hidden behind the backward pass
    communication: dict               # (collective, level) -> seconds on the links in the step
    memory: dict                      # by category, and peak (one rank of the stage)
    reduce_start: float = 0.0         # when its data-parallel reduction starts (its last backward pass's start)
    # tensor-parallel collectives of one pass, in program order: node, collective, phase, after / before (the
    # nodes it falls between), bytes (nccl-tests' size), seconds (each time; a pass runs once per micro-batch)
    collectives: list = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ParallelResult:
    """One training step (accelsim.parallel.train) or one batch of inference (accelsim.parallel.run, forward passes
    only) under a parallel plan; the views leave out what inference does not have."""
    training: bool                    # True: one training step; False: one batch of inference
    system: str
    devices: int
    plan: object                      # an accelsim.parallel.plan.Plan, not imported: accelsim.parallel has no
                                      # __init__, so import-linter reads it as accelsim, which imports accelsim.sim
    roles: list[Role]
    pipeline_seconds: float
    ends: list[float]                 # per pipeline position: when its last pass finished
    batch: int
    tokens_per_sample: int | None
    samples: int | None = None        # training only: the run's length, for the time to train
    simulated: int                    # distinct stage programs simulated (identical ranks and stages once)
    peak_flops: float                 # per device
    capacity: int                     # bytes per device
    notes: list[str] = field(default_factory=list)
    # the schedule: (device, F/B, micro-batch, stage, start, end)
    passes: list = field(default_factory=list, repr=False)
    hops: list = field(default_factory=list, repr=False)     # seconds from stage k to k + 1, and its link level
    link_levels: dict = field(default_factory=dict)          # group kind (tp, dp, pp) -> the level its traffic crosses
    model: dict = field(default_factory=dict)                # the whole model: name, source, parameters (once)

    def device_seconds(self, device: int) -> float:
        mine = [r for r in self.roles if r.device == device]
        return self.ends[device] + sum(r.exposed + r.optimizer for r in mine)

    @property
    def seconds(self) -> float:
        return max(self.device_seconds(d) for d in range(len(self.ends)))

    def device_memory(self, device: int) -> dict:
        return add_up([r.memory for r in self.roles if r.device == device])

    @property
    def memory(self) -> dict:
        fullest = max(range(len(self.ends)), key=lambda d: self.device_memory(d)["peak"])
        return {**self.device_memory(fullest), "capacity": self.capacity, "device": fullest}

    @property
    def fits(self) -> bool:
        return self.memory["peak"] <= self.capacity

    @property
    def model_flops(self) -> float:
        return sum(r.model_flops for r in self.roles) * self.plan.tp * self.plan.dp

    def mfu(self) -> float:
        return self.model_flops / (self.seconds * self.devices * self.peak_flops) if self.seconds else 0.0

    def throughput(self) -> dict:
        rate = {"samples_per_second": self.batch / self.seconds if self.seconds else 0.0}
        if self.tokens_per_sample:
            rate["tokens_per_second"] = rate["samples_per_second"] * self.tokens_per_sample
        return rate

    def communication(self) -> dict:
        total: dict[str, dict] = {}
        for r in self.roles:
            for (op, level), s in r.communication.items():
                entry = total.setdefault(f"{op}/{level}", {"collective": op, "level": level, "seconds": 0.0})
                entry["seconds"] = max(entry["seconds"], s)      # the busiest rank's links (they run at once)
        exposed = max((r.exposed for r in self.roles), default=0.0)
        return {"by_collective": list(total.values()), "exposed_seconds": exposed}

    def to_dict(self) -> dict:
        slowest = max(range(len(self.ends)), key=self.device_seconds)
        mine = [r for r in self.roles if r.device == slowest]
        steps = -(-self.samples // self.batch) if self.samples else None
        return {
            "version": PARALLEL_SCHEMA_VERSION, "training": self.training,
            **({"model": self.model} if self.model else {}), "system": self.system, "device_count": self.devices,
            "plan": {k: getattr(self.plan, k) for k in ("dp", "tp", "pp", "schedule", "chunks", "zero", "sp")}
            | {"microbatches": self.plan.microbatches} | ({"groups": True} if self.plan.groups else {}),
            "step": {"seconds": self.seconds, "forward": sum(r.forward for r in mine),
                     "backward": sum(r.backward for r in mine), "optimizer": sum(r.optimizer for r in mine),
                     "bubble": max(r.bubble for r in mine), "exposed_communication": sum(r.exposed for r in mine)},
            "memory": self.memory, "throughput": self.throughput(), "model_flops": self.model_flops,
            "mfu": self.mfu(), "batch": self.batch,
            "time_to_train_seconds": steps * self.seconds if steps else None,
            "devices_simulated": self.simulated,
            "devices": [{"stage": r.stage, "device": r.device, "count": self.plan.tp * self.plan.dp,
                         "blocks": list(r.blocks), "forward": r.forward, "backward": r.backward,
                         "optimizer": r.optimizer, "bubble": r.bubble, "exposed": r.exposed,
                         "communication": {f"{op}/{level}": s for (op, level), s in r.communication.items()},
                         "memory": r.memory, "collectives": r.collectives} for r in self.roles],
            "communication": self.communication(), "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=_plain) + "\n"

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["stage", "device", "blocks", "forward_s", "backward_s", "optimizer_s", "bubble_s",
                         "exposed_s", "communication_s", "memory_peak_bytes"])
        for r in self.roles:
            writer.writerow([r.stage, r.device, " ".join(r.blocks), r.forward, r.backward, r.optimizer, r.bubble,
                             r.exposed, sum(r.communication.values()), r.memory["peak"]])
        return buffer.getvalue()

    def table(self) -> str:
        """Per stage, then the totals. Inference has no backward pass, optimizer or data-parallel reduction: its
        table leaves those columns out and gives tokens/s (a decode step: a token per sequence)."""
        columns = [("forward", lambda r: r.forward)]
        if self.training:
            columns += [("backward", lambda r: r.backward), ("optim", lambda r: r.optimizer)]
        columns += [("bubble", lambda r: r.bubble), ("comm", lambda r: sum(r.communication.values()))]
        if self.training:
            columns.append(("exposed", lambda r: r.exposed))
        lines = [f"{self.system}, {self.devices} devices, {self.plan.text()}; {self.simulated} distinct stage "
                 f"programs simulated; {'one training step' if self.training else 'one batch of inference'}",
                 f"{'stage':>5}  {'blocks':<22} " + " ".join(f"{name:>9}" for name, _ in columns) + f" {'memory':>10}"]
        for r in self.roles:
            span = f"{r.blocks[0]}..{r.blocks[-1]}" if len(r.blocks) > 1 else (r.blocks[0] if r.blocks else "-")
            lines.append(f"{r.stage:>5}  {span[:22]:<22} " + " ".join(f"{show(get(r)):>9}" for _, get in columns)
                         + f" {binary(r.memory['peak']):>10}")
        rate = self.throughput()
        lines.append("")
        what = "step" if self.training else "batch"
        exposed = (f", exposed communication {show(self.communication()['exposed_seconds'])}" if self.training
                   else "")
        lines.append(f"{what} {show(self.seconds)}: pipeline {show(self.pipeline_seconds)}{exposed}")
        if self.training:
            tokens = f", {rate['tokens_per_second']:,.0f} tokens/s" if "tokens_per_second" in rate else ""
            lines.append(f"{rate['samples_per_second']:,.1f} samples/s{tokens}; model {si(self.model_flops, 'FLOP')} "
                         f"per step, MFU {self.mfu():.1%}")
        else:
            lines.append(_inference_rate(self, rate))
        for entry in self.communication()["by_collective"]:
            lines.append(f"  {entry['collective']} on {entry['level']}: {show(entry['seconds'])} per {what}")
        memory = self.memory
        kept = [c for c in CATEGORIES if self.training or memory[c] or c in ("weights", "activations")]
        split = ", ".join(f"{c} {binary(memory[c])}" for c in kept)
        fits = "" if self.fits else "  DOES NOT FIT"
        lines.append(f"memory {binary(memory['peak'])} of {binary(self.capacity)} per device ({split}){fits}")
        if "workspace_holds" in memory:
            holds = memory["workspace_holds"]
            lines.append("  workspace: " + ", ".join(f"{w.replace('_', ' ')} {binary(holds[w])}" for w in WORKSPACE
                                                     if holds[w] or w == "temporaries"))
        if "inputs" in memory:
            lines.append(f"  inputs {binary(memory['inputs'])} (the model's, every micro-batch's: a decode step's KV "
                         f"cache)")
        if self.samples:
            steps = -(-self.samples // self.batch)
            lines.append(f"time to train: {steps:,} steps, {duration(steps * self.seconds)}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _inference_rate(result: ParallelResult, rate: dict) -> str:
    """Tokens/s for a language model: the batch's tokens (a decode step: one per sequence; a prefill: batch x seq)
    over the batch's time; samples/s otherwise."""
    flops = f"model {si(result.model_flops, 'FLOP')} per batch, MFU {result.mfu():.1%}"
    if "tokens_per_second" not in rate:
        return f"{rate['samples_per_second']:,.1f} samples/s; {flops}"
    tokens = result.batch * result.tokens_per_sample
    return (f"{rate['tokens_per_second']:,.0f} tokens/s ({result.batch:,} sequence{'s' * (result.batch != 1)} x "
            f"{result.tokens_per_sample:,} token{'s' * (result.tokens_per_sample != 1)} = {tokens:,} "
            f"token{'s' * (tokens != 1)} per batch of {show(result.seconds)}); {flops}")


def add_up(memories: list[dict]) -> dict:
    """A device's memory from its stages' (a model chunk each, with `chunks`): each category, the peak, what the
    workspace holds (training) and the model's inputs (inference: accelsim.parallel.run)."""
    total = {c: sum(m[c] for m in memories) for c in CATEGORIES}
    total["peak"] = sum(total.values())
    if any("inputs" in m for m in memories):
        total["inputs"] = sum(m.get("inputs", 0) for m in memories)
    if any("workspace_holds" in m for m in memories):
        total["workspace_holds"] = {w: sum(m.get("workspace_holds", {}).get(w, 0) for m in memories)
                                    for w in WORKSPACE}
    return total


def _plain(value):
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")
