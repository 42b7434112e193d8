"""Collectives across the devices of a system (allreduce, reduce-scatter, all-gather, all-to-all, broadcast,
send/recv): expanded into the transfers real libraries do (ring, tree, halving-doubling, hierarchical, torus
rings, NVLS, or one algorithm per level: `ring,tree`; accelsim.comm.registry names them), for one representative
device, and timed by the link engine (accelsim.engine.links, imported when a collective is timed: the command line
reads the registry's names for its help without loading numba).

    from accelsim.comm import collective
    collective("allreduce", "dgx_h100", devices=8, size="1 GiB").busbw    # bytes per second
"""
from accelsim.comm.collective import collective, concurrent, sweep
from accelsim.comm.registry import OPS, names
from accelsim.comm.result import CollectiveResult

ALGORITHMS = names()     # every registered algorithm, simplest first (collective imports each registering module)
__all__ = ["collective", "concurrent", "sweep", "CollectiveResult", "OPS", "ALGORITHMS"]
