"""How long `accelsim run` takes, and how much memory, on a graph of many nodes: a chain of N Relus as an ONNX file
(the largest graphs people feed it are exported models of tens of thousands of nodes), each size in a process of its
own, and a chain past compiler.ops.shapes.MAX_NODES, which is refused before its nodes are read.

Rerun: .venv/bin/python benchmarks/big_graph.py [--nodes 10000 --nodes 100000] [--arch h100]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def chain(n: int, path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu{i}") for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 64])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main() -> None:
    if sys.argv[1:2] == ["--write"]:
        chain(int(sys.argv[2]), Path(sys.argv[3]))
        return
    from compiler.ops.shapes import MAX_NODES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append", help="chain lengths (default: 10,000 and 100,000)")
    parser.add_argument("--arch", default="h100")
    args = parser.parse_args()
    accelsim = Path(sys.executable).with_name("accelsim")
    print(f"{'nodes':>9} {'exit':>4} {'seconds':>8} {'CPU s':>7} {'peak RSS':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for n in (args.nodes or [10_000, 100_000]) + [MAX_NODES + 1]:
            path = Path(folder) / f"chain_{n}.onnx"
            # written by a process of its own: a child's peak RSS counts what its parent held when it forked (the
            # 250,001-node proto built here read as a 610 MiB peak of a refusal that holds 155 MiB)
            subprocess.run([sys.executable, __file__, "--write", str(n), str(path)], check=True)
            start = time.perf_counter()
            child = subprocess.Popen([str(accelsim), "run", str(path), "--arch", args.arch, "--limit", "10"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "ACCELSIM_CACHE": "off"})
            _, status, usage = os.wait4(child.pid, 0)       # this run's own figures, not every child's so far
            seconds = time.perf_counter() - start
            code = child.returncode = os.waitstatus_to_exitcode(status)
            peak = f"{usage.ru_maxrss / 1024:.0f} MiB"      # KiB
            cpu = usage.ru_utime + usage.ru_stime           # CPU seconds: steadier than wall time on a busy machine
            print(f"{n:9,} {code:4} {seconds:8.2f} {cpu:7.2f} {peak:>9}")


if __name__ == "__main__":
    main()
