"""The planner's space: every split of the devices into dp x tp x pp, every micro-batch count that divides a
replica's share of the batch, and for training the schedules, ZeRO stages and recomputation modes.

Divisors come from the prime factors (trial division by small primes, then Pollard's rho), so a batch of 10^9 costs
its 100 divisors, not 10^9 trials. Micro-batch counts go up to MAX_MICROBATCHES (a schedule of 10^8 micro-batches
is 10^8 passes to price); a space larger than its budget keeps, for every split, its fewest micro-batches.
Invariant: the same question gives the same candidates in the same order (by their text).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from itertools import islice

from accelsim.parallel.plan import Plan
from compiler.train.recompute import MODES

ZERO = (0, 1, 2, 3)
MAX_MICROBATCHES = 4096   # micro-batch counts searched at most: a schedule is priced pass by pass, O(mb x pp)
SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)   # Miller-Rabin with these is exact below 3.3e24


@dataclass(frozen=True)
class Candidate:
    plan: Plan
    recompute: str | None      # None for inference

    @property
    def text(self) -> str:
        return self.plan.text() + (f" --recompute {self.recompute}" if self.recompute else "")

    def micro(self, batch: int) -> int:
        return batch // (self.plan.dp * self.plan.microbatches)

    def fields(self, batch: int) -> dict:
        p = self.plan
        out = {"dp": p.dp, "tp": p.tp, "pp": p.pp, "mb": p.microbatches, "micro_batch": self.micro(batch),
               "schedule": p.schedule, "chunks": p.chunks, "zero": p.zero, "sp": p.sp}
        return out | ({"recompute": self.recompute} if self.recompute else {})


def candidates(devices: int, batch: int, count: int, training: bool, recompute: tuple[str, ...] = MODES,
               zero: tuple[int, ...] = ZERO, limit: int | None = None) -> list[Candidate]:
    """Every plan of the space, in order of its text. `count`: the model's blocks (pp and 2 x pp must divide them).
    With `limit`, at most that many: every split's candidates of fewest micro-batches first, split after split (so a
    space of millions still holds every split of the devices, each with its smallest micro-batch counts)."""
    splits = [_split(tp, pp, devices // (tp * pp), batch, count, training, recompute, zero)
              for tp in divisors(devices) for pp in divisors(devices // tp)
              if not ((pp > 1 and count % pp) or batch % (devices // (tp * pp)))]
    out: list[Candidate] = []
    while splits and (limit is None or len(out) < limit):
        for split in list(splits):
            taken = list(islice(split, 1))
            if not taken:
                splits.remove(split)
            out += taken[0] if taken else []
    if limit is not None:
        out = out[:limit]
    return sorted(out, key=lambda c: c.text)


def _split(tp: int, pp: int, dp: int, batch: int, count: int, training: bool, recompute: tuple[str, ...],
           zero: tuple[int, ...]):
    """One split's candidates, a list per micro-batch count, fewest micro-batches first (up to MAX_MICROBATCHES)."""
    for mb in divisors(batch // dp):
        if mb > MAX_MICROBATCHES:
            return
        base = Plan(dp=dp, tp=tp, pp=pp, mb=mb)
        if not training:
            yield [Candidate(base, None)]
            continue
        schedules = [base]
        if pp > 1 and count % (2 * pp) == 0 and mb % pp == 0:    # Megatron's interleaving needs mb % pp == 0
            schedules.append(replace(base, schedule="interleaved", chunks=2))
        yield [Candidate(replace(plan, zero=stage), r) for plan in schedules
               for stage in sorted({z if dp > 1 else 0 for z in zero}) for r in recompute]  # ZeRO: none at dp=1


def divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending, from its prime factors."""
    out = [1]
    for prime, power in sorted(factors(n).items()):
        out = [d * prime**k for d in out for k in range(power + 1)]
    return sorted(out)


def factors(n: int) -> dict[int, int]:
    """n's prime factors and their powers: {2: 3, 5: 1} for 40."""
    found: dict[int, int] = {}
    for p in SMALL_PRIMES:
        while n % p == 0:
            found[p] = found.get(p, 0) + 1
            n //= p
    rest = [n] if n > 1 else []
    while rest:
        m = rest.pop()
        if _prime(m):
            found[m] = found.get(m, 0) + 1
        else:
            d = _rho(m)
            rest += [d, m // d]
    return found


def _prime(n: int) -> bool:
    """Miller-Rabin over the small primes (n has no factor among them)."""
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in SMALL_PRIMES:
        if a % n == 0:
            continue
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _rho(n: int) -> int:
    """A non-trivial factor of the odd composite n (Pollard's rho, Floyd's cycle finding)."""
    c = 1
    while True:
        x = y = 2
        d = 1
        while d == 1:
            x = (x * x + c) % n
            y = (y * y + c) % n
            y = (y * y + c) % n
            d = math.gcd(abs(x - y), n)
        if d != n:
            return d
        c += 1
