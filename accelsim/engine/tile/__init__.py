"""The tile-level engine: numba kernels over the Program's plain arrays (no Graph, no Arch, no Python objects).

schedule: start and end cycle of every row (DMA channels per memory level, compute units, dependencies).
stalls: per op, compute-busy cycles and the idle cycles blamed on each memory level.
Invariant: kernels take ints and arrays only; accelsim.sim.tile unpacks the Arch and Program for them.
"""
from accelsim.engine.tile.schedule import schedule
from accelsim.engine.tile.stalls import attribute

__all__ = ["schedule", "attribute"]
