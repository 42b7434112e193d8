"""The results store: one SQLite file, one row per (point, model), keyed by the task's content hash.

Invariant: a row, once `ok` or `invalid`, is never written again (primary key; inserting it again changes nothing)
and is on disk when put() returns (committed per row, WAL journal), so a sweep killed at any moment keeps every
finished row and a rerun skips them. Only rows with status `error` (a bug) or `crashed` (its worker kept dying) are
replaced by a later evaluation. Only the process driving the sweep writes; workers return rows to it.
"""
from __future__ import annotations

import json
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from compiler.errors import UserError

STATUSES = ("ok", "invalid", "error", "crashed")
FINAL = ("ok", "invalid")      # evaluated for good; `error` and `crashed` rows are retried
COLUMNS = ("key", "params", "model", "model_name", "model_options", "dtype", "dtype_used", "fidelity", "status",
           "reason", "latency", "energy", "area", "edp", "cycles", "utilisation", "arch", "eval_s", "worker",
           "code", "run_id", "created")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,        -- sha256 of the resolved arch, model, options, dtype, fidelity
    params TEXT NOT NULL,        -- JSON: the point's axis values
    model TEXT NOT NULL,         -- label: name(options)
    model_name TEXT NOT NULL,
    model_options TEXT NOT NULL, -- JSON
    dtype TEXT,                  -- as asked (NULL: the arch's native one)
    dtype_used TEXT,
    fidelity TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'invalid', 'error', 'crashed')),
    reason TEXT,
    latency REAL, energy REAL, area REAL, edp REAL, cycles INTEGER, utilisation REAL,
    arch TEXT NOT NULL,          -- JSON: the resolved arch document
    eval_s REAL, worker TEXT,
    code TEXT,                   -- fingerprint of the simulator code that evaluated it
    run_id TEXT NOT NULL,        -- which invocation evaluated it
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('store_version', '1');
"""
_INSERT = (f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
           f"ON CONFLICT(key) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in COLUMNS[1:])} "
           "WHERE results.status NOT IN ('ok', 'invalid')")


class Store:
    """An open results file; `run_id` tags the rows this process evaluates."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.run_id = uuid.uuid4().hex[:12]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")   # WAL + NORMAL: a killed process loses no commit
            self.db.executescript(_SCHEMA)
            have = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
            for column in ("code",):   # added after the first files were written
                if column not in have:
                    self.db.execute(f"ALTER TABLE results ADD COLUMN {column} TEXT")
        except sqlite3.DatabaseError as error:
            raise UserError(f"{self.path}: cannot open as a sweep results file ({error})") from None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _answering(self, doing: str):
        """SQLite's errors as the user's: a damaged file or a full disk is their environment, not a bug."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            raise UserError(f"{self.path}: cannot {doing} ({error}); every row stored before is kept in it: "
                            f"fix the cause (free disk space, or sweep into a new --db) and run the same command "
                            f"to resume") from None

    def finished(self, keys: list[str]) -> dict[str, dict]:
        """The stored rows among `keys` that need no evaluation (status ok or invalid)."""
        out: dict[str, dict] = {}
        columns = [c for c in COLUMNS if c != "arch"]
        with self._answering("read its rows"):
            for i in range(0, len(keys), 500):   # SQLite caps host parameters per statement
                chunk = keys[i:i + 500]
                marks = ", ".join("?" * len(chunk))
                cursor = self.db.execute(f"SELECT {', '.join(columns)} FROM results WHERE key IN ({marks}) "
                                         f"AND status IN ('ok', 'invalid')", chunk)
                out.update((row[0], dict(zip(columns, row))) for row in cursor)
        return out

    def put(self, row: dict) -> None:
        """Store one evaluated row and commit it; an ok/invalid row already there is kept as it is."""
        full = {**row, "run_id": self.run_id, "created": time.time()}
        with self._answering("store a row"):
            self.db.execute(_INSERT, [full.get(column) for column in COLUMNS])
            self.db.commit()

    def count(self) -> int:
        with self._answering("count its rows"):
            return self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]


OBJECTIVE_COLUMNS = ("latency", "energy", "area", "edp")


def sweep_rows(db_path: str | Path, keys: list[str] | None = None, details: bool = False) -> list[dict]:
    """Every stored row (or those of `keys`, in that order) as a flat dict: the point's parameters (axis key
    path -> value, as written in the spec), `model` (its label, `resnet18(image=64)`), the objectives `latency`
    (s), `energy` (J), `area` (PE-array cells; None where no systolic array) and `edp` (J s), `status` (ok,
    invalid, error, crashed) and `reason`. `details` adds the store's other columns (key, dtype, cycles,
    utilisation, eval_s, worker, run_id, ...) under their column names."""
    path = Path(db_path)
    if not path.is_file():
        raise UserError(f"{path}: no such sweep results file")
    db = sqlite3.connect(path, timeout=30)
    try:
        cursor = db.execute("SELECT * FROM results ORDER BY rowid")
        names = [c[0] for c in cursor.description]
        stored = [{k: v for k, v in zip(names, values) if k != "arch"} for values in cursor]
    except sqlite3.DatabaseError as error:
        raise UserError(f"{path}: not a sweep results file ({error})") from None
    finally:
        db.close()
    if keys is not None:
        by_key = {row["key"]: row for row in stored}
        stored = [by_key[key] for key in dict.fromkeys(keys) if key in by_key]
    out = []
    for row in stored:
        flat = {**json.loads(row["params"]), "model": row["model"]}
        flat.update({name: row[name] for name in OBJECTIVE_COLUMNS})
        flat.update(status=row["status"], reason=row["reason"])
        if details:
            flat.update({k: v for k, v in row.items() if k not in flat and k != "params"})
            flat["model_options"] = json.loads(row["model_options"])
        out.append(flat)
    return out
