"""The planner's progress on stderr, as a sweep's (accelsim.sweep.progress): a bar on a terminal, otherwise a line
every 10% (or 30 s) once the search has run for a few seconds; counted in candidates settled (scored, discarded, or
left unsimulated by a lower bound), with the best plan so far.
"""
from __future__ import annotations

import time

from accelsim.results.plans import Discarded, Scored
from accelsim.results.table import seconds as show
from accelsim.sweep.progress import Progress, rough_duration

QUIET_S = 2.0        # a search done sooner prints no plain lines at all


class SearchProgress(Progress):
    def __init__(self, label: str, total: int, enabled: bool):
        super().__init__(label, enabled=enabled, planned=total)
        self.discarded = 0          # settled before pricing: the weights and optimizer state alone do not fit
        self.best: Scored | None = None

    def settle(self, records: list, scored: dict | None = None, pruned: int = 0) -> None:
        """`records`: each priced candidate's outcome so far (Scored, Discarded, or its memory while it waits);
        `scored`: those simulated since; `pruned`: those a lower bound has left unsimulated."""
        if not self.enabled:
            return
        done = [r for r in records if isinstance(r, (Scored, Discarded))] + list((scored or {}).values())
        if self._first is None and done:
            self._first = time.monotonic()
        self.done = self.discarded + len(done) + pruned
        self.invalid = sum(isinstance(r, Discarded) and r.kind == "invalid" for r in done)
        fastest = [r for r in done if isinstance(r, Scored)]
        if fastest:
            self.best = min(fastest, key=lambda s: (s.seconds, s.text))
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, invalid=self.invalid, description=self._label())
        self._line()

    def _label(self) -> str:
        return self.label + (f" (best so far {show(self.best.seconds)}: {self.best.text})" if self.best else "")

    def _line(self, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or self._bar is not None or not self.total or now - self.start < QUIET_S:
            return
        decile = 10 * self.done // self.total
        if (final and self.done == self._shown) or (not final and decile == self._last_decile
                                                    and now - self._last_line < 30):
            return
        self._last_decile, self._last_line, self._shown = decile, now, self.done
        best = f", best so far {show(self.best.seconds)} ({self.best.text})" if self.best else ""
        print(f"{self.label}: {self.done:,}/{self.total:,} candidates settled ({self.done / self.total:.0%}), "
              f"{rough_duration(now - self.start)}{best}", file=self.stream, flush=True)
