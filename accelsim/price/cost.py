"""The mapper's analytical cost: cycles = max(compute + the transfers on its dependency chain, traffic /
bandwidth per level, the buffer slots' round trips) + fill and drain, with Timeloop-style reuse (a tile is
refetched per iteration of the loops outside its innermost relevant one) and ragged edges clipped as the engine
clips them, so that the mapping it prefers is the one the tile engine (accelsim.sim.tile) finds fastest.
Invariant: traffic at every level >= the bytes the roofline counts there."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, cast

import numpy as np

from accelsim.price.compat import NATIVE, Pricing
from accelsim.price.roofline import bytes_by_level
from accelsim.price.compute import with_promotion
from compiler.dtypes import DType
from compiler.hardware import Arch, ComputeUnit
from compiler.ir import IR, Einsum, IROp, Role
from compiler.codegen.nest import clipped_segments, clipped_shapes, loop_nest
from compiler.mapping import Mapping, gemm_view
from compiler.targeting import Footprints, k_split, relevant_dims, units_spread


OVERLAP_LOSS = 0.05


def _fetches(nest: list[tuple[str, int, int]], level: int, dims: tuple[str, ...]) -> tuple[int, int]:
    """(times the tile at mapping `level` is loaded, distinct tiles) for an operand indexed by `dims`."""
    inside = [(d, t) for d, t, lv in nest if lv <= level]
    last = max((j for j, (d, _) in enumerate(inside) if d in dims), default=-1)
    return math.prod(t for _, t in inside[:last + 1]), math.prod(t for d, t in inside if d in dims)


class _Facts:
    """What costing one op on one arch needs that no mapping changes (the reporter keeps one per op)."""

    def __init__(self, op: IROp, arch: Arch) -> None:
        self.sizes = Footprints(op, arch)
        self.dims = [relevant_dims(op, i) for i in range(len(self.sizes.operands))]
        self.floor = bytes_by_level(op, arch)
        self.levels = {lv.name: lv for lv in arch.memory}
        # what depends on a mapping's tiles but not on its loop orders, per tiling: the search reports every
        # tiling's loop orders one after another
        self.segments: dict[tuple[object, ...], dict[str, Counter[int]]] = {}
        self.compute: dict[tuple[object, ...], tuple[float, float, float]] = {}

    def clipped_segments(self, mapping: Mapping, level: int) -> dict[str, Counter[int]]:
        key = (tuple(lv.tile for lv in mapping.levels[:level + 1]), level)
        if key not in self.segments:
            self.segments[key] = clipped_segments(mapping, level)
        return self.segments[key]


def traffic(mapping: Mapping, op: IROp, arch: Arch, facts: _Facts | None = None) -> dict[str, int]:
    """Bytes each arch level moves for this op: loads read from a level (the tile the next level on the
    path holds, or the compute step), outputs are stored into it, partial sums spill and reload."""
    facts = facts or _Facts(op, arch)
    return _floored(_channels(mapping, op, arch, facts), facts)


def _floored(channels: dict[str, _Channel], facts: _Facts) -> dict[str, int]:
    # A strided conv (1x1, stride 2) skips rows its tiles never touch; the roofline still counts the
    # whole tensor, and so does the DMA, which moves whole rows.
    floor = facts.floor
    return {name: max(ch.bytes, floor.get(name, 0)) for name, ch in channels.items() if ch.bytes or floor.get(name)}


@dataclass
class _Channel:
    """What one mapping moves through one arch level's channel (loads read it, output stores write it)."""

    bytes: int = 0              # all of it, ragged tiles clipped as the DMA moves them
    tile_bytes: int = 0         # one tile of every operand it carries: a pipeline's fill and drain
    walk: int = 1               # tiles the innermost of them takes to walk the op
    input_bytes: int = 0        # of the inputs alone
    stores: int = 0             # output tiles stored through it (final and partial)
    store_bytes: int = 0
    reloads: int = 0            # partial-sum tiles loaded back
    reload_bytes: int = 0


def _channels(mapping: Mapping, op: IROp, arch: Arch, facts: _Facts) -> dict[str, _Channel]:
    if not mapping.levels:
        return {}
    sizes = facts.sizes
    channels = {lv.name: _Channel() for lv in arch.memory}
    nest = loop_nest(mapping)
    position = {lv.level: i for i, lv in enumerate(mapping.levels)}
    last = len(mapping.levels) - 1
    tiles = [dict(lv.tile) for lv in mapping.levels]
    copies = k_split(mapping)
    segments: dict[int, dict[str, Counter[int]]] = {}
    for index, (operand, path) in enumerate(zip(sizes.operands, sizes.paths)):
        dims = facts.dims[index]
        for j, level in enumerate(path):
            # the transfer at path[j] carries the tile of the next level on the path (the step's after it)
            dest = position.get(arch.memory[path[j + 1]].name, last) if j + 1 < len(path) else last
            loads, distinct = _fetches(nest, dest, dims)
            ch = channels[arch.memory[level].name]
            # every distinct tile, clipped at ragged edges, brought back loads / distinct times
            if dest not in segments:
                segments[dest] = facts.clipped_segments(mapping, dest)
            clipped = [(tiles[dest] | dict(zip(dims, shape)), n)
                       for shape, n in clipped_shapes(segments[dest], dims).items()]
            final = sum(n * sizes.bytes(index, tile, partial=False) for tile, n in clipped)
            one = sizes.bytes(index, tiles[dest], partial=False)
            if operand.role == Role.output:
                partial = sum(n * sizes.bytes(index, tile, partial=True) for tile, n in clipped)
                if copies > 1 and dest == last:     # split-K: every instance stores its partial sums (codegen's rule)
                    final = partial = copies * partial
                    one = copies * sizes.bytes(index, tiles[dest], partial=True)
                revisits = (loads - distinct) * partial // distinct
                ch.stores += loads
                ch.store_bytes += final + revisits
                ch.reloads += loads - distinct
                ch.reload_bytes += revisits
                ch.bytes += final + 2 * revisits
            else:
                ch.bytes += loads * final // distinct
                ch.input_bytes += loads * final // distinct
            ch.tile_bytes += one
            ch.walk = max(ch.walk, math.prod(t for _, t, lv in nest if lv <= dest))
    return channels


def _compute_cycles(mapping: Mapping, op: Einsum, arch: Arch, unit: ComputeUnit, dtype: DType,
                    pricing: Pricing) -> tuple[float, float, float]:
    """(cycles of every step, the once-per-kernel launch, a step's tail): each step as the compute models price its
    row; the tail (a systolic array's skew and drain) runs under the next step."""
    steps = math.prod(math.prod(mapping.trips(i).values()) for i in range(len(mapping.levels)))
    step = dict(mapping.levels[-1].tile) if mapping.levels else dict(mapping.loops)
    # Each step is a row as the Program has it, clipped at the edges, GEMM group by group (b folded into m);
    # the models split it over the instances the mapping spreads it on. Two whole steps first: a model adds a
    # once-per-kernel cost (a GPU launch) to the first row only.
    view = gemm_view(op)
    groups = (view.b + view.m, view.n, view.k)
    whole = [math.prod(step[d] for d in dims) for dims in groups]
    names = [d for d, _ in mapping.loops]
    shapes = (clipped_shapes(clipped_segments(mapping, len(mapping.levels) - 1), names) if mapping.levels
              else Counter({tuple(step[d] for d in names): steps}))
    clipped = [[min(w, math.prod(dict(zip(names, shape))[d] for d in dims)) for shape in shapes]
               for w, dims in zip(whole, groups)]
    m, n, k = (np.array([w, w] + c, np.int64) for w, c in zip(whole, clipped))
    rows, tail = pricing.matrix_split(m, n, k, unit, arch, mapping, dtype)
    rows = with_promotion(rows, m, n, k, op, unit, arch, mapping)
    # steps issued back to back overlap each one's tail (a systolic array's skew and drain) with the next
    steady = np.dot(np.array(list(shapes.values()), np.float64), (rows - tail)[2:])
    last = float(tail[2:].max(initial=0))
    return float(steady + last), float(rows[0] - rows[1]), last


def _on_the_chain(ch: _Channel, seconds_per_byte: float, latency_s: float) -> float:
    """Seconds of a channel's output transfers that no compute overlaps (compiler.codegen.assemble's order and
    dependencies, which the engine keeps). A partial-sum reload waits for the store before it, and the next
    compute on the tile for the reload: both sit between two computes (epyc, 1024^3 fp32 with k outside n at
    l1d: 16 K round trips of a 64 x 64 C tile through l1d and l2 stall the engine 18 M cycles). A channel that
    also carries inputs serves in program order, so the next tile's inputs (a walk's share of them) queue
    behind each store, which waits for its compute (npu4, alexnet fc6: 10 weight tiles of 3.5 MB from DRAM,
    each behind a store)."""
    shared = ch.input_bytes > 0
    exposed = 0.0
    if ch.reloads or shared:
        exposed += ch.store_bytes * seconds_per_byte + ch.stores * latency_s
    exposed += ch.reload_bytes * seconds_per_byte + ch.reloads * latency_s
    if shared and ch.stores > 1:
        exposed += (ch.stores - 1) * (ch.input_bytes / ch.walk * seconds_per_byte + latency_s)
    return exposed


def _round_trips(mapping: Mapping, arch: Arch, facts: _Facts, per_byte: dict[str, float], busy_s: float,
                 parallel: int) -> float:
    """Seconds the slowest input's buffer slots take to cycle: a load into a slot waits for the computes that used
    the slot's last tile to release it (compiler.codegen.assemble), so each slot in turn is filled (the tile's
    transfer and the level's latency), read inward (the next level's first tile) and used (its share of the
    compute after the first inner transfer, or all the inner transfers where those take longer). Two slots where
    double-buffered, one if not.
    Small tiles from a far memory are paced by this, not by bandwidth (systolic_32x32, layer4.0/conv2 with
    one 2 KiB weight tile per step: 129 + 64 + 64 cycles a slot, 1,184 steps in 152 k cycles, where 2.36 MB
    at 12.8 GB/s is 92 k)."""
    if not mapping.levels:
        return 0.0
    sizes = facts.sizes
    nest = loop_nest(mapping)
    position = {lv.level: i for i, lv in enumerate(mapping.levels)}
    last = len(mapping.levels) - 1
    slowest = 0.0
    by_channel: dict[int, list[tuple[float, float, float, bool]]] = {}    # (tiles, fill, inward, double)
    for index, (operand, path) in enumerate(zip(sizes.operands, sizes.paths)):
        if operand.role == Role.output:
            continue
        hops = []       # (tiles per instance, seconds to fill one, whether double-buffered) per transfer on the path
        for j, level in enumerate(path):
            dest = position.get(arch.memory[path[j + 1]].name, last) if j + 1 < len(path) else last
            loads, _ = _fetches(nest, dest, facts.dims[index])
            lv = arch.memory[level]
            target = mapping.levels[dest]
            instances = max(1, min(facts.levels[target.level].instances, parallel))
            fill = sizes.bytes(index, dict(target.tile), partial=False) * per_byte.get(lv.name, 0.0) + lv.latency_s
            if facts.levels[target.level].refill_per_tile:     # refilled by parts as the last tile leaves
                fill = lv.latency_s
            hops.append((loads / instances, fill, target.double_buffered and dest > 0))
        for j, (tiles, fill, double) in enumerate(hops):
            inward = hops[j + 1][1] if j + 1 < len(hops) else 0.0
            by_channel.setdefault(path[j], []).append((tiles, fill, inward, double))
            inner = sum(n * f for n, f, _ in hops[j + 1:])
            slowest = max(slowest, (tiles * fill + max(tiles * inward + busy_s, inner)) / (2 if double else 1))
    return max(slowest, _in_program_order(by_channel, busy_s))


def _in_program_order(by_channel: dict[int, list[tuple[float, float, float, bool]]], busy_s: float) -> float:
    """Seconds of compute plus what loads queued in program order behind other loads on the same channel expose. A
    channel serves its loads in the Program's order, and a load into a buffer slot waits for the computes that used
    the slot's last tile; so a tile of an operand loaded less often (a weight tile over many steps) cannot start
    before the load queued ahead of it, of an operand loaded more often (an input tile every few steps), has its slot:
    it is fetched, and its first step's part read inward, under the compute of that operand's other slots' tiles only,
    not under the compute of its own other slot. systolic_32x32, layer4.0/conv2 with weight tiles of 25 steps and
    input tiles of 13 from DRAM: each 1,969-cycle weight load starts 13 steps (832 cycles) before it is needed, 47
    tiles expose 1,137 + 50 + 64 cycles each: 138 k cycles in the tile engine, where the weights alone take 92 k at
    12.8 GB/s. An 8x8 output-stationary array (ResNet-18's layer4.0/conv2, 4 GB/s filter SRAM): input tiles every
    step, weight tiles every 2; each weight tile's 410 cycles from DRAM and its first 1,152 into the array start one
    step of 1,152 cycles before they are needed: 128 x 410 exposed, 349 k cycles in the engine, not the 295 k of
    compute alone."""
    slowest = 0.0
    for hops in by_channel.values():
        for tiles, fill, inward, _ in hops:
            often = [(n, double) for n, _, _, double in hops if n > tiles]
            if often:
                ahead = min(((2 if double else 1) - 1) * busy_s / n for n, double in often)
                slowest = max(slowest, busy_s + tiles * max(0.0, fill + inward - ahead))
    return slowest


def cycles(mapping: Mapping, op: Einsum, arch: Arch, pricing: Pricing = NATIVE, facts: _Facts | None = None) -> float:
    """Estimated arch cycles: the slower of compute (with the transfers on its dependency chain) and each
    level's traffic, plus the pipeline's fill and drain. The compute models (accelsim.price.compute) return arch
    cycles per step."""
    facts = facts or _Facts(op, arch)
    unit = next(u for u in arch.compute if u.name == mapping.unit)
    dtype = DType(mapping.dtype) if mapping.dtype else unit.dtypes[0]
    parallel = max(1, min(unit.count, math.prod(units_spread(mapping).values())))
    steps = (mapping.unit, mapping.dtype, mapping.dataflow, tuple(lv.tile for lv in mapping.levels), mapping.spatial)
    if steps not in facts.compute:
        facts.compute[steps] = _compute_cycles(mapping, op, arch, unit, dtype, pricing)
    busy, launch, tail = facts.compute[steps]
    found = _channels(mapping, op, arch, facts)
    channels = _floored(found, facts)
    per_byte = {name: 1 / (facts.levels[name].bandwidth_bytes_per_s * min(facts.levels[name].instances, parallel))
                for name in channels}
    chain = sum(_on_the_chain(found[name], per_byte[name], facts.levels[name].latency_s)
                for name in channels if name in found)
    # A partial-sum tile is stored once the compute that made it has ended, its tail included, and the reload
    # behind that store on the channel waits for it: each reload exposes a tail, once however many levels the
    # sums cross (systolic_32x32, layer4.0/conv1 with the c loop outside k: 592 steps 127 cycles apart, not 64;
    # estimated 50 k cycles, 78 k in the tile engine)
    # (on a PE array: the GPU and CPU models are held to published and measured timings in validation/, which
    # neither this nor `_round_trips` has been checked against)
    array = unit.array is not None
    chain += array * max((ch.reloads for ch in found.values()), default=0) * tail / arch.clock_hz
    seconds = [(busy + launch) / arch.clock_hz + chain] + [n * per_byte[name] for name, n in channels.items()]
    latency = sum(facts.levels[t.level].latency_s for t in mapping.levels)
    # Fill and drain: N tiles through a channel take N x max(transfer, rest) + min(transfer, rest) per tile.
    # The first tile waits for its transfer (the whole B of a GEMM whose llc tile is the whole op is loaded
    # before any compute), and the last tile's work overlaps nothing (alexnet fc6 on xeon_spr: weights in 2
    # llc tiles from DRAM leave half the compute after the last load).
    for i, name in enumerate(channels):
        ch = found.get(name, _Channel())
        rest = max(seconds[:i + 1] + seconds[i + 2:])
        latency += min(ch.tile_bytes * per_byte[name], rest / ch.walk)
    # Overlap is never perfect (the engine serializes each channel and waits on dependencies): of two
    # mappings with the same bottleneck, the one moving less elsewhere is faster. A small share of the
    # non-bottleneck time says so (TPU v1, 256x4096x4096: keeps partial sums in the accumulators).
    overlap_loss = OVERLAP_LOSS * (sum(seconds) - max(seconds))
    # the slots' round trips are a floor under the slowest resource, not a resource: no overlap loss, no fill
    paced = _round_trips(mapping, arch, facts, per_byte, busy / arch.clock_hz, parallel) if array else 0.0
    return (max(max(seconds), paced) + overlap_loss + latency) * arch.clock_hz


def compute_cycles(mapping: Mapping, op: Einsum, arch: Arch, pricing: Pricing = NATIVE) -> float:
    """Arch cycles the unit computes under `mapping`, steps back to back: `cycles` less every wait on memory (what
    `accelsim map` sets a utilisation against)."""
    unit = next(u for u in arch.compute if u.name == mapping.unit)
    dtype = DType(mapping.dtype) if mapping.dtype else unit.dtypes[0]
    busy, launch, _ = _compute_cycles(mapping, op, arch, unit, dtype, pricing)
    return busy + launch


def reporter(arch: Arch, ops: IR | Iterable[IROp], pricing: Pricing = NATIVE) -> Callable[[Mapping], float]:
    """`cycles` bound to an arch and the ops it will be asked about (looked up by Mapping.op)."""
    # a Mapping is of an Einsum (compiler.map maps no other op)
    by_name = cast(dict[str, Einsum], {op.name: op for op in (ops.ops if isinstance(ops, IR) else ops)})
    facts: dict[str, _Facts] = {}

    def report(mapping: Mapping) -> float:
        op = by_name[mapping.op]
        if mapping.op not in facts:
            facts[mapping.op] = _Facts(op, arch)
        return cycles(mapping, op, arch, pricing, facts[mapping.op])
    return report
