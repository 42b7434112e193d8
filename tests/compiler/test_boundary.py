"""Where a model's own inputs and outputs lie (compiler.passes.boundary): warm, they stay where activations live
between ops (L2 when they fit, as a repeated call finds them); cold, they are read from and written to DRAM, as a
first call or a timing that flushes the caches does. Only the model's inputs and outputs move; numerics never."""
import numpy as np
import pytest

import accelsim
from accelsim.arch import load_arch
from accelsim.validate import cases
from compiler.errors import UserError
from compiler.ops.interpret import run_ir
from compiler.pipeline import Options, compile_graph


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
