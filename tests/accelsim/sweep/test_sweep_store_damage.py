"""A damaged results file or a full disk is the user's environment: a clear error naming the file, exit 2, and
every row finished before it kept."""
import sqlite3

import pytest

from accelsim.sweep.store import Store, sweep_rows
from compiler.errors import UserError


def row(key: str) -> dict:
    return {"key": key, "params": "{}", "model": "resnet18", "model_name": "resnet18", "model_options": "{}",
            "dtype": "int8", "fidelity": "tile", "arch": "{}", "status": "ok", "latency": 1.0, "energy": 1.0}


def test_a_full_disk_keeps_every_finished_row(tmp_path):
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        for i in range(3):
            store.put(row(f"k{i}"))
        pages = store.db.execute("PRAGMA page_count").fetchone()[0]
        store.db.execute(f"PRAGMA max_page_count = {pages}")     # the disk is full from here on
        with pytest.raises(UserError, match=r"r.sqlite: cannot store a row \(database or disk is full\); every "
                                            r"row stored before is kept"):
            for i in range(3, 5000):
                store.put(row(f"k{i}" + "x" * 500))
    assert [r["status"] for r in sweep_rows(db)][:3] == ["ok"] * 3


def test_a_corrupt_page_is_named_not_a_crash(tmp_path):
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        for i in range(200):
            store.put(row(f"k{i}" + "x" * 200))
    data = bytearray(db.read_bytes())
    page = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    data[page:] = b"\xff" * (len(data) - page)                      # every page after the header overwritten
    db.write_bytes(bytes(data))
    with pytest.raises(UserError, match="r.sqlite: (not a sweep results file|cannot)"):
        sweep_rows(db)
    with pytest.raises(UserError, match="r.sqlite: cannot"):
        with Store(db) as store:
            store.finished([f"k{i}" + "x" * 200 for i in range(200)])
