"""Resolve what the user calls a model (a zoo name, an .onnx path, or a Graph) into a Graph."""
from __future__ import annotations

import os
from pathlib import Path

from compiler.errors import ModelError
from compiler.graph import Graph


def load_model(model: str | os.PathLike | Graph, batch: int | None = None, weights: bool = False,
               **options) -> Graph:
    """A finalized Graph. Zoo models build shape-only unless `weights`; `options` go to the zoo function."""
    if isinstance(model, Graph):
        return model
    text = str(model)
    if text.endswith(".onnx") or os.sep in text or Path(text).is_file():
        return _load_file(Path(text), batch, weights, options)
    from compiler import zoo

    if batch is not None:
        options["batch"] = batch
    return zoo.build(text, weights=weights, **options)


def _load_file(path: Path, batch: int | None, weights: bool, options: dict) -> Graph:
    from compiler.frontend import load_onnx

    if options:
        raise ModelError(f"{path}: options {', '.join(sorted(options))} apply to built-in models only")
    return load_onnx(path, batch=batch, weights=weights)
