"""The mapping space of one op: legal candidate Mappings, most promising first. Einsum steps are shaped
by the unit (a PE-array fold per dataflow, a thread-block tile, a register block), outer levels shrunk
until they fit, and on a PE array also as smaller buffers would shrink them, so a bigger buffer's space holds
the tilings a smaller one's does; loop orders permute the b/m/n/k groups. (Vector ops: compiler.map.vector.)"""
from __future__ import annotations

import itertools
import math
from typing import Any, Iterator, Sequence

from compiler.dtypes import DType
from compiler.ir import Einsum
from compiler.map.legal import nothing_fits
from compiler.map.targets import SYSTOLIC, Targets, targets
from compiler.targeting import Footprints, Overflow, op_levels, per_instance, pick_unit
from compiler.mapping import LevelTile, Mapping, Spatial, gemm_view, op_signature
from compiler.memo import Memo
from compiler.hardware import Arch, ComputeUnit

POLICIES = ("kmn", "mnk", "nmk")     # which group an outer level tiles first when it must shrink
MIN_K_STEPS = 2     # split-K leaves each instance two steps of k at least: one loads while one computes
STREAM_CUTS = (2, 4)   # a GPU level that holds the whole op is also offered cut along k so it pipelines (`_streamed`)
# `_smaller_buffers` halves a level's room until the level holds this many tiles of the op: by then each tile's
# fill is a small share of the op's transfer, and smaller tiles only add refetches and per-tile latency
RUNG_TILES = 64
# ... and the levels inside it until the room twice as large holds a INNER_RUNG_TILES-th of what the whole op needs
# there: ifmap and ofmap tiles a quarter of a layer's (a 64x64 array, ResNet-18's layer1 convs at 224 px with 128 KiB
# ifmap and ofmap SRAMs), not smaller, as each rung multiplies the tilings the search reports
INNER_RUNG_TILES = 2

Groups = dict[str, tuple[str, ...]]         # GEMM group (b, m, n, k) -> its dims, outermost first
Tiling = tuple[str | None, list[dict[str, int]], dict[str, int]]     # (dataflow, tile per level, spread)


def candidates(op: Einsum, arch: Arch) -> Iterator[Mapping]:
    """Legal Mappings of an Einsum; a MappingError naming operand, level and bytes if none fits."""
    unit, dtype = pick_unit(op, arch)
    view = gemm_view(op)
    extents = dict(op.loops)
    groups = {g: getattr(view, g) for g in "bmnk"}          # dims outermost first, as the loops nest
    sizes = Footprints(op, arch)
    levels = op_levels(sizes.paths)
    signature = op_signature(op)
    tilings: list[Tiling] = []
    seen: set[tuple[Any, ...]] = set()
    problem: Overflow | None = None
    align = _micro_blocks(unit, groups, dtype)
    kind = targets(arch)
    for flow, step_targets, inner_first in _targets(kind, unit, op, sizes.paths[-1]):
        if step_targets is None and tilings:
            break
        step = _shrink_to_fit(sizes, levels[1:], _split(groups, extents, step_targets or {}, align), groups,
                              inner_first, extents, align)
        if isinstance(step, Overflow):
            problem = step if step_targets is None else problem or step     # report the smallest tile's
            continue
        share = step
        for spread in _spreads(groups, extents, share, unit.count, dealt=kind.dealt):
            step = {d: min(extents[d], t * spread.get(d, 1)) for d, t in share.items()}
            if (flow, tuple(step.values())) in seen:     # another target shrank to the same step
                continue
            seen.add((flow, tuple(step.values())))
            for policy in POLICIES:
                tiles = _outer_tiles(sizes, levels, step, spread, groups, policy, extents)
                if isinstance(tiles, Overflow):
                    problem = tiles if step_targets is None else problem or tiles
                    continue
                for tiling in [tiles] + (_streamed(tiles, groups, extents) if kind.streamed else []):
                    key = (flow, tuple(tuple(t.values()) for t in tiling), tuple(spread.items()))
                    if key not in seen:
                        seen.add(key)
                        tilings.append((flow, tiling, spread))
    if not tilings:
        assert problem is not None, "the last resort, one MAC per step, neither fits nor overflows"
        raise nothing_fits(op, arch, problem)
    # After every target's largest tiles, what smaller buffers hold, smallest first
    smaller = _smaller_buffers(sizes, levels, kind, unit, op, groups, extents, align) if kind.smaller_buffers else []
    for flow, tiles, spread in sorted(smaller, key=lambda found: _held(sizes, levels, found[1])):
        key = (flow, tuple(tuple(t.values()) for t in tiles), tuple(spread.items()))
        if key not in seen:
            seen.add(key)
            tilings.append((flow, tiles, spread))
    # Round robin: every tiling's best-guess loop order before any tiling's second (the search reports each
    # tiling's first, then the other orders of the best).
    orders = [list(_orders(op, tiles, groups)) for _, tiles, _ in tilings]
    for rank in range(max(map(len, orders))):
        for (flow, tiles, spread), options in zip(tilings, orders):
            if rank < len(options):
                yield _build(op, sizes, signature, unit, dtype, flow, levels, tiles, options[rank], spread, groups)


def _targets(kind: Targets, unit: ComputeUnit, op: Einsum, output_path: list[int]
             ) -> Iterator[tuple[str | None, dict[str, int | None] | None, tuple[str, ...]]]:
    """(dataflow, step size per group for one instance, groups to shrink first when it does not fit): the kind's
    targets (compiler.map.targets), then the last resort, tried only when nothing above fits: one MAC per step
    (None: every group 1)."""
    yield from kind.steps(unit, op, output_path)
    yield (unit.dataflows[0].value if unit.dataflows else None), None, ()


def _micro_blocks(unit: ComputeUnit, groups: Groups, dtype: DType) -> dict[str, int]:
    """{dim: rows or columns of the SIMD micro-kernel} for the m and n groups that are one dim each (a conv's m
    is a product of dims, left as it is): a CPU BLAS sizes its blocks in whole micro-tiles, as OpenBLAS does.
    The micro-tile is accelsim.price.simd's: rows x register rows by cols x accumulators per register."""
    micro = getattr(unit, "micro_kernel", None)
    if micro is None:
        return {}
    accumulators = max(1, micro.register_bytes // (8 if dtype.bits == 64 else 4))
    sizes = {"m": micro.rows * micro.register_rows, "n": micro.cols * accumulators}
    return {groups[g][0]: size for g, size in sizes.items() if len(groups[g]) == 1}


def _aligned(extent: int, room: int, block: int | None) -> int | None:
    """The largest multiple of `block` (a micro-kernel's rows or columns) at most `room`, where `extent` must
    be split: 1024 rows of a 6-row micro-kernel in blocks of at most 64 are 17 blocks of 60 and one of 4
    (1,026 rows run, 0.2% padding), where blocks of 64 run 66 rows each (3%) and balanced ones of 57 run 60
    (5%). The cost model prices the ragged last block as the engine does, clipped."""
    if block is None or room < block or extent <= room:
        return None
    return block * (room // block)


def _split(groups: Groups, extents: dict[str, int], targets: dict[str, int | None],
           align: dict[str, int] | None = None) -> dict[str, int]:
    """Per-dim tiles whose product per group is at most its target: inner dims whole first, then a
    balanced share of the next (56 rows in tiles of 19: 3 trips, 1 padded row), then what room is left;
    a SIMD micro-kernel's rows and columns in whole micro-tiles (`_aligned`)."""
    align = align or {}
    tile: dict[str, int] = {}
    for g, dims in groups.items():
        room = targets.get(g, 1 if not targets else None)
        for d in reversed(dims):
            e = extents[d]
            if room is None or e <= room:
                tile[d] = e
                room = None if room is None else room // e
            else:
                tile[d] = _aligned(e, room, align.get(d)) or _fit(e, max(room, 1))
                room //= tile[d]
    return tile


def _shrink_to_fit(sizes: Sizes, levels: list[int], step: dict[str, int], groups: Groups, inner_first: Sequence[str],
                   extents: dict[str, int], align: dict[str, int] | None = None) -> dict[str, int] | Overflow:
    """Halve the step, `inner_first` groups first, until every on-chip level on the operands' paths holds
    it (each level's tile is at least the step: a strided conv's input halo may not fit where the
    innermost level's outputs do)."""
    order = list(inner_first) + [g for g in "kmnb" if g not in inner_first]
    while True:
        problem = next((p for p in (sizes.overflow(level, step, True, {}) for level in reversed(levels))
                        if p is not None), None)
        if problem is None:
            return step
        # a SIMD micro-kernel's rows and columns (`align`) go below one micro-tile only once nothing else can shrink
        align = align or {}
        dim = next((d for g in order for d in groups[g] if step[d] > align.get(d, 1)), None) or \
            next((d for g in order for d in groups[g] if step[d] > 1), None)
        if dim is None:
            return problem
        step[dim] = _aligned(extents[dim], step[dim] // 2, align.get(dim)) or _smaller(extents[dim], step[dim])


def _fit(extent: int, room: int) -> int:
    """The largest tile <= room, balanced over `extent` (56 in tiles of 19: 3 trips, 1 padded), or a
    divisor where balancing would pad more than an eighth (a 3-wide filter in room 2 goes 1 at a time)."""
    tile = math.ceil(extent / math.ceil(extent / room))
    if math.ceil(extent / tile) * tile * 8 <= extent * 9:
        return tile
    return max(t for t in range(1, min(room, extent) + 1) if extent % t == 0)


def _smaller(extent: int, tile: int) -> int:
    return _fit(extent, max(1, tile // 2))


def _spreads(groups: Groups, extents: dict[str, int], step: dict[str, int], count: int, dealt: bool = False
             ) -> Iterator[dict[str, int]]:
    """Ways to split the step over the unit's instances: along b, then m, then n dims; where a block scheduler
    deals the blocks (`dealt`, a GPU), also over m and n together (`_tiled`); and where that leaves half the
    instances or more idle, also along k dims for them (split-K, as cuBLAS and cuDNN do: each instance then
    holds partial sums of the whole output tile, which compiler.targeting.k_split has codegen and pricing store
    once per instance), each instance keeping MIN_K_STEPS steps of its share to pipeline. A weight gradient's
    64 x 576 outputs over k = 100,352 fill 10 of an A100's 108 SMs unsplit. The cost model chooses."""
    spread = _spread(groups["b"] + groups["m"] + groups["n"], extents, step, count)
    yield spread
    if dealt:
        tiled = _tiled(groups, extents, step, count)
        if tiled != spread:
            yield tiled
    used = math.prod(spread.values())
    if 2 * used <= count:
        split = _spread(groups["k"], extents, step, count // used, MIN_K_STEPS)
        if split:
            yield spread | split


def _tiled(groups: Groups, extents: dict[str, int], step: dict[str, int], count: int) -> dict[str, int]:
    """{dim: instances} over the b, m and n dims together that busies the most instances, then makes the
    fewest steps, then the squarest output tile (the A and B rows it reads, which a shared L2 serves once per
    step): an A100's 108 SMs over 64 x 48 blocks of 256 x 128 as 12 x 9 (96 steps of 3,072 x 1,152) where m
    first gives 64 x 1 (48 steps on 64 SMs)."""
    dims = [d for g in "bmn" for d in groups[g] if math.ceil(extents[d] / step[d]) > 1]
    # all the answer depends on: ops of other K, or other names, ask it again (a planner maps hundreds of programs)
    asked = (tuple(dims), tuple(extents[d] for d in dims), tuple(step[d] for d in dims),
             tuple((d, step[d]) for d in groups["n"]), count)
    known = _TILED.get(asked)
    if known is not None:
        return dict(known)
    best: dict[str, int] = {}
    key: tuple[int, int, float] | None = None

    def visit(i: int, left: int, spread: dict[str, int]) -> None:
        nonlocal best, key
        if i == len(dims):
            used = math.prod(spread.values())
            steps = math.prod(math.ceil(extents[d] / (step[d] * spread.get(d, 1))) for d in dims)
            rows = math.prod(step[d] * spread.get(d, 1) for d in dims if d not in groups["n"])
            cols = math.prod(step[d] * spread.get(d, 1) for d in groups["n"])
            candidate = (-used, steps, abs(math.log(rows / cols)))
            if key is None or candidate < key:
                best, key = dict(spread), candidate
            return
        d = dims[i]
        for f in range(1, min(left, math.ceil(extents[d] / step[d])) + 1):
            visit(i + 1, left // f, spread | ({d: f} if f > 1 else {}))

    visit(0, count, {})
    _TILED[asked] = dict(best)
    return best


_TILED: Memo[tuple[Any, ...], dict[str, int]] = Memo("compiler.map.space._tiled", 16384)     # answers kept per process


def _spread(dims: Sequence[str], extents: dict[str, int], step: dict[str, int], count: int,
            per_instance: int = 1) -> dict[str, int]:
    """{dim: instances}: `dims` in order, each split over as many of `count` instances as it has steps
    (`per_instance` steps each)."""
    spread: dict[str, int] = {}
    left = count
    for d in dims:
        f = min(math.ceil(extents[d] / step[d]) // per_instance, left)
        if f > 1:
            spread[d] = f
            left //= f
    return spread


def _outer_tiles(sizes: Sizes, levels: list[int], step: dict[str, int], spread: dict[str, int], groups: Groups,
                 policy: str, extents: dict[str, int]) -> list[dict[str, int]] | Overflow:
    """Tiles from the whole op (outermost level) inward to the step; each level between is shrunk from
    the one outside it, groups in `policy` order, never below the step."""
    tiles = [dict(extents)]
    for level in levels[1:-1]:
        tile = _level_tile(sizes, level, tiles[-1], step, spread, groups, policy)
        if isinstance(tile, Overflow):
            return tile
        tiles.append(tile)
    tiles.append(dict(step))
    return tiles if len(levels) > 1 else tiles[:1]


def _level_tile(sizes: Sizes, level: int, outer: dict[str, int], step: dict[str, int], spread: dict[str, int],
                groups: Groups, policy: str) -> dict[str, int] | Overflow:
    """The tile at `level`: the one outside it (`outer`) shrunk, groups in `policy` order, never below the step."""
    tile = dict(outer)
    for d in [d for g in "b" + policy for d in groups[g]]:
        if sizes.overflow(level, tile, True, spread) is None:
            break
        shrink_dim(sizes, level, tile, d, outer[d], step[d], spread)
    return sizes.overflow(level, tile, True, spread) or tile


def smaller_buffers(op: Einsum, arch: Arch) -> bool:
    """Whether the space of `op` also holds the tilings smaller buffers give: on a PE array, whose SRAMs a DMA
    fills tile by tile (compiler.map.targets). A GPU's L2 streams instead (`_streamed`), and the GPU and CPU cost
    models are held to published and measured timings (validation/) that these tilings have not been checked
    against."""
    pick_unit(op, arch)     # an op no unit runs is refused here as in its space
    return targets(arch).smaller_buffers


def _smaller_buffers(sizes: Footprints, levels: list[int], kind: Targets, unit: ComputeUnit, op: Einsum, groups: Groups,
                     extents: dict[str, int], align: dict[str, int]) -> list[Tiling]:
    """(dataflow, tiles, spread) as smaller buffers would give them: the step shrunk to fit each combination of the
    levels' rooms, and `_outer_tiles` under each combination of rooms of the levels outside it, each room a rung of
    `_rungs`. Whether a rung is offered depends on the rung and the op, never on the capacity, so a bigger buffer
    keeps every tiling a smaller one allowed, at every level: a 4 MiB filter SRAM is also offered the 80 weight
    tiles a 64 KiB one holds, which stream from DRAM under the array, not only 2 tiles of half a layer whose first
    fill nothing overlaps (systolic_32x32, ResNet-18's layer4.0/conv2: 137 k cycles estimated with 2 tiles, 101 k
    with 80), and a 512 KiB ifmap and ofmap SRAM the rows of output a 128 KiB one holds per step (a 64x64 array,
    ResNet-18's layer1 convs at 224 px: 41.3 k cycles in the tile engine with 512 KiB, 35.3 k with 128 KiB)."""
    if len(levels) < 3 or any(getattr(sizes.arch.memory[lv], "refill_per_tile", False) for lv in levels[1:]):
        return []       # a level refilled tile by tile (TPU v1's weight FIFO) already streams its fill
    rungs = {level: _rungs(sizes, level, extents, RUNG_TILES if level == levels[1] else INNER_RUNG_TILES)
             for level in levels[1:]}
    found: list[Tiling] = []
    seen: set[tuple[Any, ...]] = set()
    for rooms in itertools.product(*rungs.values()):
        view = _Room(sizes, dict(zip(rungs, rooms)))
        for flow, step_targets, inner_first in _targets(kind, unit, op, sizes.paths[-1]):
            if step_targets is None:
                continue
            share = _shrink_to_fit(view, levels[1:], _split(groups, extents, step_targets, align), groups,
                                   inner_first, extents, align)
            if isinstance(share, Overflow):
                continue
            for spread in _spreads(groups, extents, share, unit.count, dealt=kind.dealt):
                step = {d: min(extents[d], t * spread.get(d, 1)) for d, t in share.items()}
                for policy in POLICIES:
                    # the innermost level's room shapes the step alone: the levels outside it tile as before
                    key = (flow, tuple(step.values()), tuple(spread.items()), policy, rooms[:-1])
                    if key not in seen:
                        seen.add(key)
                        tiles = _outer_tiles(view, levels, step, spread, groups, policy, extents)
                        if not isinstance(tiles, Overflow):
                            found.append((flow, tiles, spread))
    return found


def _rungs(sizes: Footprints, level: int, extents: dict[str, int], depth: int) -> list[int | None]:
    """Rooms a smaller buffer at arch `level` would have: None (its capacity), then each power of two below both
    the capacity and what the whole op needs there (its tiles double-buffered), while the room twice as large holds
    a `depth`-th of that need or less. Each depends on the op and the power of two alone, never on the capacity."""
    whole = sum(n for _, n in sizes.need(level, extents, True))
    top = min(sizes.arch.memory[level].capacity_bytes, whole)
    room = 1 << (top - 1).bit_length() - 1 if top > 1 else 0
    rooms: list[int | None] = [None]
    while room and 2 * room * depth >= whole:
        rooms.append(room)
        room //= 2
    return rooms


class _Room:
    """Footprints as they would be with `rooms` bytes at arch levels (None: the level's capacity; any other level as
    it is)."""

    def __init__(self, sizes: Footprints, rooms: dict[int, int | None]) -> None:
        self.sizes, self.arch = sizes, sizes.arch
        self.rooms = {level: room for level, room in rooms.items() if room is not None}

    def overflow(self, level: int, tile: dict[str, int], double: bool, spread: dict[str, int]) -> Overflow | None:
        if level not in self.rooms:
            return self.sizes.overflow(level, tile, double, spread)
        lv, room = self.sizes.arch.memory[level], self.rooms[level]
        need = self.sizes.need(level, per_instance(tile, spread) if lv.instances > 1 and spread else tile, double)
        total = sum(n for _, n in need)
        return None if total <= room else Overflow(max(need, key=lambda t: t[1])[0], lv.name, total, room)


Sizes = Footprints | _Room      # what the tiling steps ask which tiles fit: the arch's levels, or smaller rooms


def _held(sizes: Footprints, levels: list[int], tiles: list[dict[str, int]]) -> int:
    """Bytes the tiling's levels between DRAM and the step hold: what orders `_smaller_buffers`' tilings."""
    return sum(n for level, tile in zip(levels[1:-1], tiles[1:-1]) for _, n in sizes.need(level, tile, True))


def _streamed(tiles: list[dict[str, int]], groups: Groups, extents: dict[str, int]) -> list[list[dict[str, int]]]:
    """A GPU's SMs read through its L2 as they go; they do not wait for it to fill. Where a level between DRAM and
    the step holds the whole op in one tile (a weight that fits the L2), nothing overlaps that tile's fill: the
    same tiling with the tile cut along k into STREAM_CUTS parts pipelines it, and the cost model chooses.
    DeepGEMM's 64 x 7168 x 2048 fp8 on an H800 (14.7 MB of weight): 6.4 us measured, 9.9 us whole, 7.9 us cut."""
    found: list[list[dict[str, int]]] = []
    for i in range(1, len(tiles) - 1):
        if tiles[i] != extents:
            continue
        steps = {d: math.ceil(extents[d] / tiles[-1][d]) for d in groups["k"]}    # the step's tiles along each k dim
        for parts in STREAM_CUTS:
            d = next((d for d in groups["k"] if steps[d] >= parts), None)
            if d is None:
                continue
            cut = [dict(t) for t in tiles]
            cut[i][d] = tiles[-1][d] * math.ceil(steps[d] / parts)
            for inner in cut[i + 1:-1]:
                inner[d] = min(inner[d], cut[i][d])
            found.append(cut)
    return found


def shrink_dim(sizes: Sizes, level: int, tile: dict[str, int], d: str, outer: int, floor: int,
               spread: dict[str, int]) -> None:
    """The largest multiple of `floor` (the step's tile, so inner levels divide it evenly), at most
    `outer`, that fits; `floor` itself if none does."""
    before = sizes.overflow(level, tile, True, spread)
    if before is None:
        return
    original, tile[d] = tile[d], floor
    at_floor = sizes.overflow(level, tile, True, spread)
    if at_floor is not None:
        if at_floor.needed == before.needed:    # no operand held here depends on d: leave it whole
            tile[d] = original
        return
    lo, hi = 1, max(1, original // floor)       # multiples: lo fits, hi may not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        tile[d] = min(outer, floor * mid)
        if sizes.overflow(level, tile, True, spread) is None:
            lo = mid
        else:
            hi = mid - 1
    # As few trips as the largest fit allows, balanced: 1024 in multiples of 16 with room for 496 is
    # 3 trips of 352 (the last 320), not 496 + 496 + 32 (a smaller tile still fits).
    units = math.ceil(outer / floor)
    trips = math.ceil(units / lo)
    tile[d] = min(outer, floor * math.ceil(units / trips))


def _orders(op: Einsum, tiles: list[dict[str, int]], groups: Groups) -> Iterator[tuple[tuple[str, ...], ...]]:
    """Loop orders per level: one permutation of the m/n/k groups at every level (b outermost), each
    distinct once dims with one trip are dropped. k innermost first: partial sums stay put."""
    seen: set[tuple[tuple[str, ...], ...]] = set()
    for perm in ("mnk", "nmk", "kmn", "knm", "mkn", "nkm"):
        dims = [d for g in "b" + perm for d in groups[g]]
        orders = tuple(tuple(dims) for _ in tiles)
        outer = [dict(op.loops)] + tiles[:-1]
        effective = tuple(tuple(d for d in dims if math.ceil(o[d] / t[d]) > 1) for o, t in zip(outer, tiles))
        if effective not in seen:
            seen.add(effective)
            yield orders


def _build(op: Einsum, sizes: Footprints, signature: str, unit: ComputeUnit, dtype: DType, flow: str | None,
           levels: list[int], tiles: list[dict[str, int]], orders: tuple[tuple[str, ...], ...], spread: dict[str, int],
           groups: Groups) -> Mapping:
    loops = [d for d, _ in op.loops]
    names = [lv.name for lv in sizes.arch.memory]
    level_tiles = tuple(LevelTile(names[lv], tuple((d, tile[d]) for d in loops), order, i > 0 and sizes.buffered(lv))
                        for i, (lv, tile, order) in enumerate(zip(levels, tiles, orders)))
    step = per_instance(tiles[-1], spread)
    spatial = [Spatial(d, "units", f) for d, f in spread.items()]
    notes: list[str] = []
    if flow is not None:
        array = unit.array
        assert array is not None, f"{unit.name}: a dataflow's step is a PE-array fold"
        rows, cols, _ = SYSTOLIC[flow]
        spatial += [Spatial(d, "rows", step[d]) for d in groups[rows] if step[d] > 1]
        spatial += [Spatial(d, "cols", step[d]) for d in groups[cols] if step[d] > 1]
        on_rows = math.prod(step[d] for d in groups[rows])
        on_cols = math.prod(step[d] for d in groups[cols])
        folds = math.ceil(on_rows / array.rows) * math.ceil(on_cols / array.cols)
        used = on_rows * on_cols
        if folds == 1:
            notes.append(f"fold uses {used} of {array.pes} PEs ({100 * used / array.pes:.0f}%)")
        else:
            notes.append(f"step of {folds} folds issued back to back ({rows}={on_rows} on {array.rows} "
                         f"rows), using {100 * used / (folds * array.pes):.0f}% of the PEs")
    size = {g: math.prod(step[d] for d in groups[g]) for g in "bmnk"}
    if unit.limits is not None:
        frag = f"MMA fragment m16n8k{256 // dtype.bits}" if dtype.bits <= 16 else "FMA on CUDA cores"
        notes.append(f"thread-block tile {size['b'] * size['m']}x{size['n']}x{size['k']} (m x n x k) per SM; {frag}")
    micro = getattr(unit, "micro_kernel", None)
    if micro is not None and groups["n"]:
        lanes = micro.register_bytes * 8 // dtype.bits
        spatial.append(Spatial(groups["n"][-1], "lanes", min(lanes, step[groups["n"][-1]])))
    parts = tuple((d, g) for d in loops for g in "bmnk" if d in groups[g])
    return Mapping(op=op.name, signature=signature, unit=unit.name, loops=op.loops, levels=level_tiles,
                   spatial=tuple(spatial), dataflow=flow, notes=tuple(notes), dtype=dtype.value, parts=parts)
