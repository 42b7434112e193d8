"""What `eval` starts from: the memory budget it runs under, and input arrays read from an .npz file.

The budget is half the memory this machine has available, or ACCELSIM_EVAL_MEMORY (`8 GiB`, `500MB`). An .npz
is read member by member: each array's header (its shape and dtype) is read first, and the bytes it declares are
checked against the budget before any is allocated or inflated, so a header that lies or a deflate bomb is a
one-line error. Invariant: any file ends in arrays or a UserError naming it.
"""
from __future__ import annotations

import math
import os
import zipfile
import zlib

import numpy as np

from compiler.errors import UserError
from compiler.ops import room
from compiler.ops.room import Budget

ENV = "ACCELSIM_EVAL_MEMORY"
_FORMAT = "an .npz file (a zip of .npy arrays, one per input, as np.savez(path, name=array) writes it)"


def eval_budget() -> Budget:
    """The bytes an evaluation may hold: $ACCELSIM_EVAL_MEMORY, else half of the memory available."""
    text = os.environ.get(ENV, "").strip()
    if text:
        from accelsim.arch.units import UnitError, parse_size

        try:
            nbytes = parse_size(text)
        except UnitError as error:
            raise UserError(f"{ENV}={text!r}: {error}") from None
        return Budget(nbytes, f"{ENV}={text}")
    available = _available()
    return Budget(available // 2, f"half the {available / 2**30:.1f} GiB available; {ENV} sets it")


def _available() -> int:
    """MemAvailable (free memory plus what the kernel can reclaim; else the free pages), or less where this
    process is held to less: by its address-space limit (ulimit -v) or its cgroup's memory.max."""
    page = os.sysconf("SC_PAGE_SIZE")
    available = _number("/proc/meminfo", "MemAvailable:", 1024) or os.sysconf("SC_AVPHYS_PAGES") * page
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        mapped = (_number("/proc/self/statm", "", page) or 0)
        available = min(available, max(soft - mapped, 0))
    limit, used = _number("/sys/fs/cgroup/memory.max"), _number("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        available = min(available, max(limit - used, 0))
    return available


def _number(path: str, key: str = "", scale: int = 1) -> int | None:
    """The first number of `path` (of its line starting with `key`) times `scale`; None where there is none
    (no such file, or `max`)."""
    try:
        with open(path) as file:
            for line in file:
                if line.startswith(key):
                    return int(line[len(key):].split()[0]) * scale
    except (OSError, ValueError, IndexError):
        pass
    return None


def read_arrays(path: str, budget: Budget) -> dict[str, np.ndarray]:
    """The arrays of the .npz at `path` by name, none of them larger together than `budget`."""
    try:
        with open(path, "rb") as file:
            magic = file.read(6)
        if magic == b"\x93NUMPY":
            raise UserError(f"{path}: a single .npy array names no input; give {_FORMAT}")
        if not magic.startswith(b"PK"):
            raise UserError(f"{path}: not {_FORMAT}")
        with zipfile.ZipFile(path) as archive:
            return _members(path, archive, budget)
    except (OSError, EOFError, ValueError, RuntimeError, NotImplementedError, zipfile.BadZipFile,
            zipfile.LargeZipFile, zlib.error) as error:
        # ValueError: numpy's header checks and short data; RuntimeError: an encrypted member;
        # NotImplementedError: a compression zipfile does not know
        raise UserError(f"{path}: cannot read input arrays ({getattr(error, 'strerror', None) or error})") from None


def _members(path: str, archive: zipfile.ZipFile, budget: Budget) -> dict[str, np.ndarray]:
    declared, total = [], 0
    for info in archive.infolist():
        if info.is_dir():
            continue
        if not info.filename.endswith(".npy"):
            raise UserError(f"{path}: member {info.filename!r} is not an .npy array; give {_FORMAT}")
        name = info.filename[:-len(".npy")]
        with archive.open(info) as member:
            shape, dtype = _header(member)
        if dtype.hasobject:
            raise UserError(f"{path}: array {name!r} holds Python objects ({dtype}), which are not read")
        nbytes = math.prod(shape) * dtype.itemsize
        room.check(f"{path}: array {name!r} of shape {list(shape)} {dtype} needs", nbytes, budget, total)
        total += nbytes
        declared.append((info, name))
    arrays = {}
    for info, name in declared:
        with archive.open(info) as member:
            arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def _header(member) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    else:
        raise ValueError(f".npy format version {version[0]}.{version[1]} is not read (1.0 and 2.0 are)")
    return tuple(shape), dtype
