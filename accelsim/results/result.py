"""A simulation result: per-op estimates and totals, with JSON, CSV and table views.

The JSON layout is versioned (SCHEMA_VERSION) and documented in docs/result-schema.md; a change that
removes or renames a field bumps the version.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class OpResult:
    name: str
    node: str
    op: str                          # frontend op type (Conv, MatMul, Relu...)
    kind: str                        # IR kind: einsum, map, reduce, move
    shape: tuple[int, ...]           # output shape
    dtype: str                       # the dtype of its data
    rate_dtype: str                  # the dtype whose peak rate applies (wider where the unit lacks `dtype`)
    unit: str                        # the compute unit it runs on
    macs: int
    ops: int                         # vector-unit operations
    bytes: int                       # compulsory bytes: operands read once, output written once
    bytes_by_level: dict[str, int]   # bytes crossing each memory level
    compute_seconds: float
    level_seconds: dict[str, float]  # bytes / bandwidth per level
    latency_seconds: float
    seconds: float
    cycles: int
    bound: str                       # "compute", a memory level's name, "latency", "launch", or "view"
    utilisation: float              # share of the unit's peak this op sustains
    energy_j: dict[str, float]       # per component (compute unit or memory level)
    # -- tile fidelity only (None or empty at roofline fidelity) --------------------------------------
    compute_cycles: int | None = None                 # cycles the unit computes; cycles = compute + stall
    stall_cycles: int | None = None                   # cycles the unit waits within the op
    stall_cycles_by_level: dict[str, int] = field(default_factory=dict)   # the wait blamed on each level
    bytes_read_by_level: dict[str, int] = field(default_factory=dict)     # loads out of each level
    bytes_written_by_level: dict[str, int] = field(default_factory=dict)  # stores into each level
    accesses_by_level: dict[str, int] = field(default_factory=dict)       # bytes / the level's access size
    work: int | None = None                           # MACs or vector ops incl. ragged-edge padding
    tiles: int | None = None                          # compute instructions in the Program
    start_cycle: int | None = None                    # when the op's first instruction issued
    kernel: str = ""                 # the op whose kernel this one is fused into ("": a kernel of its own)

    def to_dict(self) -> dict:
        d = {key: getattr(self, key) for key in self.__dataclass_fields__}
        d["shape"] = list(self.shape)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> OpResult:
        """The OpResult `to_dict` gave, back from JSON values; a KeyError for a field missing or extra, a TypeError for
        a value of another type than the field's (an int where a float belongs is refused, as == would not tell)."""
        if type(data) is not dict or set(data) != set(OP_FIELDS):
            raise KeyError(f"an op with fields {sorted(data)}")
        return cls(**{name: check(data[name]) for name, check in OP_FIELDS.items()})

    def to_row(self) -> list:
        """`to_dict`'s values in field order (OP_FIELDS): a stored run writes the names once."""
        return list(self.to_dict().values())

    @classmethod
    def from_row(cls, row: list) -> OpResult:
        """The OpResult `to_row` gave; a KeyError for a row of another length. Its values' types are not checked
        again: a reader of data it has not checked itself (a stored run's digest vouches) uses `from_dict`."""
        if type(row) is not list or len(row) != len(OP_FIELDS):
            raise KeyError(f"an op row of other than {len(OP_FIELDS)} fields")
        return cls(**{**dict(zip(OP_FIELDS, row)), "shape": tuple(row[_SHAPE])})


@dataclass(frozen=True)
class Result:
    model: dict
    arch: dict
    fidelity: str
    ops: list[OpResult]
    notes: list[str] = field(default_factory=list)
    # what the model holds on the device as it runs (accelsim.sim.memory.footprint): weights, activations, inputs,
    # peak, against the device's capacity; empty where nobody asked (a sweep point's ops)
    memory: dict = field(default_factory=dict)
    timeline: object | None = field(default=None, repr=False, compare=False)   # tile: for accelsim.results.trace
    # tile: op name -> the compiler.mapping.Mapping it was simulated with (not in the JSON: draw it with loop_nests)
    mappings: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        # A report or JSON someone shares names the arch and model files as shown_file does, never by a path of the
        # machine it ran on; every maker of a Result (build, the run cache, training) hands in the absolute paths.
        if isinstance(self.arch.get("file"), str):
            object.__setattr__(self, "arch", {**self.arch, "file": shown_file(self.arch["file"])})
        if isinstance(self.model.get("source"), str):
            object.__setattr__(self, "model", {**self.model, "source": shown_file(self.model["source"])})

    # -- totals -------------------------------------------------------------------------------------
    @property
    def seconds(self) -> float:
        return sum(op.seconds for op in self.ops)

    @property
    def cycles(self) -> int:
        return sum(op.cycles for op in self.ops)

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.ops)

    @property
    def fits(self) -> bool | None:
        """Whether the model's memory fits the device's (None: not measured)."""
        return self.memory["peak"] <= self.memory["capacity"] if self.memory else None

    def totals(self) -> dict:
        by_level: dict[str, int] = {}
        energy: dict[str, float] = {}
        bounds: dict[str, int] = {}
        for op in self.ops:
            for level, n in op.bytes_by_level.items():
                by_level[level] = by_level.get(level, 0) + n
            for part, joules in op.energy_j.items():
                energy[part] = energy.get(part, 0.0) + joules
            bounds[op.bound] = bounds.get(op.bound, 0) + 1
        seconds = self.seconds
        peak = self.arch.get("peak_macs_per_second", 0.0)
        tile = self._tile_totals(seconds, sum(energy.values()))
        return {
            "seconds": seconds,
            "cycles": self.cycles,
            "macs": self.macs,
            "ops": sum(op.ops for op in self.ops),
            "bytes": sum(op.bytes for op in self.ops),
            "bytes_by_level": by_level,
            "utilisation": self.macs / (peak * seconds) if peak and seconds else 0.0,
            "energy_j": sum(energy.values()),
            "energy_by_component_j": energy,
            "average_power_w": sum(energy.values()) / seconds if seconds else 0.0,
            "bound_counts": bounds,
            **tile,
        }

    def _tile_totals(self, seconds: float, joules: float) -> dict:
        if not any(op.compute_cycles is not None for op in self.ops):
            return {}
        sums: dict[str, dict[str, int]] = {"stall_cycles_by_level": {}, "bytes_read_by_level": {},
                                           "bytes_written_by_level": {}}
        for op in self.ops:
            for key, total in sums.items():
                for level, n in getattr(op, key).items():
                    total[level] = total.get(level, 0) + n
        tdp = self.arch.get("tdp_w") or 0.0
        return {"compute_cycles": sum(op.compute_cycles or 0 for op in self.ops),
                "stall_cycles": sum(op.stall_cycles or 0 for op in self.ops), **sums,
                "power_fraction_of_tdp": joules / seconds / tdp if seconds and tdp else 0.0}

    def loop_nests(self) -> dict[str, str]:
        """Op name -> the loop nest its mapping prints (`accelsim map`'s view), in execution order; empty at
        roofline fidelity, which maps nothing."""
        return {op.name: self.mappings[op.name].text() for op in self.ops if op.name in self.mappings}

    # -- views --------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        fit = {"memory": self.memory, "fits": self.fits} if self.memory else {}
        return {"version": SCHEMA_VERSION, "model": self.model, "arch": self.arch, "fidelity": self.fidelity,
                "totals": self.totals(), **fit, "ops": [op.to_dict() for op in self.ops], "notes": self.notes}

    def to_record(self, rows: bool = False) -> dict:
        """What a stored run keeps (accelsim.sim.cache): every field as JSON values but the timeline (a traced run is
        never stored) and the mappings (kept beside it, Mapping.to_dict); each op a dict, or with `rows` a row."""
        return {"model": self.model, "arch": self.arch, "fidelity": self.fidelity, "notes": list(self.notes),
                "memory": self.memory, "ops": [op.to_row() if rows else op.to_dict() for op in self.ops]}

    @classmethod
    def from_record(cls, data: dict, rows: bool = False) -> Result:
        """The Result `to_record` gave, without mappings; a KeyError or TypeError for a field missing or extra or a
        value of another type (each op's types checked by OpResult.from_dict; with `rows`, only the layout:
        OpResult.from_row)."""
        if type(data) is not dict or set(data) != RECORD_FIELDS:
            raise KeyError(f"a result with fields {sorted(data)}")
        ops = [OpResult.from_row(op) if rows else OpResult.from_dict(op) for op in data["ops"]]
        return cls(model=_kind(data["model"], dict), arch=_kind(data["arch"], dict), fidelity=_text(data["fidelity"]),
                   ops=ops, notes=[_text(note) for note in data["notes"]], memory=_kind(data["memory"], dict))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_csv(self) -> str:
        """One row per op; per-level bytes and times as `bytes:<level>` and `seconds:<level>` columns."""
        levels = list(self.arch.get("memory_levels", []))
        scalar = ["name", "node", "op", "kind", "shape", "dtype", "unit", "macs", "ops", "bytes", "cycles",
                  "seconds", "compute_seconds", "latency_seconds", "bound", "utilisation", "compute_cycles",
                  "stall_cycles"]
        header = scalar + [f"bytes:{lv}" for lv in levels] + [f"seconds:{lv}" for lv in levels] + ["energy_j"]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        for op in self.ops:
            row = [getattr(op, key) for key in scalar]
            row[4] = "x".join(map(str, op.shape))
            row += [op.bytes_by_level.get(lv, 0) for lv in levels]
            row += [op.level_seconds.get(lv, 0.0) for lv in levels]
            row.append(sum(op.energy_j.values()))
            writer.writerow(row)
        return buffer.getvalue()

    def table(self, limit: int | None = None, width: int | None = 120) -> str:
        """The terminal table, `width` columns wide (None: every column, as wide as it takes)."""
        from accelsim.results.table import render

        return render(self, limit, width)

    def __str__(self) -> str:
        return self.table()


def _checker(annotation: str):
    """What reads an OpResult field annotated `annotation` back from JSON, checking each value's type exactly."""
    plain = {"str": str, "int": int, "float": float}
    if annotation in plain:
        return lambda value: _kind(value, plain[annotation])
    if annotation == "int | None":
        return lambda value: None if value is None else _kind(value, int)
    if annotation == "tuple[int, ...]":
        return lambda value: tuple(_kind(n, int) for n in _kind(value, list))
    if annotation in ("dict[str, int]", "dict[str, float]"):
        kind = plain[annotation[10:-1]]
        return lambda value: {_text(k): _kind(v, kind) for k, v in _kind(value, dict).items()}
    raise TypeError(f"OpResult.from_dict cannot read a field of type {annotation}")     # a new field's type


def _kind(value, kind: type):
    if type(value) is not kind:
        raise TypeError(f"{value!r} is not a {kind.__name__}")
    return value


def _text(value) -> str:
    return _kind(value, str)


OP_FIELDS = {f.name: _checker(f.type) for f in dataclasses.fields(OpResult)}     # in order, each with its reader
_SHAPE = list(OP_FIELDS).index("shape")      # the one field JSON cannot give back as it was (a tuple)
# a Result's fields a record holds: all but the timeline (never stored) and the mappings (kept beside)
RECORD_FIELDS = {f.name for f in dataclasses.fields(Result)} - {"timeline", "mappings"}


def shown_file(text: str) -> str:
    """A file as results name it: a preset by its name (`tpu_v1`, `dgx_h100`), a file under the working folder by
    its path relative to it (`my/sa.yaml`), any other by its file name alone; text naming no file (`zoo model
    'resnet18'`) as it is."""
    from accelsim.arch.load import presets_dir

    path = Path(text)
    try:
        if not path.is_absolute() and not path.is_file():
            return text
        path = path.resolve()
        presets = presets_dir()
        if path.suffix == ".yaml" and path.parent in (presets, presets / "systems"):
            return path.stem
        return str(path.relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):       # outside the working folder, that folder gone, or no path (a NUL in it)
        return path.name
