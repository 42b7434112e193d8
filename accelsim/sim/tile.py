"""Tile fidelity: map -> codegen -> compute cycles -> engine -> per-op results (the default `run`).

Invariant: bytes are counted where the roofline counts them (compiler.target.placement paths) and the engine only
adds time (contention, latency, dependencies, padding), so every op's cycles >= its roofline cycles.
Orchestration only: the Arch and Program are unpacked here into the plain arrays the numba kernels take.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compiler.codegen import Code, generate
from compiler.ir import IR, Einsum, IROp, Kind, Move
from compiler.mapping import Mapping, op_signature
from compiler.program import COMPUTE, LOAD, STORE
from accelsim.price import compute
from accelsim.arch import Arch
from accelsim.engine.tile import attribute, schedule
from accelsim.out.result import OpResult
from accelsim.price.roofline import estimate_op
from compiler.target import compute_dtype, pick_unit, units_used


@dataclass(frozen=True)
class Timeline:
    """What the trace draws: the Program and when each row ran."""

    code: Code
    start: np.ndarray
    end: np.ndarray
    busy: np.ndarray                # cycles each row holds its resource (a transfer's latency excluded)
    op_names: list[str]
    arch: Arch


def mappings_for(ir: IR, arch: Arch, budget: int | None = None, compat: str | None = None) -> dict[str, Mapping]:
    from compiler.map import DEFAULT_BUDGET, map_ir
    from accelsim.price.cost import reporter

    return map_ir(ir, arch, reporter(arch, ir, compat), budget or DEFAULT_BUDGET)


def simulate_ops(ir: IR, arch: Arch, mappings: dict[str, Mapping] | None = None, budget: int | None = None,
                 compat: str | None = None) -> list[OpResult]:
    """Per-op results without a timeline, one op's Program in memory at a time. Ops run one after another
    with nothing overlapping across them, so an op simulated alone takes what it takes in sequence, and
    ops with the same signature and mapping (a decoder's 32 identical layers) are simulated once."""
    mappings = mappings if mappings is not None else mappings_for(ir, arch, budget, compat)
    done: dict[tuple, OpResult] = {}
    results, clock = [], 0
    for op in ir.ops:
        mapping = mappings.get(op.name)
        key = (op_signature(op), getattr(op, "axes", None), getattr(op, "ops_per_element", None), op.op,
               op.kind, getattr(op, "view", None), mapping and replace(mapping, op=""))
        if key not in done:
            alone = replace(ir, ops=[op])
            (done[key],), _ = simulate(alone, arch, {op.name: mappings[op.name]}, compat=compat)
        first = done[key]
        start = None if first.start_cycle is None else clock
        results.append(replace(first, name=op.name, node=op.node, start_cycle=start))
        clock += first.cycles
    return results


def simulate(ir: IR, arch: Arch, mappings: dict[str, Mapping] | None = None, budget: int | None = None,
             compat: str | None = None) -> tuple[list[OpResult], Timeline]:
    """Every op's Program at once, with the timeline a trace draws."""
    mappings = mappings if mappings is not None else mappings_for(ir, arch, budget, compat)
    code = generate(ir, arch, mappings)
    program = code.program
    rates = [rate_of(op, arch, code.mappings.get(op.name)) for op in ir.ops]
    fill_cycles(ir, arch, code, rates, compat)
    n_levels = len(arch.memory)
    kind = program["kind"].astype(np.int64)
    level = program["level"].astype(np.int64)
    transfer = kind != COMPUTE
    latency_cycles = np.array([lv.latency_cycles for lv in arch.memory], np.int64)
    safe = np.where(transfer, level, 0)
    bytes_per_cycle = _bandwidths(ir, arch, code, rates)[program["op"], safe]
    # A compute holds its unit for its steady cycles; its tail (skew and drain) runs under the next compute
    occupancy = np.where(transfer, np.ceil(program["bytes"] / bytes_per_cycle - 1e-9).astype(np.int64),
                         program["cycles"] - program["tail"])
    latency = np.where(transfer, latency_cycles[safe], program["tail"])
    resource = np.where(transfer, level, n_levels + program["unit"].astype(np.int64))
    dep = program["dep"].astype(np.int64)
    # a load waiting on a compute waits for its buffer slot: free once the compute has read it
    on_release = (kind[:, None] == LOAD) & (dep >= 0) & (kind[np.maximum(dep, 0)] == COMPUTE)
    start, end = schedule(resource, occupancy, latency, dep, program["op"].astype(np.int64),
                          n_levels + len(arch.compute), on_release)
    span, busy, other, stall = attribute(kind, level, start, end, dep, code.op_rows, n_levels)
    per_level = _per_op_level(program, len(ir.ops), n_levels, occupancy)
    results = [_op_result(i, op, arch, code, rates[i], span, busy, stall, per_level, start)
               for i, op in enumerate(ir.ops)]
    return results, Timeline(code, start, end, occupancy, [op.name for op in ir.ops], arch)


def rate_of(op: IROp, arch: Arch, mapping: Mapping | None):
    """(unit, dtype whose rate applies): the mapping's unit for an Einsum, else the roofline's choice."""
    unit, rate = pick_unit(op, arch)
    if isinstance(op, Einsum) and mapping is not None and mapping.unit != unit.name:
        unit = next(u for u in arch.compute if u.name == mapping.unit)
        rate = next((d for d in (compute_dtype(op), rate) if unit.supports(d)), unit.dtypes[0])
    return unit, rate


def _bandwidths(ir: IR, arch: Arch, code: Code, rates) -> np.ndarray:
    """Bytes per arch cycle of each level's channel for each op: an Einsum spread over 8 of 132 SMs draws
    on 8 SMs' shared memories, not 132 (the cost model's rule); vector ops use every instance."""
    per_instance = np.array([lv.bandwidth_bytes_per_s for lv in arch.memory]) / arch.clock_hz
    instances = np.array([lv.instances for lv in arch.memory])
    out = np.empty((len(ir.ops), len(arch.memory)))
    for i, op in enumerate(ir.ops):
        unit = rates[i][0]
        used = units_used(code.mappings[op.name], unit) if isinstance(op, Einsum) else unit.count
        out[i] = per_instance * np.minimum(instances, used)
    return out


def fill_cycles(ir: IR, arch: Arch, code: Code, rates, compat: str | None) -> None:
    """The compute model prices each compute row (its folds, fill and drain) in arch cycles, and says how much
    of that the unit overlaps with its next row (`tail`)."""
    program = code.program
    for i, op in enumerate(ir.ops):
        tiles = code.tiles[i]
        if tiles is None or len(tiles.rows) == 0:
            continue
        rows = program[tiles.rows]
        unit, rate = rates[i]
        if op.kind == Kind.einsum:
            cycles, tail = compute.matrix_split(rows["m"], rows["n"], rows["k"], unit, arch,
                                                code.mappings[op.name], rate, compat)
        else:
            cycles = compute.vector_cycles(rows["work"], unit, rate, arch)
            tail = np.zeros_like(cycles)
        program["cycles"][tiles.rows] = cycles
        program["tail"][tiles.rows] = tail


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


def _op_result(i: int, op: IROp, arch: Arch, code: Code, rate, span, busy, stall, per_level, start) -> OpResult:
    if isinstance(op, Move) and op.view:
        return estimate_op(op, arch)
    unit, dtype = rate
    clock = arch.clock_hz
    names = [lv.name for lv in arch.memory]
    read = {n: int(b) for n, b in zip(names, per_level["read"][i]) if b}
    written = {n: int(b) for n, b in zip(names, per_level["written"][i]) if b}
    moved = {n: read.get(n, 0) + written.get(n, 0) for n in names if n in read or n in written}
    stalls = {n: int(c) for n, c in zip(names, stall[i]) if c}
    rows = code.program[code.op_rows[i]:code.op_rows[i + 1]]
    computes = rows[rows["kind"] == COMPUTE]
    useful, padded = int(computes["useful"].sum()), int(computes["work"].sum())
    energy = {unit.name: useful * unit.energy_per_action(dtype)} if useful else {}
    for lv in arch.memory:
        joules = read.get(lv.name, 0) * lv.energy_per_byte() + written.get(lv.name, 0) * lv.energy_per_byte(True)
        if joules:
            energy[lv.name] = joules
    cycles = int(span[i])
    seconds = cycles / clock
    # the bound is the busiest resource, as the roofline takes the largest of its candidate times
    channel = {n: int(c) for n, c in zip(names, per_level["busy"][i]) if c}
    worst = max(channel, key=lambda n: channel[n], default=None)
    bound = "compute" if worst is None or busy[i] >= channel[worst] else worst
    peak = unit.peak_per_second(dtype)
    return OpResult(
        name=op.name, node=op.node, op=op.op, kind=op.kind.value, shape=op.output.shape,
        dtype=compute_dtype(op).value, rate_dtype=dtype.value, unit=unit.name, macs=op.macs, ops=op.ops,
        bytes=op.nbytes, bytes_by_level=moved, compute_seconds=int(busy[i]) / clock,
        level_seconds={n: c / clock for n, c in channel.items()},
        latency_seconds=max((lv.latency_s for lv in arch.memory if lv.name in moved), default=0.0),
        seconds=seconds, cycles=cycles, bound=bound,
        utilisation=useful / (peak * seconds) if seconds and useful else 0.0, energy_j=energy,
        compute_cycles=int(busy[i]), stall_cycles=cycles - int(busy[i]), stall_cycles_by_level=stalls,
        bytes_read_by_level=read, bytes_written_by_level=written,
        accesses_by_level={lv.name: -(-moved[lv.name] // lv.access_bytes) for lv in arch.memory if lv.name in moved},
        work=padded, tiles=len(computes), start_cycle=int(start[code.op_rows[i]]) if len(rows) else None)
