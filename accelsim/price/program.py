"""Pricing a Program: what each row costs in arch cycles, from the counts codegen wrote and the arch's figures.

Codegen counts (rows, bytes, tile shapes, MACs); this module prices them (compute cycles per row from the
compute models, transfer cycles from each level's bandwidth); the engine only schedules the priced rows.
Invariant: a transfer holds its level's channel for bytes / bandwidth cycles, never less, so the engine can
only add time to what the roofline counts.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accelsim.arch import Arch, ArchError
from accelsim.price.clock import CYCLE_LIMIT, whole_cycles
from accelsim.price.compat import Pricing
from accelsim.price.compute import vector_cycles, with_promotion
from compiler.codegen import Code
from compiler.dtypes import DType
from compiler.hardware import ComputeUnit
from compiler.ir import IR, Einsum, IROp, OpKind
from compiler.mapping import Mapping
from compiler.program import COMPUTE, STORE
from compiler.targeting import compute_dtype, pick_unit, units_used

Rate = tuple[ComputeUnit, DType]    # (unit, the dtype whose rate applies)


@dataclass(frozen=True)
class Prices:
    """Per Program row: the resource it holds (a level's channel, or a unit after the levels), for how many
    cycles, and the latency after that before its result is there."""

    rates: list[Rate]           # per op: (unit, the dtype whose rate applies)
    resource: np.ndarray        # level index for transfers, len(memory) + unit index for computes, then write ports
    occupancy: np.ndarray       # cycles the row holds its resource
    latency: np.ndarray         # transfers: the level's latency; computes: the tail the next compute overlaps
    resources: int              # levels + compute units + levels' write ports


def rate_of(op: IROp, arch: Arch, mapping: Mapping | None) -> Rate:
    """(unit, dtype whose rate applies): the mapping's unit for an Einsum, else the roofline's choice."""
    unit, rate = pick_unit(op, arch)
    if isinstance(op, Einsum) and mapping is not None and mapping.unit != unit.name:
        unit = next(u for u in arch.compute if u.name == mapping.unit)
        rate = next((d for d in (compute_dtype(op), rate) if unit.supports(d)), unit.dtypes[0])
    return unit, rate


def price(ir: IR, arch: Arch, code: Code, pricing: Pricing) -> Prices:
    program = code.program
    rates = [rate_of(op, arch, code.mappings.get(op.name)) for op in ir.ops]
    cycles, tail = compute_cycles(ir, arch, code, rates, pricing)
    n_levels = len(arch.memory)
    kind = program["kind"]
    transfer = kind != COMPUTE
    safe = np.where(transfer, program["level"].astype(np.int64), 0)
    latency_cycles = np.array([lv.latency_cycles for lv in arch.memory], np.int64)
    # a level with a write port (`write_port` in the YAML): its stores hold the port, at the port's share of the
    # level's bandwidth, and its loads the rest; the port is a resource after the compute units
    port_share = np.array([lv.write_port_bytes_per_s / lv.bandwidth_bytes_per_s for lv in arch.memory])
    stored = (kind == STORE) & (port_share[safe] > 0)
    share = np.where(stored, port_share[safe], 1 - port_share[safe])
    bytes_per_cycle = bandwidths(ir, arch, code, rates)[program["op"], safe] * share
    # A compute holds its unit for its steady cycles; its tail (skew and drain) runs under the next compute
    occupancy = np.where(transfer, _transfer_cycles(program["bytes"], bytes_per_cycle, transfer, safe, stored, arch),
                         cycles - tail)
    latency = np.where(transfer, latency_cycles[safe], tail)
    _check_total(ir, arch, occupancy, latency)
    ports = n_levels + len(arch.compute)
    resource = np.where(transfer, np.where(stored, ports + safe, safe), n_levels + program["unit"].astype(np.int64))
    return Prices(rates, resource, occupancy, latency, ports + n_levels)


def _transfer_cycles(nbytes: np.ndarray, bytes_per_cycle: np.ndarray, transfer: np.ndarray, level: np.ndarray,
                     stored: np.ndarray, arch: Arch) -> np.ndarray:
    """Whole cycles each transfer holds its channel (0 for computes); an ArchError naming the level's key where
    a count is out of the engine's range (1 GB at 1e-9 B/s, a write port of 1e-300 B/s)."""
    with np.errstate(over="ignore", divide="ignore"):
        cycles = np.where(transfer, nbytes / bytes_per_cycle - 1e-9, 0.0)
    bad = transfer & ~(cycles < CYCLE_LIMIT)
    if not bad.any():
        whole: np.ndarray = np.ceil(cycles).astype(np.int64)
        return whole
    i = int(np.argmax(bad))
    key = "write_port" if stored[i] else "bandwidth"
    lv = arch.memory[level[i]]
    speed = lv.write_port_bytes_per_s if stored[i] else lv.bandwidth_bytes_per_s
    return whole_cycles(cycles, f"{arch.source_file}: memory[{level[i]}].{key} ({lv.name}): "
                                f"{int(nbytes[i]):,} B at {speed:.3g} B/s")


def _check_total(ir: IR, arch: Arch, occupancy: np.ndarray, latency: np.ndarray) -> None:
    """The rows priced together (one op, or an op and the epilogues beside it) must not add up past the
    engine's range either: each row under 2^62 cycles can still sum past 2^63."""
    total = float(occupancy.sum(dtype=np.float64) + latency.sum(dtype=np.float64))
    if not total < CYCLE_LIMIT:
        raise ArchError(f"{arch.source_file}: op {ir.ops[0].name!r} would take {total:.3g} cycles, more than the "
                        f"2^62 the engine counts in 64-bit integers: check the file's bandwidths and clocks")


def bandwidths(ir: IR, arch: Arch, code: Code, rates: list[Rate]) -> np.ndarray:
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


def compute_cycles(ir: IR, arch: Arch, code: Code, rates: list[Rate],
                   pricing: Pricing) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, tail) per Program row (0 for transfers): the compute model prices each compute row (its folds,
    fill and drain) in arch cycles, and says how much of that the unit overlaps with its next row (`tail`)."""
    program = code.program
    cycles = np.zeros(len(program), np.int64)
    tail = np.zeros(len(program), np.int64)
    for i, op in enumerate(ir.ops):
        tiles = code.tiles[i]
        if tiles is None or len(tiles.rows) == 0:
            continue
        rows = program[tiles.rows]
        unit, rate = rates[i]
        if isinstance(op, Einsum):
            mapping = code.mappings[op.name]
            cycles[tiles.rows], tail[tiles.rows] = pricing.matrix_split(
                rows["m"], rows["n"], rows["k"], unit, arch, mapping, rate)
            cycles[tiles.rows] = with_promotion(cycles[tiles.rows], rows["m"], rows["n"], rows["k"], op, unit, arch,
                                                mapping)
        else:
            cycles[tiles.rows] = vector_cycles(rows["work"], unit, rate, arch)
        if not op.launch:
            # fused into another op's kernel, or launched inside a captured graph: the compute models put one
            # launch on a kernel's first row, which this op does not pay
            first = tiles.rows[0]
            cycles[first] = max(cycles[first] - launch_cycles(op, unit, arch, rows["work"]), tail[first])
    return cycles, tail


def launch_cycles(op: IROp, unit: ComputeUnit, arch: Arch, work: np.ndarray) -> int:
    """The launch the compute models put on a kernel's first row: once per kernel that does work (a copy, which
    does none, pays none)."""
    return arch.cycles(unit.launch_overhead_s) if op.kind == OpKind.einsum or work.any() else 0

