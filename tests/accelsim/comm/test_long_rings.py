"""Rings over very many devices: written in at most MAX_STEPS rows per piece and lane, so a million-device
collective costs what a 513-device one does, and its time still follows NCCL's closed form."""
import importlib

import pytest

from accelsim.arch.system_load import load_system
from accelsim.comm import collective
from accelsim.comm.collective import MAX_DEVICES
from accelsim.comm.rings import MAX_STEPS
from compiler.errors import UserError

B, L = 10e9, 5e-6
BIG = """version: 1
kind: system
name: big_switch
description: a million devices on one switch, one link each
device: a100
devices: {default: 8}
levels:
  - name: link
    topology: switch
    devices: 1048576
    links: 1
    bandwidth: 10 GB/s
    latency: 5 us
"""
GiB = 1 << 30


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("systems") / "big.yaml"
    path.write_text(BIG)
    return load_system(path)


@pytest.mark.parametrize("n", [MAX_STEPS // 2 + 1, 3000, 1_000_000])
@pytest.mark.parametrize("size", [8 << 10, GiB])
def test_a_long_ring_keeps_nccls_closed_form_in_bounded_rows(big, n, size):
    """t = 2(n-1)/n x S/B + 2(n-1) x L: exact with one piece in flight, however the steps are grouped."""
    r = collective("allreduce", big, n, size, "ring")
    assert r.seconds == pytest.approx(2 * (n - 1) / n * size / B + 2 * (n - 1) * L, rel=1e-9)
    assert r.transfers <= MAX_STEPS


def test_grouped_steps_stay_close_to_one_row_per_step(monkeypatch):
    """1024 GPUs, 2046 ring steps, rails across nodes: one row per step against 256 rows (8 steps each)."""
    rings = importlib.import_module("accelsim.comm.rings")
    monkeypatch.setattr(rings, "MAX_STEPS", 4096)
    exact = collective("allreduce", "dgx_a100", 1024, GiB, "ring")
    monkeypatch.setattr(rings, "MAX_STEPS", 256)
    grouped = collective("allreduce", "dgx_a100", 1024, GiB, "ring")
    assert grouped.transfers < exact.transfers / 7
    assert grouped.seconds == pytest.approx(exact.seconds, rel=0.015)


def test_a_trillion_devices_are_timed_and_more_than_2_to_the_40_refused():
    r = collective("allreduce", "dgx_h100", 10 ** 12, GiB)
    assert r.seconds > 0 and r.transfers < 10 ** 5
    with pytest.raises(UserError, match=r"devices 1099511627777: at most 1,099,511,627,776 \(2\^40\)"):
        collective("allreduce", "dgx_h100", MAX_DEVICES + 1, GiB)
