"""Collectives across the devices of a system (allreduce, reduce-scatter, all-gather, all-to-all, broadcast,
send/recv): expanded into the transfers real libraries do (ring, tree, halving-doubling, hierarchical, torus
rings, NVLS, or one algorithm per level: `ring,tree`; accelsim.comm.registry names them), for one representative
device, and timed by the link engine (accelsim.engine.links).

    from accelsim.comm import collective
    collective("allreduce", "dgx_h100", devices=8, size="1 GiB").busbw    # bytes per second

The names below are imported on first use (PEP 562): the command line reads the registry's names for its help
without loading the link engine (numba).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> the module that defines it
_API = {"collective": "accelsim.comm.collective", "concurrent": "accelsim.comm.collective",
        "sweep": "accelsim.comm.collective", "CollectiveResult": "accelsim.comm.result",
        "OPS": "accelsim.comm.registry"}

if TYPE_CHECKING:
    from accelsim.comm.collective import collective, concurrent, sweep
    from accelsim.comm.registry import OPS
    from accelsim.comm.result import CollectiveResult

__all__ = ["collective", "concurrent", "sweep", "CollectiveResult", "OPS", "ALGORITHMS"]


def __getattr__(name: str):
    if name == "ALGORITHMS":    # every registered algorithm, simplest first, once each registering module ran
        from accelsim.comm.algorithms import registered

        value = registered()
    elif name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
    else:
        raise AttributeError(f"module 'accelsim.comm' has no attribute {name!r}")
    globals()[name] = value      # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
