"""Resolve what the user names into pipeline inputs: a model (zoo name, .onnx, topology .csv or Graph) into a
Graph, an arch (preset name, YAML file, SCALE-Sim .cfg or Arch) into an Arch."""
from __future__ import annotations

import os
from pathlib import Path

from accelsim.arch import Arch
from accelsim.arch import load_arch as load_arch_file
from compiler.errors import ModelError
from compiler.graph import Graph


def load_arch(arch: str | os.PathLike | Arch) -> Arch:
    """An Arch as it is, a preset by name, a .yaml file, or a SCALE-Sim .cfg converted to arch YAML."""
    if isinstance(arch, Arch):
        return arch
    if str(arch).endswith(".cfg"):
        from accelsim.importers.scalesim import load_cfg

        return load_cfg(arch)
    return load_arch_file(arch)


def load_model(model: str | os.PathLike | Graph, batch: int | None = None, weights: bool = False,
               feeds: dict | None = None, **options) -> Graph:
    """A finalized Graph. Zoo models build shape-only unless `weights`; `options` go to the zoo function. An .onnx
    file also takes `bind=` (input name -> values: --bind) and `feeds` (a run's inputs), which bind the graph inputs
    it needs at import by value (compiler.bind)."""
    if isinstance(model, Graph):
        return model
    text = str(model)
    if text.lower().endswith(".csv"):
        return _load_topology(Path(text), batch, options)
    if text.endswith(".onnx") or os.sep in text or Path(text).is_file():
        return _load_file(Path(text), batch, weights, options, feeds)
    from compiler import zoo

    for key, flag in (("shapes", "--shape"), ("bind", "--bind")):
        if key in options:
            raise ModelError(f"{flag} applies to ONNX files; built-in model {text!r} takes --batch, --seq and --opt")
    if batch is not None:
        options["batch"] = batch
    if weights:
        _check_room(text, zoo.build(text, weights=False, **options))
    return zoo.build(text, weights=weights, **options)


def _check_room(name: str, shapes: Graph) -> None:
    """Refuse, before allocating, random weights that would not fit in the memory this machine has free."""
    elements = sum(shapes.tensors[w].elements for w in shapes.weights)
    needed = elements * 16   # float64 draws, then the stored copy
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if needed > free // 2:
        raise ModelError(f"model {name!r} has {elements / 1e9:.2f} G parameters: random weights need about "
                         f"{needed / 2**30:.0f} GiB, and {free / 2**30:.0f} GiB is free; evaluate a smaller "
                         f"variant (e.g. --opt layers=2) or simulate it, which needs no weights")


def _load_topology(path: Path, batch: int | None, options: dict) -> Graph:
    """A SCALE-Sim topology CSV: batch 1 and no options, as SCALE-Sim has neither."""
    from compiler.topology import load_topology

    if batch not in (None, 1) or options:
        given = ", ".join([f"batch {batch}"] * (batch not in (None, 1)) + sorted(options))
        raise ModelError(f"{path}: a SCALE-Sim topology has batch 1 and no options ({given} given)")
    return load_topology(path)


def _load_file(path: Path, batch: int | None, weights: bool, options: dict, feeds: dict | None = None) -> Graph:
    from compiler.frontend import load_onnx

    options = dict(options)
    seq, shapes = options.pop("seq", None), options.pop("shapes", None)   # --seq and --shape bind symbolic dims
    bind = options.pop("bind", None)                                       # --bind binds inputs by value
    if options:
        raise ModelError(f"{path}: options {', '.join(sorted(options))} apply to built-in models only")
    return load_onnx(path, input_shapes=shapes, batch=batch, weights=weights, seq=seq, input_values=bind,
                     feeds=feeds)
