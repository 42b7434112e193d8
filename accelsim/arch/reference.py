"""The arch a file names (a system's `device:`, a sweep spec's `base:`): a preset by name, or a .yaml file found
from the naming file's folder, never outside it, the presets, or the folders the caller allows.

Invariant: the same file names the same arch from any working directory, and no such name reads a file outside
those folders (compiler.references keeps that rule, for ONNX external data too).
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from compiler.hardware import Arch, ArchError
from accelsim.arch.load import load_arch, presets_dir
from compiler.errors import UserError
from compiler.references import quoted, referenced


def is_path(text: str) -> bool:
    """Whether a name in a file is a path (`devices/a.yaml`, `my.yaml`) rather than a preset's name (`a100`)."""
    return text.endswith((".yaml", ".yml", ".cfg")) or os.sep in text or "/" in text


def named_arch(text, naming_file: str | Path, allowed: Iterable[str | Path] = ()) -> Arch:
    """The arch `text` names inside `naming_file`; an ArchError saying why not (its message names `text`, never
    the content of a file it did not read as an arch)."""
    if not isinstance(text, str) or not text.strip():
        raise ArchError(f"{quoted(text)} is not a preset name or a .yaml file")
    if not is_path(text):
        return load_arch(text)
    try:
        path = referenced(text, Path(naming_file).parent, (presets_dir(), *allowed))
    except UserError as error:
        raise ArchError(f"{error}: name a preset, or a .yaml file in the folder of {Path(naming_file).name}"
                        ) from None
    if not path.is_file():
        raise ArchError(f"{quoted(text)}: no such arch file ({path})")
    return load_arch(path)
