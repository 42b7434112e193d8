"""A step on a system as a Chrome/Perfetto trace (JSON `traceEvents`): open it at ui.perfetto.dev.

One process per pipeline position (its devices are alike: one tensor rank of one replica stands for them) with a
track for its passes (each micro-batch's forward and backward, then the optimizer) and one for its data-parallel
reduction; one process for the links, a track per level, with the activations sent between stages and each stage's
gradient reduction. Invariant: timestamps are microseconds from the step's start, and a pass's slice spans exactly
the time the schedule gave it (blocking tensor-parallel collectives inside).
"""
from __future__ import annotations

import json

from compiler import output

US = 1e6
LINKS = 10_000           # the links' process id, after every device's


def trace_events(result) -> list[dict]:
    events: list[dict] = []
    positions = sorted({r.device for r in result.roles})
    for d in positions:
        events += _names(d, f"pipeline position {d} ({result.plan.tp * result.plan.dp} devices)",
                         {0: "passes", 1: "data-parallel reduction"})
    levels = sorted(set(result.link_levels.values()))
    events += _names(LINKS, f"links of {result.system}", {i: name for i, name in enumerate(levels)})
    for device, kind, mb, stage, start, end in result.passes:
        events.append({"name": f"{'forward' if kind == 'F' else 'backward'} mb {mb}", "ph": "X", "pid": device,
                       "tid": 0, "ts": start * US, "dur": (end - start) * US, "args": {"stage": stage}})
        hop = result.hops[stage] if kind == "F" and stage < len(result.hops) else \
            result.hops[stage - 1] if kind == "B" and 0 < stage <= len(result.hops) else 0.0
        if hop and (kind == "F" or result.training):
            tid = levels.index(result.link_levels["pp"])
            events.append({"name": f"{'activations' if kind == 'F' else 'gradients'} mb {mb} from stage {stage}",
                           "ph": "X", "pid": LINKS, "tid": tid, "ts": end * US, "dur": hop * US})
    for role in result.roles:
        end = result.ends[role.device]
        for (op, level), seconds in role.communication.items():
            if level != result.link_levels.get("dp") or op not in ("allreduce", "reducescatter") or \
                    result.plan.dp == 1:
                continue
            events.append({"name": f"{op} of stage {role.stage}'s gradients", "ph": "X", "pid": role.device, "tid": 1,
                           "ts": role.reduce_start * US, "dur": seconds * US})
            events.append({"name": f"{op} stage {role.stage}", "ph": "X", "pid": LINKS,
                           "tid": levels.index(level), "ts": role.reduce_start * US, "dur": seconds * US})
        if role.optimizer:
            events.append({"name": f"optimizer (stage {role.stage})", "ph": "X", "pid": role.device, "tid": 0,
                           "ts": (end + role.exposed) * US, "dur": role.optimizer * US})
    return events


def _names(pid: int, process: str, threads: dict[int, str]) -> list[dict]:
    out = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": process}},
           {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}]
    for tid, name in threads.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
    return out


def write_parallel_trace(result, path: str) -> None:
    text = json.dumps({"traceEvents": trace_events(result), "displayTimeUnit": "ns"})
    output.write_file(path, text)
