"""Evaluate one Task (in a pool or Dask worker): load the point's arch, simulate the model, price the objectives.

Invariant: evaluate never raises for a bad point: a UserError (an arch the schema refuses, a tile that cannot
fit, an unsupported dtype) is a row with status `invalid` and its message as the reason; any other exception
is status `error` (a bug; retried by the next run). The numbers equal `accelsim.run` on the same arch.
Compiled IR is kept per worker process, so a sweep compiles each model once per worker, not once per point.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path

from accelsim.arch import Arch
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.memo import Memo, memo
from accelsim.sweep.tasks import Task

# Test hooks, read from the environment of the evaluating process (the tests kill, crash and count with them):
LOG_ENV = "ACCELSIM_SWEEP_LOG"       # FILE: append each evaluated task's key, one per line
CRASH_ENV = "ACCELSIM_SWEEP_CRASH"   # once:FILE -- the evaluation that creates FILE exits its process;
#                                      match:TEXT -- every evaluation whose point's JSON contains TEXT exits;
#                                      several joined by |
DELAY_ENV = "ACCELSIM_SWEEP_DELAY"   # SECONDS: sleep this long in each evaluation


def evaluate(task: Task) -> dict:
    """The store row of `task` (without run_id and created, which the store adds)."""
    start = time.perf_counter()
    _hooks(task)
    row = {**identity(task), "worker": f"{socket.gethostname()}:{os.getpid()}", "code": code_fingerprint()}
    if task.reason is not None:
        return {**row, "status": "invalid", "reason": task.reason, "eval_s": time.perf_counter() - start}
    try:
        row.update(measure(task))
        row["status"], row["reason"] = "ok", None
    except UserError as error:
        row["status"], row["reason"] = "invalid", str(error)
    except Exception as error:  # a bug in accelsim: kept with its reason, evaluated again by the next run
        row["status"], row["reason"] = "error", f"{type(error).__name__}: {error}"
    row["eval_s"] = time.perf_counter() - start
    return row


def identity(task: Task) -> dict:
    """The columns of a row that say what was evaluated, whatever came of it."""
    return {"key": task.key, "params": task.params_json, "model": task.model.label, "model_name": task.model.name,
            "model_options": json.dumps(dict(task.model.options)), "dtype": task.dtype, "fidelity": task.fidelity,
            "arch": task.arch_json}


def measure(task: Task) -> dict:
    from accelsim.arch.schema import build_arch
    from accelsim.sim.build import place, simulate
    from compiler.map import CACHE

    # Mappings are cached per arch; no two points share one, so a long-lived worker would only pile them up.
    CACHE.clear()
    arch = build_arch(json.loads(task.arch_json), "point", Path(task.source))
    dtype = DType.parse(task.dtype) if task.dtype else arch.native_dtype
    graph, ir = compiled(task.model.name, task.model.options, dtype, arch)
    ops = simulate(place(graph, ir, arch, dtype, mapped=task.fidelity == "tile"), task.fidelity).ops
    latency = sum(op.seconds for op in ops)
    energy = sum(sum(op.energy_j.values()) for op in ops)
    macs = sum(op.macs for op in ops)
    rate = dtype if any(u.supports(dtype) for u in arch.matrix_units) else arch.native_dtype
    peak = arch.matrix_for(rate).peak_per_second(rate)
    return {"dtype_used": dtype.value, "latency": latency, "energy": energy, "area": array_area(arch),
            "edp": energy * latency, "cycles": sum(op.cycles for op in ops),
            "utilisation": macs / (peak * latency) if latency else 0.0}


@memo(size=1)
def code_fingerprint() -> str:
    """A hash of the code that decides a result (compiler/, accelsim's arch, price, engine, sim and out packages
    and data; not the CLI, sweeps, reports or validation), so the store can tell rows another version computed."""
    root = Path(__file__).resolve().parents[2]
    deciding = ("arch", "price", "engine", "sim", "out")
    files = sorted([*(root / "compiler").rglob("*.py"),
                    *(p for d in deciding for p in (root / "accelsim" / d).rglob("*.py")),
                    *(root / "accelsim" / "data").glob("*.json")])
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def compiled(model: str, options: tuple, dtype: DType, arch: Arch):
    """(Graph, IR) of the model for `dtype`, its kernels formed for `arch`'s kind (all the fusion pass reads of
    it), built once per process and reused by every point of that kind (shapes only), as `accelsim run` builds it."""
    from accelsim.sim.build import default_launch
    from accelsim.sim.model import load_model
    from compiler.compile import Options, compile_graph

    def build() -> tuple:
        graph = load_model(model, **dict(options))
        launch = default_launch(dict(options))
        return graph, compile_graph(graph, Options(dtype=dtype, arch=arch, launch=launch))

    return _COMPILED.recall((model, options, dtype, arch.kind), build)


_COMPILED: Memo[tuple, tuple] = Memo("accelsim.sweep.evaluate.compiled", 32)


def array_area(arch: Arch) -> float | None:
    """Cells of the arch's PE arrays (accelsim.arch.area's RTL fit, times each unit's count); None without arrays."""
    from accelsim.arch.area import area_cells

    arrays = [u for u in arch.matrix_units if u.array is not None]
    if not arrays:
        return None
    return sum(u.count * area_cells(u.array.rows, u.array.cols,
                                    ternary=u.supports(DType.ternary) and not u.supports(DType.int8))
               for u in arrays)


def _hooks(task: Task) -> None:
    log, crash, delay = (os.environ.get(name) for name in (LOG_ENV, CRASH_ENV, DELAY_ENV))
    if delay:
        time.sleep(float(delay))
    for hook in crash.split("|") if crash else ():
        how, _, what = hook.partition(":")
        if how == "match" and what in task.params_json:
            os._exit(17)
        if how == "once":
            try:
                os.close(os.open(what, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(17)
    if log:
        with open(log, "a") as out:   # one short write in append mode: lines from many processes stay whole
            out.write(task.key + "\n")
