"""Collectives across the devices of a system (allreduce, reduce-scatter, all-gather, all-to-all, broadcast,
send/recv): expanded into the transfers real libraries do (ring, tree, halving-doubling, hierarchical, torus
rings, NVLS), for one representative device, and timed by the link engine (accelsim.engine.links).

    from accelsim.comm import collective
    collective("allreduce", "dgx_h100", devices=8, size="1 GiB").busbw    # bytes per second
"""
from accelsim.comm.algorithms import ALGORITHMS, OPS
from accelsim.comm.collective import collective, concurrent, sweep
from accelsim.comm.result import CollectiveResult

__all__ = ["collective", "concurrent", "sweep", "CollectiveResult", "OPS", "ALGORITHMS"]
