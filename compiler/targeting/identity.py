"""Which arch a cached answer belongs to: its name, a hash of its YAML file and of the loaded object. Shared by the
mapper's caches and the roofline's memo of estimates."""
from __future__ import annotations

import hashlib
from pathlib import Path

from compiler.memo import Memo
from compiler.hardware import Arch

_HASHES: Memo[tuple[object, ...], str] = Memo("compiler.targeting.identity: arch files' hashes", 1024)


def arch_key(arch: Arch) -> str:
    """The arch's name and a hash of its file (an edited preset is searched afresh), and of the loaded
    object (an Arch changed in Python, say for a sweep, too); worked out once per object, which is frozen (a
    planner maps a hundred thousand ops on one Arch, and hashing it each time took a tenth of its time)."""
    known = _KEYS.get(id(arch))
    if known is not None and known[0] is arch:
        return known[1]
    key = _arch_key(arch)
    _KEYS[id(arch)] = (arch, key)          # holding the object: its id is not reused while it is here
    return key


_KEYS: Memo[int, tuple[object, str]] = Memo("compiler.targeting.identity.arch_key", 1024)


def _arch_key(arch: Arch) -> str:
    path = getattr(arch, "source_file", None)
    digest = "-"
    if path is not None and Path(path).is_file():
        stat = Path(path).stat()
        memo = (str(path), stat.st_mtime_ns, stat.st_size)
        digest = _HASHES.recall(memo, lambda: hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16])
    return f"{arch.name}:{digest}:{hash(arch)}"
