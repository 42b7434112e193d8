"""Reading system descriptions: archs/systems/*.yaml (or a path) parsed once into a System, its device preset
loaded as any arch is.

Invariant: a loaded System has passed every check in accelsim.arch.system_schema; a bad file is an ArchError
naming file, key and value, and an unknown name lists the presets with the closest one first.
"""
from __future__ import annotations

import difflib
import functools
import os
from pathlib import Path

from compiler.hardware import ArchError
from accelsim.arch.load import presets_dir, read_document, shown_path
from accelsim.arch.reference import is_path, named_arch
from accelsim.arch.system import System
from accelsim.arch.system_schema import build_system
from compiler.errors import UserError
from compiler.references import referenced
from compiler.errors import read_text


def systems_dir() -> Path:
    return presets_dir() / "systems"


def system_names() -> list[str]:
    return sorted(path.stem for path in systems_dir().glob("*.yaml"))


def load_system(name_or_path: str | os.PathLike | System) -> System:
    """A system preset by name (`dgx_a100`) or a .yaml file by path, parsed and checked (a System passes through)."""
    if isinstance(name_or_path, System):
        return name_or_path
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text:
        path = Path(text)
        if not path.is_file():
            raise ArchError(f"{text}: no such system file")
    else:
        path = systems_dir() / f"{text}.yaml"
        if not path.is_file():
            close = difflib.get_close_matches(text, system_names(), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ArchError(f"unknown system {text!r}; {hint}systems: {', '.join(system_names())} (or give a path "
                            f"to a .yaml file with `kind: system`)")
    return load_system_text(read_text(path, ArchError, shown_path(path)), shown_path(path), path.resolve())


def named_system(text: str, naming_file: str | Path) -> System:
    """The system `text` names inside `naming_file` (a published row's `system`): a preset by name, or a .yaml file
    found from that file's folder and never outside it (accelsim.arch.reference)."""
    if not is_path(text):
        return load_system(text)
    try:
        path = referenced(text, Path(naming_file).parent, (systems_dir(),))
    except UserError as error:
        raise ArchError(f"{error}: name a system preset, or a .yaml file in the folder of {Path(naming_file).name}"
                        ) from None
    return load_system(path)


def load_system_text(text: str, shown: str, source: Path) -> System:
    """A System from YAML text; messages name the file as `shown`, and its device is found from `source`'s folder
    (accelsim.arch.reference), whatever the working directory."""
    return build_system(read_document(text, shown), shown, source, functools.partial(named_arch, naming_file=source))
