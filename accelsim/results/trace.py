"""A tile-level run as a Chrome/Perfetto trace (JSON `traceEvents`): open it at ui.perfetto.dev.

One track per DMA channel (memory level) and per compute unit, plus one for the ops. Invariant: slices
on a track never overlap, because each shows the time its row held the resource (a transfer's pipelined
latency is in `args`, not in the slice), and timestamps are microseconds at the arch clock.
"""
from __future__ import annotations

import json

import numpy as np

from compiler import output
from compiler.errors import UserError
from compiler.program import COMPUTE, LOAD, STORE

OPS_TRACK = 0          # ops running beside the one before them (a fused epilogue in a systolic output stage) go
                       # to tracks -1, -2, ...: the first of a kernel's epilogue ops, its second, ...


def trace_events(timeline) -> list[dict]:
    arch, program = timeline.arch, timeline.code.program
    n_levels = len(arch.memory)
    us = 1e6 / arch.clock_hz
    beside = np.zeros(len(timeline.op_names), bool) if timeline.beside is None else timeline.beside
    depth = np.zeros(len(beside), np.int64)
    for i in range(1, len(beside)):
        depth[i] = depth[i - 1] + 1 if beside[i] else 0
    names = {OPS_TRACK: "ops", **{-d: f"ops beside the array ({d})" for d in range(1, int(depth.max(initial=0)) + 1)}}
    names.update({1 + i: f"DMA {lv.name}" for i, lv in enumerate(arch.memory)})
    names.update({1 + n_levels + i: f"compute {u.name}" for i, u in enumerate(arch.compute)})
    write = 1 + n_levels + len(arch.compute)          # a level's write port (`write_port`): a track of its own
    names.update({write + i: f"DMA {lv.name} write" for i, lv in enumerate(arch.memory) if lv.write_port_bytes_per_s})
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": f"accelsim {arch.name}"}}]
    events += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
               for tid, name in names.items()]
    events += [{"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}}
               for tid in names]
    rows = timeline.code.op_rows
    for i, name in enumerate(timeline.op_names):
        lo, hi = rows[i], rows[i + 1]
        if hi > lo:
            t0, t1 = int(timeline.start[lo:hi].min()), int(timeline.end[lo:hi].max())
            events.append({"name": name, "ph": "X", "pid": 1, "tid": -int(depth[i]), "ts": t0 * us,
                           "dur": (t1 - t0) * us})
    kind, level, unit = program["kind"], program["level"], program["unit"]
    ported = np.array([lv.write_port_bytes_per_s > 0 for lv in arch.memory] + [False])[level]
    track = np.where(kind == COMPUTE, 1 + n_levels + unit, np.where((kind == STORE) & ported, write + level, 1 + level))
    for r in np.flatnonzero(timeline.busy > 0):
        op = timeline.op_names[program["op"][r]]
        if kind[r] == COMPUTE:
            label, args = f"{op} compute", {"m": int(program["m"][r]), "n": int(program["n"][r]),
                                            "k": int(program["k"][r]), "work": int(program["work"][r])}
        else:
            operand = "out" if program["operand"][r] == -2 else f"in{program['operand'][r]}"
            label = f"{op} {'load' if kind[r] == LOAD else 'store'} {operand}"
            args = {"bytes": int(program["bytes"][r]), "done_us": float(timeline.end[r] * us)}
        events.append({"name": label, "ph": "X", "pid": 1, "tid": int(track[r]), "ts": float(timeline.start[r] * us),
                       "dur": float(timeline.busy[r] * us), "args": args})
    return events


def write_trace(result, path: str) -> None:
    if result.timeline is None:
        raise UserError("--trace needs the tile-level timeline: run with --fidelity tile")
    text = json.dumps({"traceEvents": trace_events(result.timeline), "displayTimeUnit": "ns"})
    output.write_file(path, text)
