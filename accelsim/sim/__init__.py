"""The orchestration: what the user names becomes pipeline inputs (model), the pipeline runs once (build), the
tile-level and cycle-level runs unpack their inputs for the engine (tile, cycle; stimulus is the format the
cycle model shares with the RTL bench), and the Python API (api)."""

FIDELITIES = ("tile", "roofline")   # tile: map, codegen and the numba engine; roofline: the bound (and --help)

