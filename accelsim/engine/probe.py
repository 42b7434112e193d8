"""A clock probe for `accelsim arch detect-host`: a chain of dependent one-cycle integer ops, compiled by numba so
that nothing but the chain runs in the timed loop."""
from numba import njit


@njit(cache=True)
def chain(iterations: int, x: int, y: int) -> int:
    for _ in range(iterations):
        x = (x + y) ^ 0x5BD1E995    # add, then xor: each needs the one before, nothing overlaps them
        x = (x + y) ^ 0x27D4EB2F
    return x
