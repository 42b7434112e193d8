"""The CUDA validation suite's attention cases (accelsim/validate/cuda_suites.py) as accelsim predicts them on the
A100 and H100 presets in bf16: unfused (scores written to memory, softmax and weighted sum as kernels of their own;
`--fusion none`) against one FlashAttention kernel (`--fusion runtime`), side by side in one run, with the bytes
each moves from DRAM.

Rerun: .venv/bin/python benchmarks/attention_fusion.py [--arch a100 --arch h100]
"""
from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", help="presets (default: a100 and h100)")
    archs = parser.parse_args().arch or ["a100", "h100"]
    from accelsim.sim.build import build, simulate
    from accelsim.validate.cases import parse
    from accelsim.validate.cuda_suites import ATTENTION

    print(f"{'case (batch heads queries keys head)':40} {'arch':5} {'unfused':>10} {'fused':>10} {'speed-up':>8} "
          f"{'DRAM unfused':>13} {'DRAM fused':>11}")
    for key in ATTENTION:
        case = parse(f"{key} bf16")
        for arch in archs:
            runs = [simulate(build(case.graph(), arch, dtype=case.dtype, fuse=fuse)) for fuse in ("none", "runtime")]
            dram = [sum(op.bytes_by_level.get(r.arch["memory_levels"][0], 0) for op in r.ops) for r in runs]
            t = [r.seconds for r in runs]
            print(f"{key:40} {arch:5} {t[0] * 1e6:8.1f}us {t[1] * 1e6:8.1f}us {t[0] / t[1]:7.2f}x "
                  f"{dram[0] / 1e6:10.1f} MB {dram[1] / 1e6:8.1f} MB")


if __name__ == "__main__":
    main()
