"""Tile fidelity end to end: invariants against the roofline over every preset and zoo model (a fixed third of
their pairs), the API and CLI defaults, energy, determinism and the Perfetto trace."""
import json

import pytest

import accelsim
from accelsim.arch import preset_names
from accelsim.cli import main
from compiler.zoo import MODELS

TINY_LM = dict(layers=1, seq=16, hidden=64, mlp=128, vocab=256)
SIZES = {
    "alexnet": dict(image=96, width=0.25, fc=64, classes=10),
    "resnet18": dict(image=32),
    "resnet50": dict(image=32, width=0.25),
    "vit_b16": dict(image=32, layers=1, hidden=64, heads=2, mlp=128, classes=10),
    "bert_base": dict(layers=1, seq=16),
    "gpt2": dict(TINY_LM, heads=2),
    "llama": dict(TINY_LM, heads=2),
    "bitnet_b158": dict(layers=1, hidden=256, heads=4, seq=16, vocab=512, mlp=512),
    "matmulfree_lm": TINY_LM,
}


# Every third cell of models x presets, on diagonals: each model meets four or five presets and each preset three
# models (the whole grid, 117 cells, runs the same checks for a minute of CPU).
SAMPLE = [(model, arch) for i, model in enumerate(sorted(SIZES)) for j, arch in enumerate(preset_names())
          if (i + j) % 3 == 0]


def test_every_zoo_model_has_a_size():
    assert set(SIZES) == set(MODELS)


def test_the_sample_meets_every_model_and_every_preset():
    assert {m for m, _ in SAMPLE} == set(SIZES) and {a for _, a in SAMPLE} == set(preset_names())


@pytest.mark.parametrize("model, arch", SAMPLE)
def test_tile_level_never_beats_the_roofline(model, arch):
    tile = accelsim.run(model, arch=arch, **SIZES[model])
    roof = {op.name: op for op in accelsim.run(model, arch=arch, fidelity="roofline", **SIZES[model]).ops}
    assert tile.fidelity == "tile" and [op.name for op in tile.ops] == list(roof)
    kernels: dict[str, list] = {}     # per kernel: an epilogue in a systolic output stage runs beside the array
    for op in tile.ops:
        kernels.setdefault(op.kernel or op.name, []).append((op.cycles, roof[op.name].cycles))
    for name, ops in kernels.items():
        assert sum(t for t, _ in ops) >= max(r for _, r in ops), name
    for op in tile.ops:
        bound = roof[op.name]
        assert op.cycles >= bound.cycles or op.kernel and op.kernel != op.name, op.name
        for level, compulsory in bound.bytes_by_level.items():
            assert op.bytes_by_level.get(level, 0) >= compulsory, (op.name, level)
        assert 0.0 <= op.utilisation <= 1.0 + 1e-9, op.name
        if bound.bound == "view":
            continue
        assert op.cycles == op.compute_cycles + op.stall_cycles
        assert sum(op.stall_cycles_by_level.values()) <= op.stall_cycles
        assert op.bytes_by_level == {lv: op.bytes_read_by_level.get(lv, 0) + op.bytes_written_by_level.get(lv, 0)
                                     for lv in op.bytes_by_level}
        assert sum(op.energy_j.values()) > 0, op.name
        if op.macs:
            assert op.work >= op.macs and op.tiles >= 1
    totals = tile.totals()
    assert totals["energy_j"] > 0 and totals["cycles"] >= sum(op.cycles for op in roof.values())
    assert 0 < totals["power_fraction_of_tdp"]


def test_runs_are_deterministic():
    a = accelsim.run("resnet18", arch="h100", image=32).to_json()
    b = accelsim.run("resnet18", arch="h100", image=32).to_json()
    assert a == b


def test_tile_is_the_default_and_roofline_stays_selectable():
    tile = accelsim.run("resnet18", arch="tpu_v1", image=32)
    roof = accelsim.run("resnet18", arch="tpu_v1", image=32, fidelity="roofline")
    assert tile.fidelity == "tile" and roof.fidelity == "roofline"
    assert all(op.compute_cycles is None for op in roof.ops)
    data = json.loads(tile.to_json())
    first = data["ops"][0]
    for key in ("compute_cycles", "stall_cycles", "stall_cycles_by_level", "bytes_read_by_level",
                "bytes_written_by_level", "energy_j"):
        assert key in first
    assert {"compute_cycles", "stall_cycles", "power_fraction_of_tdp"} <= set(data["totals"])


def test_a_weight_bound_gemm_waits_on_dram():
    # TPU v1: a 16 x 4096 x 4096 int8 GEMM (batch-16 inference) streams 16 MiB of weights over 34 GB/s
    # DDR3, 345 k cycles at 700 MHz, for 4 k cycles of peak compute: DDR3 is busy nearly all the time,
    # and the array, which finishes each 256 x 256 fold before the next weight tile arrives, waits on it.
    from compiler.builder import Builder

    b = Builder("gemm")
    y = b.node("MatMul", [b.input("x", (16, 4096)), b.weight("w", (4096, 4096))])
    (op,) = accelsim.run(b.build([y]), arch="tpu_v1").ops
    assert op.bound == "ddr3" and op.level_seconds["ddr3"] * 700e6 > 0.95 * op.cycles
    assert op.stall_cycles_by_level["ddr3"] > 0.3 * op.cycles
    assert max(op.stall_cycles_by_level, key=op.stall_cycles_by_level.get) == "ddr3"
    assert op.cycles >= 16 * 2 ** 20 / 34e9 * 700e6
    assert op.bytes_read_by_level["ddr3"] == 4096 * 4096      # each weight read from DRAM exactly once


def test_cli_writes_a_perfetto_trace(tmp_path, capsys):
    path = tmp_path / "trace.json"
    assert main(["run", "resnet18", "--arch", "tpu_v1", "--opt", "image=32", "--trace", str(path)]) == 0
    events = json.loads(path.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"ops", "DMA ddr3", "DMA unified_buffer", "compute mxu"} <= tracks
    slices = [e for e in events if e["ph"] == "X"]
    assert slices and all(e["dur"] > 0 and e["ts"] >= 0 for e in slices)
    by_track: dict[int, list] = {}
    for e in slices:
        by_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():   # one row at a time per resource: slices never overlap
        spans.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(spans, spans[1:]))


def test_trace_needs_the_tile_fidelity(tmp_path, capsys):
    assert main(["run", "resnet18", "--opt", "image=32", "--fidelity", "roofline", "--trace",
                 str(tmp_path / "t.json")]) == 2
    assert "--fidelity tile" in capsys.readouterr().err


@pytest.mark.parametrize("model, arch, options", [
    ("resnet18", "tpu_v1", {"image": 64}), ("gpt2", "h100", {"layers": 2, "seq": 32}),
    ("bert_base", "systolic_8x8", {"layers": 1, "seq": 16}),
])
def test_op_by_op_equals_the_whole_program(model, arch, options):
    # The default path simulates one op at a time and repeated ops once; it must change no number.
    from accelsim.sim.build import build
    from accelsim.sim.tile import run_tiles, simulate_ops

    compiled = build(model, arch, **options)
    whole, _ = run_tiles(compiled.ir, compiled.arch, compiled.mappings)
    alone = simulate_ops(compiled.ir, compiled.arch, compiled.mappings)
    assert [r.to_dict() for r in alone] == [r.to_dict() for r in whole]


def test_a_chain_of_identical_ops_is_simulated_once_and_named_per_op(tmp_path):
    # 12 identical Relus fused into one kernel on a GPU: the first op's result stands for its 11 twins, each given
    # its own name, start and kernel; every figure equals the whole Program's, simulated op by op
    import onnx
    from onnx import TensorProto, helper

    from accelsim.sim.build import build
    from accelsim.sim.tile import run_tiles, simulate_ops

    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu{i}") for i in range(12)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("t12", TensorProto.FLOAT, [1, 64])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "chain.onnx")
    compiled = build(str(tmp_path / "chain.onnx"), "h100")
    whole, _ = run_tiles(compiled.ir, compiled.arch, compiled.mappings)
    alone = simulate_ops(compiled.ir, compiled.arch, compiled.mappings)
    assert [r.to_dict() for r in alone] == [r.to_dict() for r in whole]
    assert [r.kernel for r in alone] == [""] + ["relu0"] * 11
    assert [r.name for r in alone] == [f"relu{i}" for i in range(12)]
    assert len({r.start_cycle for r in alone}) == 12
