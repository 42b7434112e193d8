"""An op whose nest repeats loops of identical tiles many times (a batch of 512, a vocabulary of 50,257), simulated
from a few of their iterations: the cost of simulating follows the tiles that differ, not the batch.

Invariant: the result is the whole op's, exactly, wherever the schedule is periodic over the folded loops. The
engine issues rows in order, each at the max of its dependencies' ends and its resource's free time (a max-plus
system), so once one iteration of identical rows runs exactly as the one before it, shifted, every further one
does too, and each adds the same cycles, stalls, bytes and work; for an inner loop, in every iteration of the loops
around it. With f(head) the integer counts of the op simulated keeping `head` leading iterations of a folded loop
and its last (compiler.codegen.fold), the op is taken as periodic when f(head) - f(head - 2) = f(head + 2) - f(head)
in every count (two at a time: double buffers may alternate) and the waits do not shrink; then
f(trips - 1) = f(head) + (trips - 1 - head) / 2 x (f(head + 2) - f(head)). Otherwise head doubles, and an op that
has not settled by MAX_HEAD is simulated with one folded loop fewer. With two folded loops, each f of the first is
itself extrapolated along the second: the counts of the op with the first loop cut and the second whole.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from accelsim.results.result import OpResult
from accelsim.price.clock import CYCLE_LIMIT
from accelsim.price.energy import energy_j, with_promotion_j
from accelsim.price.program import launch_cycles
from compiler.codegen import Fold, folds_for
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch

PERIOD = 2        # iterations compared at a time: a double-buffered loop may settle into a period of two
MAX_HEAD = 64     # past this many leading iterations a loop that has not settled is not folded
COUNTS = ("cycles", "compute_cycles", "stall_cycles", "work", "tiles")     # integers, additive over tiles
BY_LEVEL = ("stall_cycles_by_level", "bytes_read_by_level", "bytes_written_by_level", "bytes_by_level")


def simulate_folded(ir, arch: Arch, mappings, pricing, run_tiles, bound) -> list[OpResult] | None:
    """The results of `ir`'s one op from its folded Programs, run by `run_tiles` (accelsim.sim.tile.run_tiles, taking
    `folds`), its bound named by `bound` (accelsim.sim.tile.bound_of); None if it does not fold or never settles."""
    if len(ir.ops) != 1 or mappings.get(ir.ops[0].name) is None:
        return None
    op = ir.ops[0]

    simulated = {}

    def counts(kept: tuple[Fold, ...]) -> dict:      # a Program kept at the same heads is simulated once
        if kept not in simulated:
            simulated[kept] = _integers(run_tiles(ir, arch, mappings, pricing, {op.name: kept})[0][0], arch)
        return simulated[kept]

    folds = folds_for(op, mappings[op.name])
    for n in range(len(folds), 0, -1):                # both loops folded, else the longest alone
        whole = extrapolated(folds[:n], (), counts)
        if whole is not None:
            break
    else:
        return None
    if not whole["cycles"] < CYCLE_LIMIT:      # Python ints here; what reads them next is int64
        tiles = " x ".join(f"{fold.trips:,}" for fold in folds[:n])
        raise UserError(f"op {op.name!r}: its {tiles} repeated tiles take {whole['cycles']:.3g} cycles, more than "
                        f"the 2^62 the engine counts in 64-bit integers (--fidelity roofline prices any size)")
    return [_result(op, whole.pop("result"), whole, arch, bound)]


def extrapolated(folds: tuple[Fold, ...], kept: tuple[Fold, ...], counts) -> dict | None:
    """The integer counts of the op with `kept` cut as they say and `folds` whole, each extrapolated from a few of
    its iterations (the first fold's along the counts of the rest, recursively); None if one never settles."""
    if not folds:
        return counts(kept)
    fold, rest = folds[0], folds[1:]
    head = fold.head
    while head <= MAX_HEAD and fold.trips >= 4 * (head + 2):
        head += (fold.trips - 1 - head) % PERIOD          # so that whole periods lead to the loop's last iteration
        points = []
        for h in (head - PERIOD, head, head + PERIOD):
            points.append(extrapolated(rest, kept + (fold.with_head(h),), counts))
            if points[-1] is None:          # a fold inside never settles: give up this set of folds (bounded work)
                return None
        before, at, after = points
        step = _difference(before, at)
        if step == _difference(at, after) and _waits_grow(step):
            periods = (fold.trips - 1 - head) // PERIOD
            return {key: _line(at[key], step[key], periods) if key != "result" else at[key] for key in at}
        head *= 2
    return None


def _integers(result: OpResult, arch: Arch) -> dict:
    """The integer counts of an op's result, additive over its tiles: those it holds, and those its seconds and
    utilisation were derived from (each level's busy cycles, the useful MACs)."""
    clock = arch.clock_hz
    peak = _unit(result, arch).peak_per_second(DType(result.rate_dtype))
    out = {f: getattr(result, f) for f in COUNTS}
    out.update({f: dict(getattr(result, f)) for f in BY_LEVEL})
    out["level_cycles"] = {n: round(s * clock) for n, s in result.level_seconds.items()}
    out["useful"] = round(result.utilisation * (peak * (result.cycles / clock)))
    out["result"] = result
    return out


def _difference(a: dict, b: dict) -> dict:
    """What b counts more than a, key by key (and level by level)."""
    out = {}
    for key in a:
        if isinstance(a[key], dict):
            out[key] = {n: b[key].get(n, 0) - a[key].get(n, 0) for n in a[key].keys() | b[key].keys()}
        elif key != "result":
            out[key] = b[key] - a[key]
    return out


def _waits_grow(step: dict) -> bool:
    """Whether more iterations add waiting (or none): fewer waits with more of them means a wait they hide is still
    being absorbed, a transient, not the period."""
    return step["cycles"] >= step["compute_cycles"] and min(step["stall_cycles_by_level"].values(), default=0) >= 0


def _line(value, step, times: int):
    if isinstance(value, dict):
        return {n: value.get(n, 0) + times * step.get(n, 0) for n in value.keys() | step.keys()}
    return value + times * step


def _unit(result: OpResult, arch: Arch):
    return next(u for u in arch.compute if u.name == result.unit)


def _result(op, at: OpResult, whole: dict, arch: Arch, bound) -> OpResult:
    """The whole op's result from its integer counts, derived as accelsim.sim.tile derives an op's."""
    clock = arch.clock_hz
    unit, dtype = _unit(at, arch), DType(at.rate_dtype)

    def per_level(counts: dict) -> dict:          # in the arch's order, levels that count nothing left out
        return {lv.name: counts[lv.name] for lv in arch.memory if counts.get(lv.name)}

    levels = {f: per_level(whole[f]) for f in BY_LEVEL}
    busy, useful = per_level(whole["level_cycles"]), whole["useful"]
    cycles, moved = whole["cycles"], levels["bytes_by_level"]
    launch = launch_cycles(op, unit, arch, np.array([whole["work"]])) if op.launch else 0
    return replace(
        at, **{f: whole[f] for f in COUNTS}, **levels, seconds=cycles / clock,
        compute_seconds=whole["compute_cycles"] / clock, level_seconds={n: c / clock for n, c in busy.items()},
        utilisation=useful / (unit.peak_per_second(dtype) * (cycles / clock)) if cycles and useful else 0.0,
        energy_j=with_promotion_j(energy_j(unit, dtype, useful, arch.memory, levels["bytes_read_by_level"],
                                           levels["bytes_written_by_level"]), op, arch),
        accesses_by_level={lv.name: -(-moved[lv.name] // lv.access_bytes) for lv in arch.memory if lv.name in moved},
        bound=bound(whole["compute_cycles"], launch, busy, cycles))
