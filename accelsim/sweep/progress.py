"""Sweep progress on stderr: a rich bar with an ETA on a terminal, a plain line every 10% (or 30 s) otherwise.

The total is the whole sweep's rows from the start (the strategy's plan times the models, not the batch in hand:
a million-point grid is asked 4,096 points at a time); an adaptive search may end before its budget. Rows taken
from the store count as done at once and do not skew the rate; a sweep that will take over an hour says so as
soon as the rate is known.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


LONG_S = 3600      # a sweep estimated past this says so when the rate is first known


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True, planned: int = 0):
        self.stream = stream or sys.stderr
        self.label, self.enabled = label, enabled
        self.total = planned          # rows the whole sweep will have: every batch, not only the current one
        self.done = self.reused = self.invalid = self.added = 0
        self.planned = planned
        self._warned = False
        self.start = time.monotonic()
        self._last_line, self._last_decile, self._shown = self.start, 0, -1
        self._first: float | None = None   # when the first evaluated row came back
        self._bar = None
        if enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[invalid]} invalid"), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=Console(file=self.stream),
                            transient=False)
            self._task = self._bar.add_task(label, total=self.total or None, invalid=0)
            self._bar.start()

    def add(self, count: int, reused: int, reused_not_ok: int = 0) -> None:
        """`count` more rows are expected, `reused` of them already in the store (`reused_not_ok` not ok)."""
        self.added += count
        self.total = max(self.planned, self.added)
        self.done += reused
        self.reused += reused
        self.invalid += reused_not_ok
        if self._bar is not None:
            self._bar.update(self._task, total=self.total, completed=self.done, invalid=self.invalid)
        self._line()

    def advance(self, row: dict) -> None:
        self.done += 1
        if self._first is None:
            self._first = time.monotonic()
        if row.get("status") != "ok":
            self.invalid += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, invalid=self.invalid)
        self._warn_if_long()
        self._line()

    def _warn_if_long(self) -> None:
        """Once the rate is known (a few rows in), a sweep that will take over an hour says so at once."""
        eta = self.eta()
        if self.enabled and not self._warned and eta is not None and self.done - self.reused >= 3 and eta > LONG_S:
            self._warned = True
            print(f"{self.label}: {self.total - self.done:,} rows to go will take about {rough_duration(eta)}; "
                  f"Ctrl-C keeps every finished row and the same command resumes (or sample with strategy: random)",
                  file=self.stream, flush=True)

    def eta(self) -> float | None:
        """Seconds left at the rate since the first evaluated row (worker start-up is not the rate)."""
        evaluated = self.done - self.reused
        if evaluated < 2 or self._first is None:
            return None
        return (time.monotonic() - self._first) / (evaluated - 1) * (self.total - self.done)

    def close(self) -> None:
        self._line(final=True)
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _line(self, final: bool = False) -> None:
        if not self.enabled or self._bar is not None or not self.total:
            return
        now = time.monotonic()
        decile = 10 * self.done // self.total
        if final and self.done == self._shown:
            return
        if not final and decile == self._last_decile and now - self._last_line < 30:
            return
        self._last_decile, self._last_line, self._shown = decile, now, self.done
        eta = self.eta()
        shown = "" if eta is None else f", ETA {rough_duration(eta)}"
        print(f"{self.label}: {self.done}/{self.total} rows ({self.done / self.total:.0%}), {self.invalid} "
              f"invalid, {rough_duration(now - self.start)}{shown}", file=self.stream, flush=True)


def rough_duration(seconds: float) -> str:
    """A time taken or to go as a progress line shows it: `42 s`, `3 min 5 s`, `2 h 10 min`."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"
