"""Where a model's own inputs and outputs lie (compiler.passes.boundary): warm, they stay where activations live
between ops (L2 when they fit, as a repeated call finds them); cold, they are read from and written to DRAM, as a
first call or a timing that flushes the caches does. Only the model's inputs and outputs move; numerics never."""
import numpy as np
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.validate import cases
from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Move
from compiler.ops.interpret import run_ir
from compiler.compile import Options, compile_graph


def compiled(key, arch_name, caches):
    case = cases.parse(key)
    arch = load_arch(arch_name)
    return compile_graph(case.graph(), Options(dtype=case.dtype, arch=arch, caches=caches))


def dram_bytes(result) -> int:
    return sum(op.bytes_by_level.get("hbm3", 0) for op in result.ops)


def test_cold_marks_only_the_model_inputs_and_outputs():
    warm = compiled("softmax 512 1024 fp16", "h100", "warm")
    cold = compiled("softmax 512 1024 fp16", "h100", "cold")
    assert not any(o.external for op in warm.ops for o in (*op.inputs, op.output))
    outside = set(cold.inputs) | set(cold.outputs)
    for op in cold.ops:
        for operand in (*op.inputs, op.output):
            assert operand.external == (operand.tensor in outside), (op.name, operand.tensor)


def test_a_cold_gemm_reads_its_activations_from_dram_and_a_warm_one_from_l2():
    """Both operands of a batched GEMM are activations (2 MiB each: L2 holds them): warm, DRAM sees no byte of them;
    cold, each is read from DRAM at least once and the result written back, so the cold run is slower."""
    key = "bgemm 1 1024 1024 2048 fp8"
    warm = accelsim.run(cases.parse(key).graph(), "h100", dtype="fp8")
    cold = accelsim.run(cases.parse(key).graph(), "h100", dtype="fp8", caches="cold")
    assert dram_bytes(warm) == 0
    assert dram_bytes(cold) >= 1024 * 2048 * 2 + 1024 * 1024      # fp8 A and B in, the fp8 result out
    assert cold.seconds > warm.seconds


def test_a_weight_comes_from_dram_either_way_and_a_whole_model_barely_moves():
    """A weight lives in DRAM whatever `caches` says; in a whole model only the first op's input and the last op's
    output move, so ResNet-18 shifts by well under a percent."""
    warm = accelsim.run("resnet18", "a100", image=64)
    cold = accelsim.run("resnet18", "a100", image=64, caches="cold")
    assert 0 <= cold.seconds - warm.seconds < 0.01 * warm.seconds
    changed = [w.name for w, c in zip(warm.ops, cold.ops) if w.bytes_by_level != c.bytes_by_level]
    assert changed and set(changed) <= {warm.ops[0].name, warm.ops[-1].name, "conv1", "fc"}, changed


def test_cold_copies_only_the_ops_that_touch_the_model_inputs_and_outputs():
    """A chain of element-wise ops: cold, the first reads the model's input and the last writes its output; the ops
    between keep their operands and stay the very objects they were (a 100,000-op chain copies two, not all)."""
    from compiler.passes.boundary import boundary
    b = Builder("chain", weights=False)
    x = b.input("x", (4, 16))
    for _ in range(4):
        x = b.node("Relu", [x])
    arch = load_arch("h100")
    warm = compile_graph(b.build([x]), Options(dtype=DType.fp16, arch=arch, caches="warm"))
    cold = boundary(warm, Options(dtype=DType.fp16, arch=arch, caches="cold"))
    assert [a is c for a, c in zip(warm.ops, cold.ops)] == [False, True, True, False]
    assert cold.ops[0].inputs[0].external and cold.ops[-1].output.external
    assert cold.ops[0].output is warm.ops[0].output and cold.ops[-1].inputs == warm.ops[-1].inputs


def test_numerics_do_not_depend_on_where_operands_lie():
    ir_warm = compiled("bgemm 2 32 48 64 fp32", "a100", "warm")
    ir_cold = compiled("bgemm 2 32 48 64 fp32", "a100", "cold")
    rng = np.random.default_rng(0)
    shapes = {o.tensor: o.shape for op in ir_warm.ops for o in op.inputs}
    feeds = {name: rng.standard_normal(shapes[name], dtype=np.float32) for name in ir_warm.inputs}
    first, second = run_ir(ir_warm, feeds), run_ir(ir_cold, feeds)
    for name in ir_warm.outputs:
        np.testing.assert_array_equal(first[name], second[name])


def test_an_unknown_caches_value_is_refused():
    with pytest.raises(UserError, match="caches 'hot': choose from warm, cold"):
        compiled("gemm 64 64 64 fp32", "a100", "hot")


def test_the_command_line_takes_caches(capsys):
    from accelsim.cli import main

    assert main(["run", "gpt2", "--opt", "layers=1", "--seq", "8", "--arch", "h100", "--caches", "cold",
                 "--json", "-"]) == 0
    assert '"ops"' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run", "gpt2", "--arch", "h100", "--caches", "hot"])


def resident_bytes(ir) -> tuple[int, list[int]]:
    """(bytes of the model inputs and outputs left where activations live, each one's bytes), each buffer once: an
    in-place write's output (a KV cache's present) is the buffer it writes into (its past)."""
    aliases = {op.output.tensor for op in ir.ops if isinstance(op, Move) and op.in_place}
    seen = {o.tensor: o for op in ir.ops for o in (*op.inputs, op.output)
            if o.tensor in set(ir.inputs) | set(ir.outputs) and o.tensor not in aliases and not o.external}
    sizes = [o.nbytes for o in seen.values()]
    return sum(sizes), sizes


@pytest.mark.parametrize("seed", range(8))
def test_warm_keeps_resident_only_what_fits_the_level_together(seed):
    """Random model inputs concatenated, together more or less than A100's 40 MiB L2 (archs/a100.yaml): warm, the
    tensors left in L2 sum to at most its capacity, none alone exceeds it, and when everything fits nothing is sent
    to DRAM (seeds 3 and 6)."""
    arch = load_arch("a100")
    l2 = next(level for level in arch.memory if level.name == "l2").capacity_total
    assert l2 == 40 * 2 ** 20
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 12, size=rng.integers(2, 6)) * 256      # 256 rows of 1024 fp32: 1 MiB (seed 7: 41 MiB out)
    b = Builder("inputs", opset=17)
    graph = b.build([b.node("Concat", [b.input(f"x{i}", (int(r), 1024)) for i, r in enumerate(rows)], axis=0)])
    ir = compile_graph(graph, Options(dtype=DType.fp32, arch=arch, caches="warm"))
    total, sizes = resident_bytes(ir)
    assert total <= l2 and all(size <= l2 for size in sizes)
    everything = sum(int(r) * 1024 * 4 for r in rows) * 2               # inputs, and the output as large
    assert (total == everything) == (everything <= l2)


def test_a_kv_cache_larger_than_l2_is_not_warm():
    """Llama-2-7B's decode step at batch 1 over 2K positions, 4 layers: each layer's key and value buffers are
    32 x 128 x 2048 fp16 = 16 MiB, 128 MiB in all, more than A100's 40 MiB L2 holds: at most two stay warm."""
    arch = load_arch("a100")
    graph = accelsim.load_model("llama", mode="decode", seq=2048, dtype="fp16", layers=4, weights=False)
    ir = compile_graph(graph, Options(dtype=DType.fp16, arch=arch, caches="warm"))
    total, _ = resident_bytes(ir)
    assert total <= 40 * 2 ** 20
    caches = {o.tensor: o.external for op in ir.ops for o in op.inputs if o.tensor.startswith("past_")}
    assert len(caches) == 8 and sum(not external for external in caches.values()) <= 2
    writes = [op for op in ir.ops if isinstance(op, Move) and op.in_place]
    assert len(writes) == 8 and all(op.output.external == op.inputs[0].external for op in writes)


def test_a_cpus_warm_data_stays_in_its_last_level_cache_not_only_in_l1():
    """A CPU's innermost shared level is its 32 KiB L1d; a repeated 256^3 fp32 GEMM finds its two 256 KiB operands
    and its 256 KiB result in the 32 MiB last-level cache (the host's measured GEMMs are timed warm), so none of the
    three is external; a 64 MiB pair would not fit and goes to DRAM."""
    from compiler.passes.boundary import last_level
    arch = load_arch("validation/cpu/host_amd_epyc/arch.yaml")
    assert arch.memory[last_level(arch)].capacity_total == 32 << 20           # the llc of the YAML
    ir = compiled("gemm 256 256 256 fp32", "validation/cpu/host_amd_epyc/arch.yaml", "warm")
    assert not any(o.external for op in ir.ops for o in (*op.inputs, op.output))
    big = compiled("gemm 4096 4096 4096 fp32", "validation/cpu/host_amd_epyc/arch.yaml", "warm")
    assert any(o.external for op in big.ops for o in (*op.inputs, op.output))
