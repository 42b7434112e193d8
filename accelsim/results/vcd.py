"""A minimal Value Change Dump writer (IEEE 1364-2005, section 18): one scope of wires, integer values.

Invariant: a value is written only when it differs from the last one written for that wire; times only increase;
the first time point dumps every wire ($dumpvars), wires never set there read x.
"""
from __future__ import annotations

from datetime import datetime, UTC

# The timescale of every waveform of the systolic core, the cycle-level model's (this writer's) and the RTL's, which
# accelsim.rtl.runner builds with this time unit and precision: a simulator's VCD counts in its precision, so the
# two files count in the same unit and a cycle's edges carry the same time stamps in both
TIMESCALE = "1ns"


class VcdWriter:
    """Write to an open text file `f`: the header at once, then `at(time)` / `change(name, value)` in time order,
    then `finish()`. `signals` is [(name, width in bits)]; a value is a non-negative int (two's complement for
    negative numbers is the caller's business) or None for x."""

    def __init__(self, f, scope: str, signals, timescale: str = TIMESCALE):
        self._f = f
        self._width = dict(signals)
        self._code = {name: _code(i) for i, (name, _) in enumerate(signals)}
        self._last: dict = {}
        self._pending: dict = {}
        self._time = None
        self._dumped = False
        f.write(f"$date\n\t{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC\n$end\n")
        f.write("$version\n\taccelsim cycle-level model\n$end\n")
        f.write(f"$timescale {timescale} $end\n")
        f.write(f"$scope module {scope} $end\n")
        for name, width in signals:
            ref = name if width == 1 else f"{name} [{width - 1}:0]"
            f.write(f"$var wire {width} {self._code[name]} {ref} $end\n")
        f.write("$upscope $end\n$enddefinitions $end\n")

    def at(self, time: int) -> None:
        """Move to `time` (>= the current one); the changes made so far are written at the current time."""
        if self._time is not None and time < self._time:
            raise ValueError(f"VCD time goes back from {self._time} to {time}")
        if time != self._time:
            self._flush()
            self._time = time

    def change(self, name: str, value) -> None:
        if self._time is None:
            raise ValueError("call at(time) before the first change")
        if value is not None and not 0 <= value < 1 << self._width[name]:
            raise ValueError(f"{name}: {value} does not fit in {self._width[name]} bits")
        self._pending[name] = value

    def finish(self) -> None:
        self._flush()

    def _flush(self) -> None:
        if self._time is None:
            return
        if not self._dumped:
            values = {name: self._pending.get(name) for name in self._code}
            self._f.write(f"#{self._time}\n$dumpvars\n")
            self._f.writelines(self._line(name, v) for name, v in values.items())
            self._f.write("$end\n")
            self._last, self._dumped = values, True
        else:
            changed = [(name, v) for name, v in self._pending.items() if self._last[name] != v]
            if changed:
                self._f.write(f"#{self._time}\n")
                self._f.writelines(self._line(name, v) for name, v in changed)
                self._last.update(changed)
        self._pending.clear()

    def _line(self, name: str, value) -> str:
        width, code = self._width[name], self._code[name]
        if width == 1:
            return f"{'x' if value is None else value}{code}\n"
        bits = "x" if value is None else format(value, "b")   # leading zeros implied (IEEE 1364 18.2.1)
        return f"b{bits} {code}\n"


def _code(i: int) -> str:
    """Identifier codes from the printable ASCII range ! .. ~ (94 symbols), shortest first."""
    code = ""
    while True:
        code += chr(33 + i % 94)
        i = i // 94 - 1
        if i < 0:
            return code


def read(path) -> dict[str, tuple[int, list[tuple[int, int | None]]]]:
    """Every wire of a VCD file (ours or a simulator's): {"scope.sub.name": (width, [(time, value or None), ...])}.
    Times are in the file's timescale; x or z bits read None."""
    wires: dict[str, tuple[int, list]] = {}
    by_code: dict[str, list[str]] = {}
    scope: list[str] = []
    time = 0
    with open(path) as f:
        tokens = iter(f.read().split())
        for tok in tokens:
            if tok in ("$date", "$version", "$comment", "$timescale"):
                for tok in tokens:
                    if tok == "$end":
                        break
            elif tok == "$scope":
                next(tokens)
                scope.append(next(tokens))
            elif tok == "$upscope":
                scope.pop()
            elif tok == "$var":
                _, width, code, name = next(tokens), int(next(tokens)), next(tokens), next(tokens)
                full = ".".join(scope + [name])
                wires[full] = (width, [])
                by_code.setdefault(code, []).append(full)
            elif tok.startswith("#"):
                time = int(tok[1:])
            elif tok[0] in "bB":
                _record(wires, by_code, next(tokens), tok[1:], time)
            elif tok[0] in "01xXzZ" and len(tok) > 1:
                _record(wires, by_code, tok[1:], tok[0], time)
    return wires


def _record(wires, by_code, code: str, bits: str, time: int) -> None:
    value = None if any(c in "xXzZ" for c in bits) else int(bits, 2)
    for name in by_code.get(code, ()):
        wires[name][1].append((time, value))
