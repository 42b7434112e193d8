"""Tile fidelity: a compiled model's Program, priced, run on the numba engine -> per-op results (the default `run`).

Invariant: bytes are counted where the roofline counts them (compiler.targeting paths) and the engine only adds
time (contention, latency, dependencies, padding), so every kernel's cycles >= its slowest op's roofline cycles
(an epilogue in a systolic output stage runs beside its array and is charged only what it adds).
Orchestration only: codegen counts, accelsim.price prices, and the Arch and Program are unpacked here into the
plain arrays the numba kernels take.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelsim.arch import Arch
from accelsim.results.result import OpResult
from accelsim.price.compat import NATIVE, Pricing
from accelsim.price.energy import energy_j, with_promotion_j
from accelsim.price.program import launch_cycles, price
from accelsim.price.roofline import estimate_op
from accelsim.sim import output_stage
from accelsim.sim.fold import simulate_folded
from accelsim.sim.refill import refill
from compiler.codegen import Code, Fold, generate
from compiler.frozen import but
from compiler.ir import IR, IROp, Move
from compiler.mapping import Mapping, op_signature
from compiler.memo import Memo
from compiler.program import COMPUTE, LOAD, STORE
from compiler.targeting import compute_dtype


@dataclass(frozen=True)
class Timeline:
    """What the trace draws: the Program and when each row ran."""

    code: Code
    start: np.ndarray
    end: np.ndarray
    busy: np.ndarray                # cycles each row holds its resource (a transfer's latency excluded)
    op_names: list[str]
    arch: Arch
    beside: np.ndarray | None = None   # per op: runs beside the op before it (an epilogue in an output stage)


def simulate_ops(ir: IR, arch: Arch, mappings: dict[str, Mapping], pricing: Pricing = NATIVE) -> list[OpResult]:
    """Per-op results without a timeline, one op's Program in memory at a time (an op with the epilogue ops
    that run beside it, accelsim.sim.output_stage). Ops run one after another with nothing else overlapping
    across them, so an op simulated alone takes what it takes in sequence, and
    ops with the same signature and mapping (a decoder's 32 identical layers) are simulated once, in this
    process: a planner's stage programs share most of their ops."""
    done = _SIMULATED.get((arch, pricing))
    if done is None:
        done = _SIMULATED[arch, pricing] = Memo(f"accelsim.sim.tile.simulate_ops: {arch.name}", OP_CACHE)
    results, clock = [], 0
    sides = np.asarray(output_stage.beside(ir, arch, mappings), bool)
    anchors = np.flatnonzero(~sides)          # an op that runs beside one is simulated with its kernel's anchor
    bounds = [*anchors.tolist(), len(ir.ops)]
    for o, end in zip(bounds, bounds[1:]):
        ops = ir.ops[o:end]
        key = tuple([op_key(op, mappings.get(op.name)) for op in ops])
        found = done.get(key)
        if found is None:
            part, chosen = replace(ir, ops=ops), {op.name: mappings.get(op.name) for op in ops}
            # a long loop of identical tiles (a large batch) runs from a few of them, where the schedule settles
            found = done[key] = simulate_folded(part, arch, chosen, pricing, run_tiles, bound_of) or \
                run_tiles(part, arch, chosen, pricing)[0]
        began = clock
        for op, first in zip(ops, found):
            start = None if first.start_cycle is None else began + first.start_cycle
            # one copy per op (a twin's result names the twin, its start and its kernel)
            results.append(but(first, name=op.name, node=op.node, start_cycle=start, kernel=op.kernel))
            clock += first.cycles
    return results


def op_key(op: IROp, mapping: Mapping | None) -> tuple:
    """All an op's simulated run depends on besides the arch: ops with equal keys (a decoder's identical layers)
    are simulated once."""
    return (op_signature(op), getattr(op, "axes", None), getattr(op, "ops_per_element", None), op.op,
            op.kind, getattr(op, "view", None), op.launch, mapping and _mapping_key(mapping))


def _mapping_key(mapping: Mapping) -> tuple:
    """Every field of the mapping but the op's name, in order (a copy of its fields less one: a third of a loop's
    cost over them, asked once per op)."""
    fields = mapping.__dict__.copy()
    del fields["op"]
    return tuple(fields.values())


OP_CACHE = 100_000                                       # ops kept per (arch, pricing): a few hundred bytes each
# per (arch, pricing), of the last 8 (a sweep's points are new Archs): each op's results by what decides them
_SIMULATED: Memo[tuple, Memo[tuple, list[OpResult]]] = Memo("accelsim.sim.tile.simulate_ops", 8)


def run_tiles(ir: IR, arch: Arch, mappings: dict[str, Mapping], pricing: Pricing = NATIVE,
             folds: dict[str, tuple[Fold, ...]] | None = None) -> tuple[list[OpResult], Timeline]:
    """Every op's Program at once, with the timeline a trace draws; `folds`: ops whose Program keeps only part of
    their folded loops (compiler.codegen.fold), as accelsim.sim.fold runs them."""
    # numba (~0.4 s to import, ~0.25 s to load its cached kernels) only when an engine runs: a run that
    # accelsim.sim.cache answers never gets here
    from accelsim.engine.tile import attribute, schedule

    code = generate(ir, arch, mappings, folds)          # counting: rows, bytes, tile shapes
    prices = price(ir, arch, code, pricing)             # pricing: cycles per row
    program = code.program
    n_levels = len(arch.memory)
    kind = program["kind"].astype(np.int64)
    level = program["level"].astype(np.int64)
    dep = program["dep"].astype(np.int64)
    # a load waiting on a compute waits for its buffer slot: free once the compute has read it (refill: in a
    # level the YAML marks `refill: tile`, tile by tile), and a fused epilogue runs beside its array (output_stage)
    dep, on_release, shares, lead = refill(arch, program, dep, prices.occupancy)
    sides = output_stage.beside(ir, arch, mappings)
    op_of = program["op"].astype(np.int64)
    if shares is None and not sides.any():
        # nothing refilled by parts, nothing beside its array (every GPU and CPU): the rows in program order, a load
        # into a buffer slot free once the compute that read it leaves its unit; a stall is blamed on the
        # dependency that ended last
        start, end = schedule(prices.resource, prices.occupancy, prices.latency, dep, op_of, prices.resources,
                              on_release)
        span, busy, other, stall = attribute(kind, level, start, end, dep, code.op_rows, n_levels)
        return _results(ir, arch, code, prices, (span, span), busy, stall, start, end, sides)
    if shares is None:
        shares, lead = np.zeros(dep.shape), np.zeros(dep.shape, np.int64)
    order, extra, share = output_stage.pipeline(code, sides)
    dep = np.hstack([dep, extra[:, None]])
    on_release = np.hstack([on_release, np.zeros((len(dep), 1), bool)])
    shares = np.hstack([shares, share[:, None]])
    lead = np.hstack([lead, np.zeros((len(dep), 1), np.int64)])
    issued = np.empty_like(order)
    issued[order] = np.arange(len(order))
    start, end = (x[issued] for x in schedule(
        prices.resource[order], prices.occupancy[order], prices.latency[order],
        np.where(dep[order] >= 0, issued[np.maximum(dep[order], 0)], -1), op_of[order],
        prices.resources, on_release[order], shares[order], sides, lead[order]))
    span, busy, other, stall = attribute(kind, level, start, end, dep, code.op_rows, n_levels,
                                         _let_go(dep, on_release, shares, lead, start, end, prices))
    cycles = output_stage.charged(span, sides, code.op_rows, start, end)
    return _results(ir, arch, code, prices, (cycles, span), busy, stall, start, end, sides)


def _results(ir, arch: Arch, code, prices, spans, busy, stall, start, end, sides) -> tuple[list[OpResult], Timeline]:
    """Per-op results and the timeline from the schedule; spans: (cycles charged, cycles run) per op."""
    per_level = _per_op_level(code.program, len(ir.ops), len(arch.memory), prices.occupancy)
    results = [_op_result(i, op, arch, code, prices.rates[i], spans, busy, stall, per_level, start)
               for i, op in enumerate(ir.ops)]
    return results, Timeline(code, start, end, prices.occupancy, [op.name for op in ir.ops], arch, sides)


def _let_go(dep, on_release, share, lead, start, end, prices) -> np.ndarray:
    """int64[rows, deps]: when each dependency let its row go, as `schedule` reckons it (-1: none)."""
    d = np.maximum(dep, 0)
    done = np.where(on_release, start[d] + prices.occupancy[d], end[d])
    parted = start[d] + np.ceil(share * prices.occupancy[d]).astype(np.int64) + prices.latency[d]
    done = np.where(share > 0, parted, done) - lead
    return np.where(dep >= 0, done, -1)


def charged_stalls(stalls: dict[str, int], idle: int) -> dict[str, int]:
    """The stalls of an op's run, fitted into the idle cycles it is charged. An op of a kernel run beside its array
    (a fused epilogue) is charged part of its run or a little more (accelsim.sim.output_stage.charged): its waits
    are the same waits, so they keep their levels, scaled down where the charge is shorter than the run. Dropping
    them left a DRAM-bound conv with a fused BatchNorm as 66% "waiting on other" (a 64x64 array, ResNet-18)."""
    total = sum(stalls.values())
    if total <= idle:
        return stalls
    scaled = {n: c * idle // total for n, c in stalls.items()}
    return {n: c for n, c in scaled.items() if c}


def _per_op_level(program: np.ndarray, n_ops: int, n_levels: int, occupancy: np.ndarray) -> dict[str, np.ndarray]:
    """Bytes read (loads) and written (stores) and channel-busy cycles, per op and level."""
    key = program["op"].astype(np.int64) * n_levels + np.maximum(program["level"], 0)
    out = {}
    for name, mask, weight in (("read", program["kind"] == LOAD, program["bytes"]),
                               ("written", program["kind"] == STORE, program["bytes"]),
                               ("busy", program["kind"] != COMPUTE, occupancy)):
        out[name] = np.bincount(key[mask], weights=weight[mask], minlength=n_ops * n_levels).reshape(
            n_ops, n_levels).astype(np.int64)
    return out


def bound_of(busy: int, launch: int, channel: dict[str, int], ran: int) -> str:
    """The busiest resource, as the roofline takes the largest of its candidate times; a kernel's launch (a fixed
    cost, however little it computes) and waiting with nothing busy (the levels' latency) are resources of their
    own: a batch-1 bias add on a GPU is bound by its launch, not by compute at 0%. busy: compute cycles, launch
    included; channel: busy cycles per level; ran: the op's cycles."""
    candidates = {"compute": busy - launch, "launch": launch, **channel}
    bound = max(candidates, key=lambda n: candidates[n])
    return "latency" if ran - max(busy, max(channel.values(), default=0)) > candidates[bound] else bound


def _op_result(i: int, op: IROp, arch: Arch, code: Code, rate, span, busy, stall, per_level, start) -> OpResult:
    if isinstance(op, Move) and op.view:
        return estimate_op(op, arch)
    unit, dtype = rate
    clock = arch.clock_hz
    names = [lv.name for lv in arch.memory]
    read = {n: int(b) for n, b in zip(names, per_level["read"][i]) if b}
    written = {n: int(b) for n, b in zip(names, per_level["written"][i]) if b}
    moved = {n: read.get(n, 0) + written.get(n, 0) for n in names if n in read or n in written}
    rows = code.program[code.op_rows[i]:code.op_rows[i + 1]]
    computes = rows[rows["kind"] == COMPUTE]
    useful, padded = int(computes["useful"].sum()), int(computes["work"].sum())
    # charged: what the op adds to its kernel (a fused epilogue beside the array, less than it ran)
    cycles, ran = int(span[0][i]), int(span[1][i])
    busy_i = min(int(busy[i]), cycles)
    stalls = charged_stalls({n: int(c) for n, c in zip(names, stall[i]) if c}, cycles - busy_i)
    seconds = cycles / clock
    channel = {n: int(c) for n, c in zip(names, per_level["busy"][i]) if c}
    launch = launch_cycles(op, unit, arch, computes["work"]) if op.launch and len(computes) else 0
    bound = bound_of(int(busy[i]), launch, channel, ran)
    peak = unit.peak_per_second(dtype)
    return OpResult(
        name=op.name, node=op.node, op=op.op, kind=op.kind.value, shape=op.output.shape,
        dtype=compute_dtype(op).value, rate_dtype=dtype.value, unit=unit.name, macs=op.macs, ops=op.ops,
        bytes=op.nbytes, bytes_by_level=moved, compute_seconds=busy_i / clock,
        level_seconds={n: c / clock for n, c in channel.items()},
        latency_seconds=max((lv.latency_s for lv in arch.memory if lv.name in moved), default=0.0),
        seconds=seconds, cycles=cycles, bound=bound,
        utilisation=useful / (peak * (ran / clock)) if ran and useful else 0.0,
        energy_j=with_promotion_j(energy_j(unit, dtype, useful, arch.memory, read, written), op, arch),
        compute_cycles=busy_i, stall_cycles=cycles - busy_i, stall_cycles_by_level=stalls,
        bytes_read_by_level=read, bytes_written_by_level=written,
        accesses_by_level={lv.name: -(-moved[lv.name] // lv.access_bytes) for lv in arch.memory if lv.name in moved},
        work=padded, tiles=len(computes), start_cycle=int(start[code.op_rows[i]]) if len(rows) else None,
        kernel=op.kernel)
