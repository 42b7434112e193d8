"""The same sweep on a real Dask distributed LocalCluster (worker processes): the same rows as the local run,
a worker that dies mid-task is replaced and its task retried, and a task that keeps killing workers is
recorded as crashed while the rest finish."""
import dask
import pytest
import yaml

from accelsim.sweep import load_spec, run_sweep, sweep_rows
from accelsim.sweep.evaluate import CRASH_ENV

distributed = pytest.importorskip("distributed")
TINY = {"name": "resnet18", "options": {"image": 32, "width": 0.25}}


def write(path, **spec):
    path.write_text(yaml.safe_dump({"base": "systolic_8x8", "models": [TINY], "objectives": ["latency", "energy"],
                                    **spec}))
    return load_spec(path)


def test_a_dask_cluster_gives_the_local_rows_and_survives_dying_workers(tmp_path, monkeypatch):
    spec = write(tmp_path / "sweep.yaml", strategy={"kind": "adaptive", "seed": 3, "initial": 3},
                 axes={"memory.dram.bandwidth": ["1 GB/s", "4 GB/s"],
                       "memory.weight_sram.capacity": ["1 KiB", "16 KiB"],
                       "compute.pe_array.dataflows": ["ws", "os"]})
    local = run_sweep(spec, tmp_path / "local.sqlite", jobs=1, progress=False)
    marker = tmp_path / "a-worker-died"
    # inherited by the worker processes started below: the first evaluation anywhere exits its worker, and
    # every evaluation of a 3 GB/s point does (no point of the first sweep has it)
    monkeypatch.setenv(CRASH_ENV, f'once:{marker}|match:"memory.dram.bandwidth": "3 GB/s"')
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                     silence_logs=50) as cluster:
        remote = run_sweep(spec, tmp_path / "dask.sqlite", scheduler=cluster.scheduler_address, progress=False)
        assert marker.exists()                         # a worker process did exit in the middle of a task
        killer = write(tmp_path / "killer.yaml", axes={"memory.dram.bandwidth": ["2 GB/s", "3 GB/s"]})
        run_sweep(killer, tmp_path / "killer.sqlite", scheduler=cluster.scheduler_address, progress=False)
    assert remote.workers == 2 and remote.evaluated == local.evaluated == len(local.keys)
    assert remote.keys == local.keys                   # the adaptive search took the same path
    by_key = {r["key"]: r for r in sweep_rows(tmp_path / "local.sqlite", details=True)}
    rows = sweep_rows(tmp_path / "dask.sqlite", details=True)
    for row in rows:
        assert row["status"] == "ok"                    # the task the dead worker held was retried
        assert (row["latency"], row["energy"]) == (by_key[row["key"]]["latency"], by_key[row["key"]]["energy"])
    assert len({row["worker"] for row in rows}) >= 2    # spread over the workers (and a dead one replaced)
    killed = {r["memory.dram.bandwidth"]: r for r in sweep_rows(tmp_path / "killer.sqlite")}
    assert killed["2 GB/s"]["status"] == "ok"
    assert killed["3 GB/s"]["status"] == "crashed" and "Dask workers died" in killed["3 GB/s"]["reason"]
