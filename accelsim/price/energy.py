"""Energy = actions x energy per action, in one place: MACs or vector ops on a unit, bytes read and written at
each memory level (a level's read and write energy are per access of `access` bytes)."""
from __future__ import annotations


def energy_j(unit, dtype, work: int, memory, read: dict[str, int], written: dict[str, int]) -> dict[str, float]:
    """Joules per component: `work` actions on `unit` at `dtype`'s energy, and per level in `memory` the bytes
    `read` from it and `written` into it. Components that spent nothing are left out."""
    parts: dict[str, float] = {}
    if work:
        parts[unit.name] = work * unit.energy_per_action(dtype)
    for lv in memory:
        joules = read.get(lv.name, 0) * lv.energy_per_byte() + written.get(lv.name, 0) * lv.energy_per_byte(True)
        if joules:
            parts[lv.name] = joules
    return parts
