"""A parallel plan: how a step is split over the devices of a system, read from `--parallel dp=8,tp=8,pp=16`.

Ranks are numbered tensor-fastest, then data, then pipeline (Megatron-LM's order), so a tensor group is `tp`
neighbouring devices (inside a node when it fits), a data group strides by `tp` and a pipeline stage's devices by
`tp x dp`. `groups=N` is tp=N split along the model's own channel groups, as Krizhevsky et al. split AlexNet over
two GTX 580s (2012, sec. 3.2): each device holds half of every layer's kernels, the grouped convolutions read only
their own device's maps, and the devices exchange activations only into conv3 and the fully connected layers (and
each device's LRN normalises its own maps, as cuda-convnet did; plain tp gathers the maps for an exact LRN).
Invariant: dp x tp x pp equals the devices; every degree is a positive integer.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from compiler.errors import UserError

SCHEDULES = ("1f1b", "gpipe", "interleaved")
BUCKET = 25 * 2**20          # PyTorch DDP's bucket_cap_mb: gradients all-reduced 25 MiB at a time
SEARCH_S = 120.0             # the planner's default time limit, in seconds (accelsim.parallel.search)
SEARCH_BUDGET = 100_000      # the planner's default budget: candidate plans priced at most
KEYS = {"dp": "data-parallel degree", "tp": "tensor-parallel degree", "pp": "pipeline stages",
        "mb": "micro-batches per step and pipeline", "schedule": f"pipeline schedule ({', '.join(SCHEDULES)})",
        "chunks": "model chunks per device (interleaved schedule)", "zero": "ZeRO stage 0-3 (3: FSDP)",
        "sp": "sequence parallelism with tp (0 or 1)",
        "groups": "tp along the model's channel groups: AlexNet's two-GPU split of 2012 (groups=2; LRN per device)"}


@dataclass(frozen=True)
class Plan:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    mb: int | None = None          # micro-batches per step in each pipeline (default: pp, or 1 without one)
    schedule: str = "1f1b"
    chunks: int = 1
    zero: int = 0
    sp: bool = False
    groups: bool = False           # tp follows the model's channel groups (AlexNet's two GPUs)

    @property
    def devices(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def microbatches(self) -> int:
        return self.mb or (1 if self.pp == 1 else 4 * self.pp)

    def text(self) -> str:
        parts = [f"dp={self.dp}", f"{'groups' if self.groups else 'tp'}={self.tp}", f"pp={self.pp}"]
        if self.pp > 1 or self.mb:
            parts.append(f"mb={self.microbatches}")
        if self.pp > 1:
            parts.append(f"schedule={self.schedule}" + (f",chunks={self.chunks}" if self.chunks > 1 else ""))
        if self.zero:
            parts.append(f"zero={self.zero}")
        if self.sp:
            parts.append("sp=1")
        return ",".join(parts)


def parse_plan(text: str | None, devices: int | None = None) -> Plan:
    """`dp=8,tp=8,pp=16[,mb=64,schedule=1f1b,chunks=2,zero=1,sp=1]` or `groups=2` (tp=2 along the model's channel
    groups); a degree left out is 1, but a plan of one degree given and `devices` known takes dp as the rest (`tp=8`
    on 64 devices is dp=8, tp=8)."""
    values: dict = {}
    for item in (text or "").replace(" ", "").split(","):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(f"--parallel: unknown key {key!r}; {hint}allowed: "
                            f"{', '.join(f'{k} ({v})' for k, v in KEYS.items())}")
        if not eq:
            raise UserError(f"--parallel: {item!r} needs a value ({key}=...)")
        if key in values:
            raise UserError(f"--parallel: {key} is given twice ({key}={values[key]}, {item}); give each once")
        values[key] = value if key == "schedule" else _integer(key, value)
    if "groups" in values:
        values["tp"] = _grouped(values.pop("groups"), values.get("tp"))
        values["groups"] = True
    schedule = values.get("schedule", "1f1b")
    if schedule not in SCHEDULES:
        raise UserError(f"--parallel: schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
    plan = check(Plan(**{k: (bool(v) if k == "sp" else v) for k, v in values.items()}), None)
    if devices is not None and "dp" not in values and devices % (plan.tp * plan.pp) == 0:
        plan = replace(plan, dp=devices // (plan.tp * plan.pp))
    return check(plan, devices)


def check(plan: Plan, devices: int | None) -> Plan:
    for key in ("dp", "tp", "pp", "chunks"):
        if getattr(plan, key) < 1:
            raise UserError(f"--parallel: {key}={getattr(plan, key)} must be at least 1")
    if plan.mb is not None and plan.mb < 1:
        raise UserError(f"--parallel: mb={plan.mb} must be at least 1")
    if not 0 <= plan.zero <= 3:
        raise UserError(f"--parallel: zero={plan.zero}: ZeRO stages are 0 (none), 1 (optimizer state), 2 (and "
                        f"gradients), 3 (and weights, as FSDP)")
    if plan.groups and plan.tp == 1:
        raise UserError("--parallel: groups splits each layer's channel groups over devices; it needs at least 2")
    if plan.sp and plan.tp == 1:
        raise UserError("--parallel: sp=1 (sequence parallelism) splits the tensor-parallel group's tokens; it needs "
                        "tp above 1")
    if plan.chunks > 1 and plan.schedule != "interleaved":
        raise UserError(f"--parallel: chunks={plan.chunks} applies to schedule=interleaved")
    if devices is not None and plan.devices != devices and plan.groups:
        raise UserError(f"--parallel {plan.text()}: groups={plan.tp} puts every layer's channel groups on {plan.tp} "
                        f"devices, so dp x groups x pp = {plan.dp} x {plan.tp} x {plan.pp} = {plan.devices}, but the "
                        f"run has {devices} devices")
    if devices is not None and plan.devices != devices:
        raise UserError(f"--parallel {plan.text()}: dp x tp x pp = {plan.dp} x {plan.tp} x {plan.pp} = "
                        f"{plan.devices}, but the run has {devices} devices")
    return plan


def _grouped(groups: int, tp: int | None) -> int:
    if groups < 2:
        raise UserError(f"--parallel: groups={groups} must be at least 2 (the devices a layer's groups go to)")
    if tp is not None and tp != groups:
        raise UserError(f"--parallel: groups={groups} is tensor parallelism of degree {groups}; it cannot go with "
                        f"tp={tp}")
    return groups


def _integer(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--parallel: {key}={value!r} must be an integer") from None
