"""How fast the tile-level simulator runs: compile + map + simulate, warm numba cache, on the issue's workloads.

Each workload runs once to warm up (numba loads its cached kernels on the first call in a process: about
0.6 s here, paid once) and is then timed; peak memory is the process's high-water RSS. The last table
shows simulation time following the number of tiles, not the number of MACs.
The accelsim.run table times what `accelsim run` does in process: build, then the engine op by op.
Run: .venv/bin/python benchmarks/speed.py
"""
from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelsim.arch import load_arch, preset_names  # noqa: E402
from accelsim.sim.model import load_model  # noqa: E402
from accelsim.sim.build import build  # noqa: E402
from accelsim.sim.tile import run_tiles  # noqa: E402
from compiler.builder import Builder  # noqa: E402

TARGETS = {"resnet18 b1 on systolic_32x32": 0.5, "gemm 1024^3 on systolic_32x32 (WS)": 0.05,
           "resnet50 b1 on tpu_v1": 1.0, "gpt2 prefill 1024 tokens on h100": 2.0}


def gemm(m: int, k: int, n: int):
    b = Builder(f"gemm{m}x{k}x{n}")
    y = b.node("MatMul", [b.input("x", (m, k)), b.weight("w", (k, n))])
    return b.build([y])


def timed(graph, arch_name: str, repeat: int = 3) -> tuple[float, int, float]:
    """(best seconds for compile + map + simulate, compute instructions, simulated seconds)."""
    arch = load_arch(arch_name)
    best, tiles, simulated = float("inf"), 0, 0.0
    for _ in range(repeat + 1):       # the first run warms numba; each run searches its mappings afresh
        clear_mapping_cache()
        start = time.perf_counter()
        compiled = build(graph, arch)
        ops, timeline = run_tiles(compiled.ir, arch, compiled.mappings)
        best = min(best, time.perf_counter() - start) if tiles else best
        tiles = sum(op.tiles or 0 for op in ops)
        simulated = sum(op.seconds for op in ops)
    return best, tiles, simulated


def map_seconds(model: str, arch_name: str, repeat: int = 5) -> float:
    from accelsim.sim.build import mappings_for

    arch = load_arch(arch_name)
    ir = build(load_model(model), arch, mapped=False).ir
    mappings_for(ir, arch)
    best = float("inf")
    for _ in range(repeat):
        clear_mapping_cache()
        start = time.perf_counter()
        mappings_for(ir, arch)
        best = min(best, time.perf_counter() - start)
    return best


def run_seconds(model: str, arch_name: str, options: dict, repeat: int = 5) -> float:
    """Best of `repeat` whole `accelsim.run`s with no run read back from the disk (accelsim.sim.cache): the
    pipeline's own time (the in-process mapping memo is cleared; compiler.map.disk's files are read)."""
    import accelsim
    from accelsim.sim import cache

    cache.key = lambda *args, **kwargs: None        # nothing read back or stored
    accelsim.run(model, arch=arch_name, **options)
    best = float("inf")
    for _ in range(repeat):
        clear_mapping_cache()
        start = time.perf_counter()
        accelsim.run(model, arch=arch_name, **options)
        best = min(best, time.perf_counter() - start)
    return best


def clear_mapping_cache() -> None:
    from compiler.map import CACHE

    CACHE.clear()


def main() -> None:
    workloads = {
        "resnet18 b1 on systolic_32x32": (lambda: load_model("resnet18", batch=1), "systolic_32x32"),
        "gemm 1024^3 on systolic_32x32 (WS)": (lambda: gemm(1024, 1024, 1024), "systolic_32x32"),
        "resnet50 b1 on tpu_v1": (lambda: load_model("resnet50", batch=1), "tpu_v1"),
        "gpt2 prefill 1024 tokens on h100": (lambda: load_model("gpt2", seq=1024), "h100"),
    }
    print(f"{'workload':40} {'seconds':>8} {'target':>7} {'tiles':>9} {'simulated':>12}")
    for name, (make, arch) in workloads.items():
        if arch not in preset_names():
            print(f"{name:40} skipped: archs/{arch}.yaml is absent")
            continue
        seconds, tiles, simulated = timed(make(), arch)
        print(f"{name:40} {seconds:8.3f} {TARGETS[name]:7.2f} {tiles:9,} {simulated * 1e3:10.3f} ms")
    print(f"peak memory (RSS high-water mark): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print()
    print(f"{'mapping alone: resnet18 b1 on h100':40} {map_seconds('resnet18', 'h100'):8.3f}   (the search's budget "
          f"keeps it well under 0.3 s)")
    print()
    print("accelsim.run, the command line's path (build, then the engine op by op), warm, best of 5")
    for model, arch_name, options in (("resnet50", "tpu_v1", {}), ("gpt2", "h100", {"seq": 1024})):
        print(f"{model + ' on ' + arch_name:40} {run_seconds(model, arch_name, options):8.3f}")
    print()
    print("simulation time vs tiles (GEMMs on systolic_32x32; time should follow tiles, not MACs)")
    print(f"{'gemm m x k x n':>22} {'MACs':>16} {'tiles':>8} {'rows':>9} {'seconds':>8} {'us/row':>7}")
    for size in ((256, 256, 256), (16384, 256, 256), (1024, 1024, 1024), (256, 4096, 4096), (1024, 4096, 4096),
                 (4096, 4096, 4096)):
        arch = load_arch("systolic_32x32")
        compiled = build(gemm(*size), arch)
        run_tiles(compiled.ir, arch, compiled.mappings)
        start = time.perf_counter()
        ops, timeline = run_tiles(compiled.ir, arch, compiled.mappings)
        seconds = time.perf_counter() - start
        rows = len(timeline.code.program)
        print(f"{' x '.join(map(str, size)):>22} {ops[0].macs:16,} {ops[0].tiles:8,} {rows:9,} {seconds:8.4f} "
              f"{seconds / rows * 1e6:7.1f}")


if __name__ == "__main__":
    main()
