"""Published rows, each citing where it comes from: a CSV's rows read with their columns and sources checked, their
printed figures and the seconds derived from them held to agree, a folder of them (published.csv beside its
dataset.yaml) told apart by its columns, and the dataset.yaml of any validation folder read as one bounded mapping.

Invariant: no row is read without an https source and where in it (a table, a figure, a line), so a score never
rests on a figure nobody can look up.
"""
from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterator
from pathlib import Path

from compiler.errors import UserError, read_text
from compiler.references import referenced


def sourced_rows(path: str | os.PathLike, columns, required=()) -> Iterator[tuple[str, dict]]:
    """(where, row) per row of `path` (where: "file: line N ('case')"), once the header has `columns` and the row
    an https `source`, a `where` in it, and every column of `required` filled; UserError naming the row if not."""
    path = Path(path)
    reader = csv.DictReader(io.StringIO(read_text(path)))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise UserError(f"{path}: missing column {', '.join(missing)}")
    for line, raw in enumerate(reader, start=2):
        where = f"{path}: line {line} ({raw['case']!r})"
        empty = [c for c in ("where", *required) if not raw[c].strip()]
        if not raw["source"].startswith("https://") or empty:
            raise UserError(f"{where}: lacks its source URL" + "".join(f", its {c}" for c in empty))
        yield where, raw


def is_published(path: str | os.PathLike, columns, csv_name: str = "published.csv") -> bool:
    """A folder (or its `csv_name`) with a dataset.yaml whose CSV header has `columns`: what
    accelsim.validate.score hands to the module that reads those columns."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    csv_path = folder / csv_name
    if (not path.is_dir() and path.name != csv_name) or not csv_path.is_file() or \
            not (folder / "dataset.yaml").is_file():
        return False
    try:
        referenced(csv_name, folder)           # a link out of the folder is not the dataset's CSV
    except UserError as error:
        raise UserError(f"{csv_path}: {error}; a dataset's files lie in its folder") from None
    return set(columns) <= set(next(csv.reader(io.StringIO(read_text(csv_path))), []))


def figures(where: str, raw: dict) -> tuple[float, float]:
    """(reported, measured_s) of a row: both positive numbers, or a UserError naming the row."""
    try:
        reported, measured = float(raw["reported"]), float(raw["measured_s"])
    except ValueError:
        raise UserError(f"{where}: reported and measured_s must be numbers") from None
    if not (reported > 0 and measured > 0):
        raise UserError(f"{where}: reported and measured_s must be positive")
    return reported, measured


def agreeing(where: str, row, rel_tol: float):
    """`row` once the seconds its printed figure means (row.seconds_from_report()) agree with its measured_s, so a
    hand edit of one without the other is caught; a UserError naming the row otherwise."""
    derived = row.seconds_from_report()
    if not math.isclose(derived, row.measured_s, rel_tol=rel_tol):
        raise UserError(f"{where}: measured_s {row.measured_s:g} but {row.reported:g} {row.reported_unit} means "
                        f"{derived:.6g} s")
    return row


def settings(path: Path) -> dict:
    """The mapping in the dataset.yaml at `path` ({} where there is none): targets, provenance, and how published rows
    are predicted (`harness`, `builds`); a UserError naming the file for one that is not a bounded YAML mapping."""
    import yaml

    from accelsim.arch.load import YamlRefused, bounded_yaml

    if not path.is_file():
        return {}
    try:
        referenced(path.name, path.parent)     # a link out of the dataset's folder is not its dataset.yaml
    except UserError as error:
        raise UserError(f"{path}: {error}; a dataset's files lie in its folder") from None
    try:
        data = bounded_yaml(read_text(path)) or {}
    except YamlRefused as e:
        raise UserError(f"{path}: {e}") from None
    except yaml.YAMLError as e:   # its problem and line, not str(e): that quotes the line, whatever the file holds
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise UserError(f"{path}: {line}YAML syntax error: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys, not a {type(data).__name__}")
    return data
