"""One file of an on-disk cache (the mappings' and the runs'): a header line {"key", "digest"} and a body, where the
digest is the SHA-256 of the key and the body, written aside and renamed into place.

Invariant: a body is handed back only from a regular file (no FIFO, device or link), no larger than the caller's
limit, owned by this user and writable by no other, in this user's own folder of the cache, that carries the key
asked for and the digest of that key and its body. Anything else is warned about once (CacheWarning, naming the
file and why), removed where it can be, and computed again. A folder several users share keeps each one's entries
apart (ACCELSIM_CACHE/user-<uid>/), so another user's file can neither be served nor replace one of yours unseen.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any

from compiler.errors import CacheWarning
from compiler.memo import Memo

UID = os.geteuid() if hasattr(os, "geteuid") else None      # None where files have no owner to check (Windows)
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_SAFE: Memo[Path, bool] = Memo("compiler.map.entry.folder", 256)      # user folders checked (one lstat each)


def folder(root: Path | None, part: str) -> Path | None:
    """`root`/user-<uid>/`part`, or None where the cache is off (`root` None) or the user folder is not this user's
    own: a folder another user owns, or one others may write, could have its entries replaced or removed."""
    if root is None:
        return None
    mine = root / user()
    safe = _SAFE.get(mine)
    if safe is None:
        problem = _foreign(mine)
        if problem:
            warnings.warn(CacheWarning(f"{mine}: {problem}; the cache is not used (make the folder yours and "
                                       f"not writable by others: chmod go-w, or set ACCELSIM_CACHE elsewhere)"))
        safe = _SAFE[mine] = problem is None
    return mine / part if safe else None


def user() -> str:
    """The name of this user's folder in the cache: user-<uid>."""
    return f"user-{UID}" if UID is not None else "user"


def _foreign(path: Path) -> str | None:
    """Why the user folder `path` is not safe to use, or None (absent is safe: `write` makes it, mode 0700)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder (a link or a file)"
    return _not_mine(info)


def _not_mine(info: os.stat_result) -> str | None:
    if UID is None:
        return None
    if info.st_uid != UID:
        return f"is owned by another user (uid {info.st_uid}; yours is {UID})"
    if info.st_mode & OTHERS_WRITE:
        return f"can be written by other users (mode {stat.filemode(info.st_mode)})"
    return None


def digest(key: list[Any], body: bytes) -> str:
    """What a file's header carries: the SHA-256 of its key (as JSON) and its body."""
    return hashlib.sha256(json.dumps(key, separators=(",", ":")).encode() + b"\n" + body).hexdigest()


def read(path: Path, key: list[Any], limit: int) -> bytes | None:
    """The body of the file at `path` holding `key`; None if there is none, or (warned about and removed) if it is
    not a regular file of this user's, is over `limit` bytes, or does not carry `key` and the digest of its body."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        bad(path, f"cannot be read ({error.strerror or error})")
        return None
    if not stat.S_ISREG(info.st_mode):
        bad(path, f"is {_kind(info.st_mode)}, not a regular file")
        return None
    try:
        handle = os.open(path, _FLAGS)        # no link followed, no wait on a FIFO swapped in since the lstat
    except FileNotFoundError:
        return None
    except OSError as error:
        bad(path, f"cannot be read ({error.strerror or error})")
        return None
    with open(handle, "rb") as file:
        info = os.fstat(file.fileno())        # the file read, not the name looked at
        if not stat.S_ISREG(info.st_mode):
            bad(path, f"is {_kind(info.st_mode)}, not a regular file")
            return None
        problem = _not_mine(info)
        if problem:
            bad(path, problem)
            return None
        if info.st_size > limit:              # a sparse giant is refused by its size, before a byte is read
            bad(path, f"holds {info.st_size:,} bytes, over the {limit:,} a cache file may hold")
            return None
        data = file.read(limit + 1)
    if len(data) > limit:
        bad(path, f"holds over the {limit:,} bytes a cache file may hold")
        return None
    head, _, body = data.partition(b"\n")
    try:
        header = json.loads(head)
        if type(header) is not dict or set(header) != {"key", "digest"}:
            bad(path, "has no header of the current layout")
            return None
    except (ValueError, RecursionError):
        bad(path, "has no header of the current layout")
        return None
    if header["key"] != key:
        bad(path, "holds another key than its name says")
        return None
    if header["digest"] != digest(key, body):
        bad(path, "does not match its digest: it was changed after it was written")
        return None
    return body


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a plain file"


def bad(path: Path, why: str) -> None:
    """Warns that the file at `path` is not used, and why, and removes it (the caller computes it again and writes
    it anew); a folder in its place is left as it is."""
    try:
        os.unlink(path)
        done = "removed, and computed again"
    except OSError:
        done = "ignored, and computed again"
    warnings.warn(CacheWarning(f"cache file {path} {why}; {done}"))
    return None


def write(path: Path, key: list[Any], body: str, limit: int) -> None:
    """The header and `body` written aside and renamed onto `path`, readable and writable by this user only: a
    reader sees the old file or the new one, never half of one, however many processes write at once; a folder
    that cannot be written is no error, and a file over `limit` bytes (that `read` would refuse) is not written."""
    data = body.encode()
    text = json.dumps({"key": key, "digest": digest(key, data)}, separators=(",", ":")).encode() + b"\n" + data
    if len(text) > limit:
        return
    temporary = None
    try:
        mine = next(p for p in path.parents if p.name == user())
        mine.parent.mkdir(parents=True, exist_ok=True)
        mine.mkdir(mode=0o700, exist_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=".", suffix=".tmp", delete=False) as out:
            temporary = out.name                  # mode 0600
            out.write(text)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
