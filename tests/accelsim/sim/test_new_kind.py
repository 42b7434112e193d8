"""A new arch kind is one profile (compiler.hardware.profiles), one compute model (accelsim.price.compute.MODELS), one
mapping-target generator (compiler.map.targets.TARGETS) and its YAML: a toy fifth kind registered in-process builds
and simulates a GEMM at tile fidelity, mapped on its own targets and priced by its own model; a kind whose compute
model is missing is an error naming it, never another kind's model."""
import dataclasses
import enum
from types import SimpleNamespace

import numpy as np
import pytest

from accelsim.price.compute import MODELS
from accelsim.sim.build import build, simulate
from accelsim.sim.model import load_arch
from compiler.builder import Builder
from compiler.errors import UserError
from compiler.hardware import ArchKind
from compiler.hardware.profiles import PROFILES, profile
from compiler.map.targets import TARGETS, Targets

MACS_PER_CYCLE = 64
STEP = 32       # the toy's one target: steps of 32 x 32 x 32

TOY_YAML = f"""
version: 1
name: toy
kind: toy
description: a made-up kind, one matrix unit of {MACS_PER_CYCLE} MACs a cycle
clock: 1 GHz
compute:
  - {{name: mac, role: matrix, count: 1, macs_per_cycle: {{fp32: {MACS_PER_CYCLE}}}, mac_energy: {{fp32: 1 pJ}}}}
  - {{name: alu, role: vector, count: 1, ops_per_cycle: {{fp32: 16}}, op_energy: {{fp32: 1 pJ}}}}
memory:
  - {{name: dram, capacity: 1 GiB, bandwidth: 100 GB/s, latency: 100 ns, holds: [weight, input, output],
     access: 64 B, read_energy: 10 pJ, write_energy: 10 pJ}}
  - {{name: sram, capacity: 256 KiB, bandwidth: 1000 GB/s, latency: 2 cycles, holds: [weight, input, output],
     access: 64 B, read_energy: 1 pJ, write_energy: 1 pJ}}
power: {{tdp: 1 W}}
"""


class ToyKind(enum.Enum):
    """ArchKind is closed; a kind added for real is a member of it. This one stands in for such a member."""

    toy = "toy"


def toy_steps(unit, op, output_path):
    yield None, {"b": 1, "m": STEP, "n": STEP, "k": STEP}, ("k", "m", "n")


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """The toy kind's profile and target generator registered, its YAML written; the compute model is the test's."""
    toy_profile = dataclasses.replace(profile(ArchKind.simd), kind=ToyKind.toy, compute_model="toy", targets="toy",
                                      matrix_keys=())
    monkeypatch.setitem(PROFILES, "toy", toy_profile)
    monkeypatch.setitem(TARGETS, "toy", Targets(toy_steps))
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_YAML)
    return path


def gemm(size: int):
    b = Builder("gemm")
    y = b.node("MatMul", [b.input("x", (size, size)), b.weight("w", (size, size))])
    return b.build([y])


def test_a_fifth_kind_is_a_profile_a_compute_model_a_target_generator_and_its_yaml(toy, monkeypatch):
    rows = []

    def matrix_cycles(m, n, k, unit, arch, mapping, dtype):
        rows.append((m, n, k))
        return np.ceil(m * n * k / MACS_PER_CYCLE).astype(np.int64)     # one MAC per lane per cycle, no overhead

    monkeypatch.setitem(MODELS, "toy", SimpleNamespace(matrix_cycles=matrix_cycles))
    arch = load_arch(toy)
    assert arch.kind is ToyKind.toy
    compiled = build(gemm(128), arch, dtype="fp32")
    (mapping,) = compiled.mappings.values()
    assert dict(mapping.levels[-1].tile) == {d: STEP for d, _ in mapping.loops}      # the toy's target, not SIMD's
    result = simulate(compiled, "tile")
    (op,) = result.ops
    # 128^3 MACs in 64 steps of 32^3, each 32,768 / 64 = 512 cycles: 32,768 cycles of compute, counted by hand
    assert rows and all((m == STEP).all() and (n == STEP).all() and (k == STEP).all() for m, n, k in rows)
    assert op.compute_cycles == 128 ** 3 // MACS_PER_CYCLE
    assert result.cycles >= op.compute_cycles


def test_a_kind_without_its_compute_model_is_an_error_naming_it(toy):
    compiled = build(gemm(64), load_arch(toy), dtype="fp32", mapped=False)
    with pytest.raises(UserError, match="no compute model 'toy'; there are: simd, simt, systolic"):
        simulate(compiled, "tile")


def test_a_kind_without_a_profile_is_an_error_naming_the_kinds(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_YAML)
    with pytest.raises(UserError, match="unknown kind 'toy'; use one of simd, simt, systolic, ternary"):
        load_arch(path)
    with pytest.raises(UserError, match="no arch kind 'toy'; there are: simd, simt, systolic, ternary"):
        profile("toy")
