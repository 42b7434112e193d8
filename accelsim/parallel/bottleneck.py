"""A plan's bottleneck in words, as the planner's table prints it: what the slowest device spends its step on (its
largest share, then the next), and what its passes wait on, from its ops' times."""
from __future__ import annotations

from accelsim.arch.system import System
from accelsim.parallel.groups import groups, level_name


def bottleneck(result, sys_: System) -> str:
    """What the slowest device spends the step on, in words: its largest share, then the next."""
    slowest = max(range(len(result.ends)), key=result.device_seconds)
    mine = [r for r in result.roles if r.device == slowest]
    mb = result.plan.microbatches
    tp: dict[str, float] = {}
    for r in mine:
        for t in r.collectives:
            tp[t["collective"]] = tp.get(t["collective"], 0.0) + t["seconds"] * (1 if t["phase"] == "optimizer" else mb)
        if not result.training and not r.collectives:
            for (op, _), s in r.communication.items():
                if op != "sendrecv":
                    tp[op] = tp.get(op, 0.0) + s
    step = result.device_seconds(slowest) or 1.0
    tp_phase = {p: sum(t["seconds"] * mb for r in mine for t in r.collectives if t["phase"] == p)
                for p in ("forward", "backward")}
    if not result.training:
        tp_phase["forward"] = sum(tp.values())
    level = level_name(sys_, groups(result.plan.tp, result.plan.dp, result.plan.pp)["tp"])
    dp_level = level_name(sys_, groups(result.plan.tp, result.plan.dp, result.plan.pp)["dp"])
    named = sorted(tp, key=lambda k: -tp[k])
    shares = {
        "forward": sum(r.forward for r in mine) - tp_phase["forward"],
        "backward": sum(r.backward for r in mine) - tp_phase["backward"],
        "tp": sum(tp.values()),
        "bubble": mine[0].bubble,
        "exposed": sum(r.exposed for r in mine),
        "optimizer": sum(r.optimizer for r in mine),
    }
    bound = op_bound(mine)
    words = {
        "forward": lambda p: f"{bound}: forward {p:.0%}",
        "backward": lambda p: f"{bound}: backward {p:.0%}",
        "tp": lambda p: f"tensor-parallel {'/'.join(_SPOKEN.get(k, k) for k in named)} on {level} {p:.0%} of the step",
        "bubble": lambda p: f"pipeline bubble {p:.0%} of the step",
        "exposed": lambda p: f"exposed data-parallel reduction on {dp_level} {p:.0%} of the step",
        "optimizer": lambda p: f"optimizer update {p:.0%} of the step",
    }
    first, second = sorted(shares, key=lambda k: (-shares[k], k))[:2]
    text = words[first](shares[first] / step)
    if shares[second] > 0.1 * step:
        text += f" (then {words[second](shares[second] / step).replace(f'{bound}: ', '')})"
    return text


def op_bound(roles) -> str:
    """What the device's passes wait on, from its ops' times: 'compute-bound', 'memory-bound (hbm2)', 'latency-bound'
    or 'launch-bound', whichever class of op takes the most time. A decode step's matrix-vector products read every
    weight and the KV cache for a few MACs each: their time is the memory's, not the tensor cores'."""
    time_by: dict[str, float] = {}
    for r in roles:
        for op in r.result.ops:
            time_by[op.bound] = time_by.get(op.bound, 0.0) + op.seconds
    levels = {b: s for b, s in time_by.items() if b not in ("compute", "launch", "latency", "view")}
    classes = {"compute": time_by.get("compute", 0.0), "memory": sum(levels.values()),
               "latency": time_by.get("latency", 0.0), "launch": time_by.get("launch", 0.0)}
    top = max(classes, key=lambda k: (classes[k], k == "compute"))
    return f"memory-bound ({max(levels, key=lambda b: (levels[b], b))})" if top == "memory" else f"{top}-bound"


_SPOKEN = {"allreduce": "all-reduce", "allgather": "all-gather", "reducescatter": "reduce-scatter"}
