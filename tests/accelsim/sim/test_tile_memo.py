"""accelsim.sim.tile keeps simulated ops per (arch, pricing) for the last few archs only: a sweep, whose every point is
a new Arch, does not pile up one table per point."""
import dataclasses

import accelsim
from accelsim.arch import load_arch
from accelsim.sim import tile
from compiler.builder import Builder


def test_the_simulated_ops_are_kept_for_the_last_archs_only(monkeypatch):
    monkeypatch.setenv("ACCELSIM_CACHE", "off")
    b = Builder("gemm")
    graph = b.build([b.node("MatMul", [b.input("x", (32, 32)), b.weight("w", (32, 32))])])
    base = load_arch("tpu_v1")
    tile._SIMULATED.clear()
    points = [dataclasses.replace(base, name=f"point{i}") for i in range(tile._SIMULATED.size + 2)]   # a sweep's
    cycles = {accelsim.run(graph, arch=arch).cycles for arch in points}
    assert len(tile._SIMULATED) == tile._SIMULATED.size and len(cycles) == 1
    assert (points[-1], tile.NATIVE) in tile._SIMULATED and (points[0], tile.NATIVE) not in tile._SIMULATED
