"""The results store in process: a finished row is never written again, error and crashed rows are, every put is on
disk when it returns, `finished` answers for any number of keys, and `sweep_rows` flattens what was stored."""
import json
import sqlite3

import pytest

from accelsim.sweep.store import Store, sweep_rows
from compiler.errors import UserError


def row(key: str, status: str = "ok", latency: float = 1.0, **extra) -> dict:
    return {"key": key, "params": json.dumps({"rows": 8, "sram": "64 KiB"}), "model": "resnet18(image=64)",
            "model_name": "resnet18", "model_options": json.dumps({"image": 64}), "dtype": None, "dtype_used": "int8",
            "fidelity": "tile", "arch": "{}", "status": status, "latency": latency, "energy": 2.0, "area": 64.0,
            "edp": 2.0 * latency, "cycles": 700, "utilisation": 0.5, **extra}


@pytest.mark.parametrize("final", ["ok", "invalid"])
def test_a_finished_row_is_never_written_again(tmp_path, final):
    with Store(tmp_path / "r.sqlite") as store:
        store.put(row("a", final, latency=1.0))
        store.put(row("a", "ok", latency=9.0))
        store.put(row("a", "error", latency=9.0))
        assert store.count() == 1
        assert store.finished(["a"])["a"]["latency"] == 1.0 and store.finished(["a"])["a"]["status"] == final


@pytest.mark.parametrize("retried", ["error", "crashed"])
def test_an_error_or_crash_is_replaced_by_a_later_evaluation(tmp_path, retried):
    with Store(tmp_path / "r.sqlite") as store:
        store.put(row("a", retried, latency=9.0))
        assert store.finished(["a"]) == {}                      # not finished: the sweep evaluates it again
        store.put(row("a", "ok", latency=1.0))
        assert store.count() == 1 and store.finished(["a"])["a"]["latency"] == 1.0


def test_every_put_is_on_disk_when_it_returns(tmp_path):
    db = tmp_path / "r.sqlite"
    store = Store(db)
    store.put(row("a"))
    other = sqlite3.connect(db)                                  # another process's view, before close()
    assert other.execute("SELECT key, status FROM results").fetchall() == [("a", "ok")]
    other.close()
    store.close()


def test_finished_answers_for_more_keys_than_sqlite_takes_at_once(tmp_path):
    keys = [f"k{i}" for i in range(1203)]
    with Store(tmp_path / "r.sqlite") as store:
        for key in keys[::2]:
            store.put(row(key))
        store.put(row("bad", "error"))
        done = store.finished(keys + ["bad", "absent"])
    assert sorted(done) == sorted(keys[::2])
    assert all(r["status"] == "ok" and "arch" not in r for r in done.values())


def test_rows_carry_who_evaluated_them_and_when(tmp_path):
    with Store(tmp_path / "r.sqlite") as first, Store(tmp_path / "r.sqlite") as second:
        first.put(row("a"))
        second.put(row("b"))
        assert first.run_id != second.run_id and len(first.run_id) == 12
    rows = {r["key"]: r for r in sweep_rows(tmp_path / "r.sqlite", details=True)}
    assert rows["a"]["run_id"] == first.run_id and rows["b"]["run_id"] == second.run_id
    assert rows["a"]["created"] <= rows["b"]["created"]


def test_sweep_rows_flattens_parameters_and_objectives_in_key_order(tmp_path):
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        for key, latency in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
            store.put(row(key, latency=latency))
    plain = sweep_rows(db)
    assert plain[0] == {"rows": 8, "sram": "64 KiB", "model": "resnet18(image=64)", "latency": 1.0, "energy": 2.0,
                        "area": 64.0, "edp": 2.0, "status": "ok", "reason": None}
    assert [r["latency"] for r in sweep_rows(db, keys=["c", "a", "c", "zz"])] == [3.0, 1.0]
    detailed = sweep_rows(db, details=True)[1]
    assert detailed["key"] == "b" and detailed["cycles"] == 700 and detailed["model_options"] == {"image": 64}
    assert detailed["dtype_used"] == "int8" and "arch" not in detailed and "params" not in detailed


def test_an_older_file_gains_the_code_column(tmp_path):
    db = tmp_path / "old.sqlite"
    with Store(db) as store:
        store.put(row("a"))
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE results DROP COLUMN code")
    con.commit()
    con.close()
    with Store(db) as store:
        store.put(row("b", code="abc"))
        assert store.count() == 2
    assert sweep_rows(db, keys=["b"], details=True)[0]["code"] == "abc"


def test_a_file_that_is_not_a_store_is_named(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database " * 100)
    with pytest.raises(UserError, match="notes.txt: cannot open as a sweep results file"):
        Store(junk)
    with pytest.raises(UserError, match="missing.sqlite: no such sweep results file"):
        sweep_rows(tmp_path / "missing.sqlite")


def test_the_file_is_a_wal_journal_synced_normally_in_a_folder_made_for_it(tmp_path):
    # WAL with synchronous=NORMAL: a killed process loses no commit, and a reader never blocks the writer
    with Store(tmp_path / "new" / "deeper" / "r.sqlite") as store:
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1
        assert store.db.execute("SELECT value FROM meta WHERE name = 'store_version'").fetchone()[0] == "1"
        assert store.count() == 0
