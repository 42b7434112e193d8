"""A Mapping: how one IR op is laid onto a target, loop by loop and level by level.

For each memory level from DRAM inward: the tile of every loop dim that level holds, and the order
of the temporal loops that walk that level's sub-tiles; then the dims unrolled spatially onto the
compute array, and for systolic arrays the dataflow. Invariant: at every level each dim's tile
divides into the next outer level's tile count by ceil (ragged edges are padded, and the padded work
is counted), and the innermost tiles times the spatial factors cover one compute step.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from compiler.ir import Einsum, IROp, Operand, Role

T = TypeVar("T")


@dataclass(frozen=True)
class LevelTile:
    level: str                          # the arch memory level's name
    tile: tuple[tuple[str, int], ...]   # loop dim -> extent of the tile this level holds
    order: tuple[str, ...]              # temporal loops over this level's sub-tiles, outermost first
    double_buffered: bool = True        # holds two tiles so the next loads while this one is used

    def extent(self, dim: str) -> int:
        return dict(self.tile)[dim]


@dataclass(frozen=True)
class Spatial:
    """Every spatial loop splits the innermost tile (one compute step) `factor` ways along `dim`: across
    the PE array (rows, cols), SIMD lanes, or instances of the unit (units: SMs, cores, MXUs). A level
    with several instances (an SM's shared memory) holds, in each, its tile divided by the units factors."""

    dim: str       # loop dim unrolled in space
    axis: str      # where: "rows", "cols" (PE array), "lanes" (SIMD), "units" (SMs, cores, MXUs)
    factor: int    # how many copies side by side


@dataclass(frozen=True)
class Mapping:
    op: str                                   # IR op name
    signature: str                            # what the search cache keys on (shapes, dtypes, kind)
    unit: str                                 # compute unit name in the arch
    loops: tuple[tuple[str, int], ...]        # the op's full loop extents
    levels: tuple[LevelTile, ...]             # outermost (the whole op at DRAM) inward
    spatial: tuple[Spatial, ...] = ()
    dataflow: str | None = None               # "ws", "os", "is" on systolic arrays
    notes: tuple[str, ...] = field(default=())
    dtype: str | None = None                  # the dtype whose rate the unit runs at (widened if needed)
    parts: tuple[tuple[str, str], ...] = ()   # Einsums: each loop dim's GEMM role, "b", "m", "n" or "k" (GemmView)

    def to_dict(self) -> dict[str, Any]:
        """The mapping as JSON values, field by field (what the on-disk caches keep: compiler.map.disk for searched
        mappings, accelsim.sim.cache for a run's)."""
        return {"op": self.op, "signature": self.signature, "unit": self.unit,
                "loops": [[d, e] for d, e in self.loops],
                "levels": [{"level": lv.level, "tile": [[d, e] for d, e in lv.tile], "order": list(lv.order),
                            "double_buffered": lv.double_buffered} for lv in self.levels],
                "spatial": [[s.dim, s.axis, s.factor] for s in self.spatial], "dataflow": self.dataflow,
                "notes": list(self.notes), "dtype": self.dtype, "parts": [[d, p] for d, p in self.parts]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Mapping:
        """The Mapping `to_dict` wrote; a TypeError for a value of another type (True is no extent, 3 no flag), a
        KeyError for a field missing. A reader of untrusted data also checks that `to_dict` of it gives `data` back
        (no field extra)."""
        return cls(op=_text(data["op"]), signature=_text(data["signature"]), unit=_text(data["unit"]),
                   loops=_extents(data["loops"]),
                   levels=tuple(LevelTile(level=_text(lv["level"]), tile=_extents(lv["tile"]),
                                          order=tuple(map(_text, lv["order"])),
                                          double_buffered=_kind(lv["double_buffered"], bool)) for lv in data["levels"]),
                   spatial=tuple(Spatial(dim=_text(d), axis=_text(a), factor=_kind(f, int)) for d, a, f in
                                 data["spatial"]),
                   dataflow=_optional_text(data["dataflow"]), notes=tuple(map(_text, data["notes"])),
                   dtype=_optional_text(data["dtype"]), parts=tuple((_text(d), _text(p)) for d, p in data["parts"]))

    def trips(self, index: int) -> dict[str, int]:
        """Temporal trip count of each dim at level `index`: outer tile / this tile (ceil: ragged)."""
        outer = dict(self.loops) if index == 0 else dict(self.levels[index - 1].tile)
        inner = dict(self.levels[index].tile)
        return {d: math.ceil(outer[d] / inner[d]) for d, _ in self.loops}

    @property
    def padded_work(self) -> int:
        """Work including ragged-edge padding: every level's trips times the innermost step."""
        total = 1
        for i in range(len(self.levels)):
            total *= math.prod(self.trips(i).values())
        return total * math.prod(dict(self.levels[-1].tile).values()) if self.levels else math.prod(
            e for _, e in self.loops)

    @property
    def waste(self) -> float:
        """Fraction of padded_work that is ragged-edge padding."""
        padded = self.padded_work
        return 1 - math.prod(e for _, e in self.loops) / padded if padded else 0.0

    def text(self) -> str:
        """The loop nest a textbook draws: one block per memory level, spatial loops innermost."""
        vector = self.signature == "vector"      # a Map, Reduce or Move's chunk plan (compiler.map.vector)
        if vector and not self.levels:
            return f"# {self.op}: a view (reshape); no data moves, no time"
        head = f"# {self.op} on {self.unit}" + (f" ({self.dtype})" if self.dtype else "")
        head += (f", dataflow {self.dataflow.upper()}" if self.dataflow else "")
        lines = [head + f", padding waste {100 * self.waste:.1f}%"]
        depth = 0
        for i, level in enumerate(self.levels):
            trips = self.trips(i)
            held = " ".join(f"{d}={e}" for d, e in level.tile)
            buffered = ", double-buffered" if level.double_buffered and i else ""
            lines.append("  " * depth + f"# {level.level}: tile {held}{buffered}")
            for d in level.order:
                if trips[d] > 1:
                    step = dict(level.tile)[d]
                    lines.append("  " * depth + f"for {d}{i} in range({trips[d]}):  # {d} += {step}")
                    depth += 1
        units = [s for s in self.spatial if s.axis == "units"]
        for s in units + self._streamed() + [s for s in self.spatial if s.axis != "units"]:
            if isinstance(s, Spatial):
                lines.append("  " * depth + f"parallel_for {s.dim} in range({s.factor}):  # {s.axis}")
            else:
                lines.append("  " * depth + f"for {s[0]} in range({s[1]}):" + (f"  # {s[2]}" if s[2] else ""))
            depth += 1
        # Vector ops (Map/Reduce/Move) walk one flat element dim `e`; Einsums multiply-accumulate.
        lines.append("  " * depth
                     + ("mac()" if self.parts else "vector_op()  # element-wise or reduction work of one chunk"))
        lines += [f"# note: {n}" for n in self.notes]
        if vector:
            lines.append("# vector op: chunks along one output axis, as simulated")
        return "\n".join(lines)

    def _streamed(self) -> list[tuple[str, int, str]]:
        """A PE array's streamed loop, (dim, extent per instance, comment) outermost first: the step's dims that no
        spatial loop unrolls pass through the array one vector per cycle, each fold anew (WS: the input rows, n x p
        x q of a conv, past the stationary weights). Shown even at extent 1: a stream of one vector per fold is what
        leaves a full fold idle (batch-1 FC layers)."""
        if not self.dataflow or not self.levels:
            return []
        spread = {s.dim: s.factor for s in self.spatial if s.axis == "units"}
        unrolled = {s.dim for s in self.spatial if s.axis != "units"}
        step = self.levels[-1].tile
        dims = [(d, -(-e // spread.get(d, 1))) for d, e in step if d not in unrolled]
        if not dims:
            return []
        long = [(d, e) for d, e in dims if e > 1] or dims[:1]
        noun, where = STREAMED.get(self.dataflow.lower(), ("vector", "through the array"))
        total = math.prod(e for _, e in long)
        head = (f"streamed: {total} {noun}{'s' * (total != 1)} ({' x '.join(d for d, _ in long)}) per fold, one a "
                f"cycle, {where}")
        return [(d, e, head if i == 0 else "") for i, (d, e) in enumerate(long)]


# What streams through a PE array per fold, by dataflow: the operand that does not stay in the PEs
STREAMED = {"ws": ("input row", "past the stationary weights"), "is": ("weight column", "past the stationary inputs"),
            "os": ("operand pair", "into the stationary sums")}


def _kind(value: object, kind: type[T]) -> T:
    if type(value) is not kind:        # exactly: True is no extent, 3 no flag
        raise TypeError(f"{value!r} is not a {kind.__name__}")
    return value


def _text(value: object) -> str:
    return _kind(value, str)


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _extents(pairs: Iterable[Sequence[object]]) -> tuple[tuple[str, int], ...]:
    return tuple((_text(d), _kind(e, int)) for d, e in pairs)


@dataclass(frozen=True)
class GemmView:
    """An Einsum seen as batched GEMM: out[b, m, n] += in[b, m, k] * w[b, k, n].

    m dims index the output and the input but not the weight (conv: n, p, q); n dims the output and the
    weight (conv: output channels); k dims are reduced (conv: c, r, s); b dims index all three (groups,
    attention heads). The weight is the operand with the weight role, else the second input.
    """

    b: tuple[str, ...]
    m: tuple[str, ...]
    n: tuple[str, ...]
    k: tuple[str, ...]
    extents: dict[str, int]

    def size(self, part: str) -> int:
        return math.prod(self.extents[d] for d in getattr(self, part))


def gemm_view(op: Einsum) -> GemmView:
    # a block-scaled Einsum's scales (sx[m, k/128], sw[k/128, n]) index dims the factors do; they take no part
    factors = [op.in_axes[i] for i in op.factors]
    roles = [op.inputs[i].role for i in op.factors]
    weight_index = roles.index(Role.weight) if Role.weight in roles else len(factors) - 1
    dims_of = [{d for axis in axes for d, _ in axis.terms} for axes in factors]
    w = dims_of[weight_index]
    x = set().union(*(dims for i, dims in enumerate(dims_of) if i != weight_index)) if len(dims_of) > 1 else set()
    out = set(op.out_dims)
    parts: dict[str, list[str]] = {"b": [], "m": [], "n": [], "k": []}
    for d, _ in op.loops:
        if d not in out:
            parts["k"].append(d)
        elif d in w and d in x:
            parts["b"].append(d)
        elif d in w:
            parts["n"].append(d)
        else:
            parts["m"].append(d)
    b, m, n, k = (tuple(parts[p]) for p in "bmnk")
    return GemmView(b, m, n, k, extents=dict(op.loops))


def _lies(operand: Operand) -> str:
    """Where an operand lies, as far as its mapping depends on it: ~ fused (on chip), ^ external (off chip)."""
    return "~" * operand.fused + "^" * operand.external


def op_signature(op: IROp) -> str:
    """Ops with equal signatures map the same way (ResNet's repeated blocks share one search). Kept on the op, which
    is frozen (a changed op is a new object): mapping and simulating a 100,000-op model each ask for every op's."""
    known = op.__dict__.get("_signature")       # compiler.frozen.but leaves it behind (DERIVED)
    if known is None:
        known = op.__dict__["_signature"] = _signature(op)
    return known


def _signature(op: IROp) -> str:
    operands = ";".join(f"{o.role.value}:{o.dtype.value}:{'x'.join(map(str, o.shape))}{_lies(o)}" for o in op.inputs)
    extra = ""
    if isinstance(op, Einsum):
        extra = op.describe().split("+=", 1)[1] + "|" + ",".join(f"{d}{e}" for d, e in op.loops)
        for name in [o.tensor for o in op.inputs] + [op.output.tensor]:
            extra = extra.replace(name + "[", "[")
    out = f"{op.output.dtype.value}:{'x'.join(map(str, op.output.shape))}{_lies(op.output)}"
    return f"{op.kind.value}|{op.op}|{operands}|{out}|{extra}"
