"""Sweeps that really run: rows equal `accelsim run`, invalid points keep their reason, a killed or interrupted
sweep resumes without recomputing, and a local pool survives a worker that dies."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import accelsim
from accelsim.arch.area import area_cells
from accelsim.sweep import load_spec, run_sweep, sweep_rows
from accelsim.sweep.evaluate import CRASH_ENV, DELAY_ENV, LOG_ENV

ACCELSIM = Path(sys.executable).with_name("accelsim")
TINY = {"name": "resnet18", "options": {"image": 32, "width": 0.25}}


def write(tmp_path: Path, axes: dict, name: str = "sweep.yaml", **extra) -> Path:
    spec = {"base": "systolic_8x8", "models": [TINY], "objectives": ["latency", "energy", "area"], "axes": axes,
            **extra}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def stored(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT key, status, run_id, created FROM results ORDER BY rowid").fetchall()


def test_rows_equal_accelsim_run_and_invalid_points_keep_their_reason(tmp_path):
    # rows 4 cannot keep the preset's 64 MACs per cycle (an arch the schema refuses); fp16 has no unit here
    path = write(tmp_path, {"compute.pe_array.array.rows": [4, 8], "dtype": ["int8", "fp16"],
                            "memory.dram.bandwidth": ["1 GB/s", "4 GB/s"]})
    spec = load_spec(path)
    summary = run_sweep(spec, tmp_path / "r.sqlite", jobs=1, progress=False)
    assert (summary.points, summary.evaluated, summary.reused, summary.not_ok) == (8, 8, 0, 6)
    rows = sweep_rows(tmp_path / "r.sqlite", details=True)
    assert len(rows) == 8 and len({r["key"] for r in rows}) == 8
    ok = [r for r in rows if r["status"] == "ok"]
    assert sorted(r["memory.dram.bandwidth"] for r in ok) == ["1 GB/s", "4 GB/s"]
    for r in rows:
        if r["compute.pe_array.array.rows"] == 4:
            assert r["status"] == "invalid" and "64 MACs per cycle exceeds the 4x8 = 32 PEs" in r["reason"]
        elif r["dtype"] == "fp16":
            assert r["status"] == "invalid" and "no matrix unit computes fp16" in r["reason"]
    for r in ok:   # the very numbers `accelsim run` gives on the same arch file
        arch_file = tmp_path / f"point_{r['key'][:8]}.yaml"
        arch_file.write_text(yaml.safe_dump(json.loads(_arch_json(tmp_path / "r.sqlite", r["key"]))))
        result = accelsim.run("resnet18", arch=str(arch_file), dtype="int8", image=32, width=0.25)
        assert r["latency"] == pytest.approx(result.seconds, rel=1e-12)
        assert r["energy"] == pytest.approx(result.totals()["energy_j"], rel=1e-12)
        assert r["area"] == pytest.approx(area_cells(8, 8)) and r["edp"] == pytest.approx(r["latency"] * r["energy"])
    slower = {r["memory.dram.bandwidth"]: r["latency"] for r in ok}
    assert slower["1 GB/s"] > slower["4 GB/s"]
    again = run_sweep(spec, tmp_path / "r.sqlite", jobs=1, progress=False)
    assert (again.evaluated, again.reused, again.stale) == (0, 8, 0) and len(stored(tmp_path / "r.sqlite")) == 8
    with sqlite3.connect(tmp_path / "r.sqlite") as con:   # as if another version of the simulator had run
        con.execute("UPDATE results SET code = 'elsewhere' WHERE status = 'ok'")
    assert run_sweep(spec, tmp_path / "r.sqlite", jobs=1, progress=False).stale == 2


def _arch_json(db: Path, key: str) -> str:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT arch FROM results WHERE key = ?", (key,)).fetchone()[0]


def _start(spec: Path, db: Path, log: Path, delay: str) -> subprocess.Popen:
    env = {**os.environ, LOG_ENV: str(log), DELAY_ENV: delay}
    # Ctrl-C as a terminal sends it: the child starts with SIGINT's default action even where this suite ignores it
    # (one started by a shell's `&` inherits SIG_IGN), since Python makes SIGINT a KeyboardInterrupt only if not ignored
    return subprocess.Popen([str(ACCELSIM), "sweep", str(spec), "--db", str(db), "--jobs", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_rows(db: Path, proc: subprocess.Popen, at_least: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db.exists() and len(stored(db)) >= at_least:
                return
        except sqlite3.OperationalError:   # the file is there, its table not yet
            pass
        time.sleep(0.02)
    raise AssertionError(f"the sweep stored under {at_least} rows: {proc.poll()}, {proc.stderr.read()}")


BANDWIDTHS = ["1 GB/s", "2 GB/s", "3 GB/s", "4 GB/s", "5 GB/s", "6 GB/s", "7 GB/s", "8 GB/s", "9 GB/s", "10 GB/s"]


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_a_killed_sweep_resumes_without_recomputing(tmp_path, how):
    spec, db, log = write(tmp_path, {"memory.dram.bandwidth": BANDWIDTHS}), tmp_path / "s.sqlite", tmp_path / "log"
    first = _start(spec, db, log, delay="0.15")
    _wait_for_rows(db, first, at_least=3)
    os.killpg(first.pid, getattr(signal, how))
    _, err = first.communicate(timeout=60)
    before = stored(db)
    if how == "SIGKILL":
        assert first.returncode == -signal.SIGKILL
    else:   # Ctrl-C: a clean stop that says how to go on
        assert first.returncode == 130 and "run the same command to resume" in err and "Traceback" not in err
    assert 3 <= len(before) < len(BANDWIDTHS) and {s for _, s, _, _ in before} == {"ok"}
    second = _start(spec, db, log, delay="0")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    after = stored(db)
    assert len(after) == len({k for k, *_ in after}) == len(BANDWIDTHS)       # every point, none twice
    assert after[:len(before)] == before                                      # finished rows untouched
    assert f"({len(BANDWIDTHS) - len(before)} evaluated, {len(before)} already stored, 0 not ok)" in out
    evaluations = log.read_text().split()
    for key, *_ in before:
        assert evaluations.count(key) == 1                                    # nothing finished was recomputed
    assert len(evaluations) <= len(BANDWIDTHS) + 1   # at most the one in flight at the kill ran twice


def test_a_local_pool_survives_workers_that_die(tmp_path, monkeypatch):
    path = write(tmp_path, {"memory.dram.bandwidth": ["1 GB/s", "2 GB/s", "4 GB/s", "8 GB/s", "16 GB/s"]})
    spec, db = load_spec(path), tmp_path / "p.sqlite"
    monkeypatch.setenv(CRASH_ENV, 'match:"memory.dram.bandwidth": "4 GB/s"')   # this point kills every worker
    summary = run_sweep(spec, db, jobs=2, progress=False)
    rows = {r["memory.dram.bandwidth"]: r for r in sweep_rows(db)}
    assert summary.points == 5 and len(rows) == 5
    assert rows["4 GB/s"]["status"] == "crashed" and "died 3 times" in rows["4 GB/s"]["reason"]
    assert all(r["status"] == "ok" for bw, r in rows.items() if bw != "4 GB/s")   # no bystander blamed
    monkeypatch.setenv(CRASH_ENV, f"once:{tmp_path / 'crashed-once'}")          # the next worker dies once only
    again = run_sweep(spec, db, jobs=2, progress=False)
    assert (again.evaluated, again.reused) == (1, 4) and (tmp_path / "crashed-once").exists()
    assert {r["status"] for r in sweep_rows(db)} == {"ok"} and len(stored(db)) == 5


def test_the_command_prints_the_front_and_hands_the_report_its_rows(tmp_path):
    path = write(tmp_path, {"compute.pe_array.array.rows": [4, 8], "memory.weight_sram.capacity": ["1 KiB", "16 KiB"]},
                 derive={"compute.pe_array.macs_per_cycle.int8": "compute.pe_array.array.rows * compute.pe_array."
                                                                "array.cols"},
                 strategy={"kind": "random", "points": 3, "seed": 4})
    (tmp_path / "elsewhere").mkdir()
    proc = subprocess.run([str(ACCELSIM), "sweep", str(path), "--jobs", "1", "--html", str(tmp_path / "s.html")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path / "elsewhere")
    try:
        from accelsim.report import sweep_report  # noqa: F401  (built by another part of the project)
    except ImportError:
        assert proc.returncode == 2 and proc.stderr.strip() == "accelsim: error: --html needs accelsim.report"
        proc = subprocess.run([str(ACCELSIM), "sweep", str(path), "--jobs", "1"], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path / "elsewhere")
    else:
        assert proc.returncode == 0, proc.stderr
        assert "Pareto" in (tmp_path / "s.html").read_text()
    assert proc.returncode == 0, proc.stderr
    # the store goes where the command runs, not beside the spec (which may be in a checkout)
    assert "3 points x 1 model = 3 rows" in proc.stdout and (tmp_path / "elsewhere" / "sweep.sqlite").exists()
    assert not path.with_suffix(".sqlite").exists()
    assert "Pareto-optimal for resnet18(image=32, width=0.25) (latency, energy, area)" in proc.stdout
    assert "array.rows  weight_sram.capacity  latency  energy  area".split() == proc.stdout.splitlines()[3].split()
    assert "sweep sweep.yaml: 3/3 rows (100%)" in proc.stderr    # the plain progress line off a terminal


def test_the_example_spec_runs_as_the_readme_says(tmp_path):
    example = Path(__file__).resolve().parents[3] / "examples" / "sweep" / "systolic.yaml"
    proc = subprocess.run([str(ACCELSIM), "sweep", str(example), "--db", str(tmp_path / "example.sqlite")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "72 points x 1 model = 72 rows" in proc.stdout
    assert "(72 evaluated, 0 already stored, 0 not ok)" in proc.stdout
    rows = sweep_rows(tmp_path / "example.sqlite")
    front = [line.split() for line in proc.stdout.splitlines()[4:] if line.strip()]
    assert 0 < len(front) < 72
    smallest = min(rows, key=lambda r: r["area"])   # the 8x8 array is the smallest: some 8x8 point is on the front
    assert smallest["compute.pe_array.array.rows"] == smallest["compute.pe_array.array.cols"] == 8
    assert any(line[:2] == ["8", "8"] for line in front)


def test_workers_that_cannot_run_at_all_stop_the_sweep_with_a_message(tmp_path):
    path = write(tmp_path, {"memory.dram.bandwidth": ["1 GB/s", "2 GB/s"]})
    proc = subprocess.run([str(ACCELSIM), "sweep", str(path), "--jobs", "2"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, CRASH_ENV: "match:{"})   # every evaluation exits
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("accelsim: error: every worker process died before finishing "
                                                    "a point; run with --jobs 1 to see why")
