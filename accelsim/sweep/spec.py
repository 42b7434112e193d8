"""A sweep spec (YAML): the base arch, the axes by key path, derived keys, models, objectives and strategy.

Invariant: load_spec returns only a spec that can run: every key path resolves in the base arch, every axis
value passes the arch schema at its own key, every model builds, every objective applies. Anything else is
a SpecError naming the spec file and the key (`sweep.yaml: axes.memory.dram.bandwidth: ...`), raised
before any point is evaluated. What only fails in combination (a 16x16 array claiming 1024 MACs per cycle)
is left to the points, which record it as their reason.
"""
from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from accelsim.arch import ArchError, ArchKind, arch_document
from accelsim.arch.load import YamlRefused, bounded_yaml
from accelsim.arch.reference import named_arch
from accelsim.sim import FIDELITIES
from accelsim.sweep.axes import Axis, check_dtype, check_values, fitted, parse_axes, parse_derived_keys
from accelsim.sweep.derive import Derived
from compiler.errors import UserError, read_text
from compiler.hardware.profiles import profile

SPEC_VERSION = 1
OBJECTIVES = {   # name -> (unit, what; all are minimised)
    "latency": ("s", "simulated seconds per inference"),
    "energy": ("J", "joules per inference"),
    "area": ("cells", "PE arrays' Yosys cell count, accelsim.arch.area's RTL fit (systolic and ternary arrays)"),
    "edp": ("J s", "energy-delay product"),
}
STRATEGIES = ("grid", "random", "adaptive")
_TOP = ("base", "axes", "models", "objectives")
_TOP_OPTIONAL = ("version", "derive", "dtype", "fidelity", "strategy")
_STRATEGY = ("kind", "points", "seed", "initial", "ranks")


class SpecError(UserError):
    """A sweep spec that cannot run: names the spec file and the key."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    options: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.options)
        return f"{self.name}({shown})" if shown else self.name


@dataclass(frozen=True)
class Strategy:
    kind: str
    points: int | None = None        # random: how many; adaptive: the most it evaluates (None: no limit)
    seed: int = 0
    initial: int | None = None       # adaptive: seeded random points it starts from
    ranks: int = 2                   # adaptive: non-dominated layers whose neighbours it walks


@dataclass(frozen=True)
class Spec:
    path: Path
    base: str                        # as written
    base_file: Path
    base_kind: ArchKind
    base_doc: dict = field(compare=False, repr=False)   # the base arch YAML, parsed; never mutated
    axes: tuple[Axis, ...] = ()
    derived: tuple[Derived, ...] = ()
    models: tuple[ModelSpec, ...] = ()
    dtype: str | None = None         # None: each point's native dtype (unless a dtype axis says)
    fidelity: str = "tile"
    objectives: tuple[str, ...] = ("latency", "energy")
    strategy: Strategy = Strategy("grid")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(axis.values) for axis in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def params(self, coord: tuple[int, ...]) -> dict:
        return {axis.key: axis.values[i] for axis, i in zip(self.axes, coord)}

    def document(self, coord: tuple[int, ...]) -> tuple[dict, str | None]:
        """The arch document of one point (axes set, then derived keys), and its dtype; DeriveError if a
        derived key cannot be computed for it."""
        doc, dtype = copy.deepcopy(self.base_doc), self.dtype
        for axis, i in zip(self.axes, coord):
            if axis.location is None:
                dtype = axis.values[i]
            else:
                axis.location.set(doc, fitted(axis.values[i], axis.location, self.base_doc))
        for derived in self.derived:
            derived.apply(doc)
        return doc, dtype


def load_spec(path: str | Path) -> Spec:
    spec_path = Path(path)
    if not spec_path.is_file():
        raise SpecError(f"{spec_path}: no such sweep spec")
    shown = str(spec_path)
    try:
        data = bounded_yaml(read_text(spec_path, SpecError))
    except YamlRefused as error:
        raise SpecError(f"{shown}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise SpecError(f"{shown}: {line}YAML syntax error: {getattr(error, 'problem', None) or error}") from None

    def fail(key: str, message: str) -> SpecError:
        return SpecError(f"{shown}: {key}: {message}")

    _keys(data, "", _TOP, _TOP_OPTIONAL, fail)
    if data.get("version", SPEC_VERSION) != SPEC_VERSION:
        raise fail("version", f"unsupported version {data['version']!r}; this accelsim reads version {SPEC_VERSION}")
    base_file, base_doc, kind = _base(data["base"], spec_path, fail)
    axes = parse_axes(data["axes"], base_doc, fail)
    derived = parse_derived_keys(data.get("derive") or {}, base_doc, axes, fail)
    for axis in axes:
        check_values(axis, base_doc, derived, base_file, fail)
    dtype = data.get("dtype")
    if dtype is not None:
        check_dtype(dtype, "dtype", fail)
        if any(a.location is None for a in axes):
            raise fail("dtype", "dtype is also an axis; give it in one place")
    fidelity = data.get("fidelity", "tile")
    if fidelity not in FIDELITIES:
        raise fail("fidelity", f"unknown fidelity {fidelity!r}; use one of {', '.join(FIDELITIES)}")
    objectives = _objectives(data["objectives"], kind, fail)
    size = math.prod(len(axis.values) for axis in axes)
    return Spec(spec_path, str(data["base"]), base_file, kind, base_doc, axes, derived,
                _models(data["models"], fail), dtype, fidelity, objectives,
                _strategy(data.get("strategy", {"kind": "grid"}), size, fail))


def _keys(value, where: str, required, optional, fail) -> dict:
    allowed = (*required, *optional)
    if not isinstance(value, dict):
        raise fail(where or "(top level)", f"expected a mapping with keys {', '.join(allowed)}")
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise fail(f"{where}.{key}" if where else str(key), f"unknown key; {hint}allowed: {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise fail(f"{where}.{key}" if where else key, "missing (required: " + ", ".join(required) + ")")
    return value


def _base(base, spec_path: Path, fail) -> tuple[Path, dict, ArchKind]:
    """The base arch: a preset, or a .yaml file found from the spec's folder and never outside it or the presets
    (accelsim.arch.reference)."""
    try:
        arch = named_arch(base, spec_path)
    except ArchError as error:
        raise fail("base", str(error)) from None
    if arch.source_file.suffix not in (".yaml", ".yml"):
        raise fail("base", f"{base!r}: a sweep needs an arch YAML file (convert a .cfg with `accelsim arch convert`)")
    return arch.source_file, arch_document(arch), arch.kind


def _models(raw, fail) -> tuple[ModelSpec, ...]:
    from compiler import zoo

    if not isinstance(raw, list) or not raw:
        raise fail("models", "expected a list of zoo models, e.g. [resnet18, {name: resnet18, options: {image: 64}}]")
    models = []
    for i, entry in enumerate(raw):
        where = f"models[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        _keys(entry, where, ("name",), ("options",), fail)
        options = entry.get("options") or {}
        if not isinstance(options, dict):
            raise fail(f"{where}.options", f"{options!r} is not a mapping of model options")
        for key, value in options.items():
            if not isinstance(value, (str, int, float, bool)):
                raise fail(f"{where}.options.{key}", f"{value!r}: an option is a number, a string or true/false")
        if entry["name"] not in zoo.MODELS:
            raise fail(f"{where}.name", f"unknown model {entry['name']!r}; the zoo has: {', '.join(zoo.MODELS)}")
        try:
            zoo.build(entry["name"], weights=False, **options)
        except (UserError, TypeError, ValueError) as error:
            raise fail(where, str(error)) from None
        model = ModelSpec(entry["name"], tuple(sorted(options.items())))
        if model in models:
            raise fail(where, f"{model.label} is listed twice")
        models.append(model)
    return tuple(models)


def _objectives(raw, kind: ArchKind, fail) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise fail("objectives", f"expected a list, some of {', '.join(OBJECTIVES)}")
    for i, name in enumerate(raw):
        if not isinstance(name, str) or name not in OBJECTIVES:   # a list inside the list is unhashable
            close = difflib.get_close_matches(str(name), OBJECTIVES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise fail(f"objectives[{i}]", f"unknown objective {name!r}; {hint}use {', '.join(OBJECTIVES)}")
        if name == "area" and not profile(kind).pe_array:
            raise fail(f"objectives[{i}]",
                       f"area applies to systolic and ternary arrays only; the base is {kind.value}")
    if len(set(raw)) != len(raw):
        raise fail("objectives", f"{raw!r} lists an objective twice")
    return tuple(raw)


def _strategy(raw, size: int, fail) -> Strategy:
    d = _keys(raw, "strategy", ("kind",), _STRATEGY[1:], fail)
    if d["kind"] not in STRATEGIES:
        raise fail("strategy.kind", f"unknown strategy {d['kind']!r}; use one of {', '.join(STRATEGIES)}")
    for key in ("points", "seed", "initial", "ranks"):
        value = d.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (key != "seed")):
            raise fail(f"strategy.{key}", f"{value!r} is not a {'non-negative' if key == 'seed' else 'positive'} "
                                          "whole number")
    if d["kind"] == "random":
        if d.get("points") is None:
            raise fail("strategy.points", "missing (random samples this many points of the grid)")
        if d["points"] > size:
            raise fail("strategy.points", f"{d['points']} is more than the grid's {size} points")
    if d["kind"] == "grid" and (d.get("points") or d.get("initial")):
        raise fail("strategy", "grid evaluates every point; points and initial apply to random and adaptive")
    if d["kind"] != "adaptive" and (d.get("initial") or d.get("ranks")):
        raise fail("strategy", "initial and ranks apply to the adaptive strategy only")
    return Strategy(d["kind"], d.get("points"), d.get("seed") or 0, d.get("initial"), d.get("ranks") or 2)
