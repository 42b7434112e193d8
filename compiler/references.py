"""Files named inside other files (a system's `device:`, a sweep's `base:`, ONNX external data, a dataset's
measurements): resolved against the naming file's folder, links followed, and kept inside the folders allowed.

Invariant: a path `referenced` returns lies, once every link is followed, under the naming file's folder or one of
the folders the caller allows (the presets, folders the user named), so a file cannot make accelsim read, and an
error quote, a file the user never pointed it at (`device: ../../.ssh/id_ed25519`).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from compiler.errors import UserError

QUOTED_CHARS = 60   # the most of a value from a file an error quotes: enough to recognise it, too little to leak it


def quoted(value: object) -> str:
    """repr(value), cut to QUOTED_CHARS with `...` and the full length: what messages quote of a file's content."""
    text = repr(value)
    return text if len(text) <= QUOTED_CHARS else f"{text[:QUOTED_CHARS]}... ({len(text)} characters)"


def referenced(text: str, folder: str | Path, allowed: Iterable[str | Path] = ()) -> Path:
    """The file `text` names inside a file in `folder`: relative to `folder` (an absolute path as it is), links
    followed. A UserError (its message names `text` and where it leads, never what the file holds) unless it lies
    under `folder` or one of `allowed`."""
    if not isinstance(text, str) or not text.strip() or "\0" in text:
        raise UserError(f"{quoted(text)} is not a file name")
    folder = Path(folder).absolute().resolve()
    try:
        resolved = (folder / text).resolve()          # an absolute `text` replaces `folder`
    except (OSError, RuntimeError) as error:          # a link loop
        raise UserError(f"{quoted(text)}: cannot follow its links ({error})") from None
    roots = [folder, *(Path(root).resolve() for root in allowed)]
    if not any(resolved.is_relative_to(root) for root in roots):
        raise UserError(f"{quoted(text)} resolves to {resolved}, outside {' and '.join(str(r) for r in roots)}")
    return resolved
