"""The link engine: numba kernels timing transfers on link channels (bandwidth, latency per hop), for collectives
across devices. Plain ints, floats and arrays in and out; no System, no Python objects.

transfers.time_transfers: start and end of every transfer (channels served first come first served, dependencies).
transfers.bounds: the longest chain of latencies and each channel's busy time (the alpha-beta estimate).
Invariant: time_transfers' makespan is never below either bound.
"""
from accelsim.engine.links.transfers import bounds, time_transfers

__all__ = ["time_transfers", "bounds"]
