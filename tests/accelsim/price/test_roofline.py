"""The roofline estimate: a worked example by hand, and its invariants over every preset."""
import json
import math

import pytest

import accelsim
from accelsim.arch import load_arch, preset_names
from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.compile import Options, compile_graph


def gemm(m=256, k=256, n=256):
    b = Builder("gemm")
    x = b.input("x", (m, k))
    y = b.node("MatMul", [x, b.weight("w", (k, n))])
    return b.build([y])


def test_gemm_on_tpu_v1_by_hand():
    # 256^3 int8 MACs on 65,536 MACs/cycle at 700 MHz; the 64 KiB weight tile comes over DDR3 at 34 GB/s.
    result = accelsim.run(gemm(), arch="tpu_v1", fidelity="roofline")
    (op,) = result.ops
    assert op.macs == 256 ** 3 and op.dtype == "int8"
    assert op.compute_seconds == pytest.approx(256 ** 3 / (65536 * 700e6))
    assert op.level_seconds["ddr3"] == pytest.approx(65536 / 34e9)
    assert op.bytes_by_level["ddr3"] == 65536            # weights only: activations live in the Unified Buffer
    assert op.bytes_by_level["unified_buffer"] == 2 * 65536
    assert op.bound == "ddr3" and op.seconds == pytest.approx(65536 / 34e9)
    assert op.cycles == math.ceil(op.seconds * 700e6 - 1e-9)
    assert op.utilisation == pytest.approx(op.compute_seconds / op.seconds)


def test_large_batch_turns_compute_bound():
    # Arithmetic intensity grows with M: at M = 8192 the same weights feed 32x the MACs.
    (op,) = accelsim.run(gemm(m=8192), arch="tpu_v1", fidelity="roofline").ops
    assert op.bound == "compute" and op.utilisation == pytest.approx(1.0)


def test_fp32_on_an_int8_only_chip_says_what_to_do():
    with pytest.raises(UserError, match="--dtype int8"):
        accelsim.run(gemm(), arch="tpu_v1", dtype="fp32", fidelity="roofline")


def test_ternary_weights_move_two_bits_each():
    options = dict(layers=1, hidden=256, heads=4, seq=16, vocab=512, mlp=512)
    result = accelsim.run("bitnet_b158", arch="fpga_ternary", fidelity="roofline", **options)
    ir = compile_graph(accelsim.load_model("bitnet_b158", **options), Options(dtype=DType.int8))
    ternary = {op.name: op for op in ir.ops if any(o.dtype == DType.ternary for o in op.inputs)}
    assert len(ternary) >= 4, "q, k, v, o and the MLP projections are BitLinear layers"
    dram = load_arch("fpga_ternary").memory[0].name
    for row in result.ops:
        if row.name in ternary:
            (weight,) = [o for o in ternary[row.name].inputs if o.dtype == DType.ternary]
            assert weight.nbytes * 4 == weight.elements          # 2 bits per weight
            assert row.bytes_by_level[dram] == weight.nbytes      # activations stay on chip at this size
            assert row.dtype == "ternary" and row.rate_dtype == "ternary"
    # the LM head stays out of the ternary layers, as the model has it: one byte per weight at the target's int8
    (head,) = [row for row in result.ops if row.name == "logits"]
    assert head.dtype == "int8" and head.bytes_by_level[dram] >= 256 * 512


def test_a_float_model_on_a_ternary_target_is_made_ternary_throughout():
    result = accelsim.run("resnet18", arch="fpga_ternary", fidelity="roofline", image=32)
    assert {row.dtype for row in result.ops if row.kind == "einsum"} == {"ternary"}


SMALL = {
    "resnet18": dict(image=32),
    "bert_base": dict(layers=1, seq=16),
    "bitnet_b158": dict(layers=1, hidden=256, heads=4, seq=16, vocab=512, mlp=512),
}


@pytest.mark.parametrize("arch", preset_names())
@pytest.mark.parametrize("model", sorted(SMALL))
def test_invariants_on_every_preset(arch, model):
    result = accelsim.run(model, arch=arch, fidelity="roofline", **SMALL[model])
    graph = accelsim.load_model(model, **SMALL[model])
    from compiler.ops.lower import folded_nodes

    ran = {op.node for op in result.ops}
    skipped = set(folded_nodes(graph))
    assert {n.name for n in graph.nodes} == ran | skipped, "every node appears in the report or was folded"
    for op in result.ops:
        candidates = [op.compute_seconds, op.latency_seconds, *op.level_seconds.values()]
        assert op.seconds == pytest.approx(max(candidates))
        assert 0.0 <= op.utilisation <= 1.0 + 1e-12
        assert op.cycles >= 0
        if op.bound != "view":      # a fused op reading only its kernel's tensors moves no bytes, but computes
            assert (op.bytes > 0 or op.kernel) and sum(op.energy_j.values()) > 0
    totals = result.totals()
    assert totals["seconds"] == pytest.approx(sum(op.seconds for op in result.ops))
    assert totals["energy_j"] > 0
    assert 0 < totals["utilisation"] <= 1.0 + 1e-12


def test_results_are_deterministic():
    a = accelsim.run("resnet18", arch="a100", image=32, fidelity="roofline").to_json()
    b = accelsim.run("resnet18", arch="a100", image=32, fidelity="roofline").to_json()
    assert a == b
    data = json.loads(a)
    assert data["version"] == 1 and data["arch"]["name"] == "a100"


def asymmetric_tpu_v1(tmp_path):
    """TPU v1 with every level's write energy 3x its read energy, so a dropped or swapped term shows."""
    from accelsim.arch import arch_document, load_arch_text
    from accelsim.arch.write import arch_yaml

    doc = arch_document(load_arch("tpu_v1"))
    for level in doc["memory"]:
        value, unit = level["read_energy"].split()
        level["write_energy"] = f"{3 * float(value):g} {unit}"
    return load_arch_text(arch_yaml(doc), "asymmetric.yaml", tmp_path / "asymmetric.yaml")


def test_every_level_of_a_gemm_by_hand_on_tpu_v1(tmp_path):
    # x [256, 256] int8 lives in the Unified Buffer; the output is accumulated in the accumulators and kept in the
    # Unified Buffer; the weights cross DDR3 and the weight FIFO. Bandwidths from archs/tpu_v1.yaml.
    arch = asymmetric_tpu_v1(tmp_path)
    (op,) = accelsim.run(gemm(), arch=arch, fidelity="roofline").ops
    tile = 256 * 256
    moved = {"ddr3": tile, "weight_fifo": tile, "unified_buffer": 2 * tile, "accumulators": tile}
    bandwidth = {"ddr3": 34e9, "weight_fifo": 179.2e9, "unified_buffer": 358.4e9, "accumulators": 716.8e9}
    assert op.bytes_by_level == moved
    assert op.level_seconds == {lv: pytest.approx(n / bandwidth[lv]) for lv, n in moved.items()}
    written = {"ddr3": 0, "weight_fifo": 0, "unified_buffer": tile, "accumulators": tile}
    per_byte = {lv.name: (lv.read_energy_j / lv.access_bytes, lv.write_energy_j / lv.access_bytes)
                for lv in arch.memory}
    want = {lv: (n - written[lv]) * per_byte[lv][0] + written[lv] * per_byte[lv][1] for lv, n in moved.items()}
    want["mxu"] = 256 ** 3 * arch.matrix.energy_per_action(DType.int8)
    assert op.energy_j == pytest.approx(want, rel=1e-12)


def test_tile_energy_is_reads_times_read_energy_plus_writes_times_write_energy(tmp_path):
    arch = asymmetric_tpu_v1(tmp_path)
    for op in accelsim.run("resnet18", arch=arch, image=32).ops:
        if op.bound == "view":
            continue
        for lv in arch.memory:
            reads, writes = op.bytes_read_by_level.get(lv.name, 0), op.bytes_written_by_level.get(lv.name, 0)
            want = reads * lv.read_energy_j / lv.access_bytes + writes * lv.write_energy_j / lv.access_bytes
            assert op.energy_j.get(lv.name, 0.0) == pytest.approx(want, rel=1e-12), (op.name, lv.name)


def test_an_op_like_one_estimated_before_gets_its_estimate_under_its_own_name():
    # GPT-2's blocks repeat their ops; each twin's estimate is the one estimate_op gives it, field for field
    from accelsim.price import roofline
    from accelsim.sim.model import load_model

    graph = load_model("gpt2", batch=2, layers=3, hidden=64, heads=4, seq=32, vocab=128)
    for name in ("a100", "tpu_v1"):
        arch = load_arch(name)
        ir = compile_graph(graph, Options(dtype=arch.native_dtype, arch=arch, fuse="chains"))
        roofline._KNOWN.clear()
        shared = roofline.estimate(ir, arch)
        assert len(roofline._KNOWN) < len(ir.ops) / 2          # the blocks' twins were estimated once
        assert shared == [roofline.estimate_op(op, arch) for op in ir.ops]
        assert roofline.estimate(ir, arch) == shared             # and again, from what is kept
