"""Sweep workers die with their driver: after SIGKILL or SIGTERM of the process running the pool, no worker runs
on, orphaned (each watches its parent and exits within a second)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DRIVER = """
import time
from accelsim.sweep.executors import LocalPool
pool = LocalPool(2)
futures = [pool._pool.submit(time.sleep, 120) for _ in range(2)]
while len(pool._pool._processes) < 2 or not all(p.is_alive() for p in pool._pool._processes.values()):
    time.sleep(0.1)
time.sleep(1.0)                               # the workers have run their initializer
print(" ".join(str(pid) for pid in pool._pool._processes), flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")          # a zombie has exited; only its parent's reaping is left


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_workers_exit_when_their_driver_is_killed(how):
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(pid) for pid in driver.stdout.readline().split()]
        assert len(workers) == 2 and all(alive(pid) for pid in workers)
        os.kill(driver.pid, how)
        driver.wait(timeout=30)
        deadline = time.monotonic() + 20
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(alive(pid) for pid in workers), "workers outlived their driver"
    finally:
        driver.kill()
        for pid in workers if "workers" in locals() else []:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
