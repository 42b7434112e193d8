"""A GPU's double-buffered loads are issued a step ahead (compiler.codegen.assemble, `ahead`): the next chunk's or
tile's load comes before the current one's store in program order, so on the DRAM channel that loads and stores share
it is not queued behind that store. Other targets keep their order (a systolic array's or an NPU's program is its
instruction stream; the systolic cycle counts are checked against SCALE-Sim and the RTL)."""
import numpy as np

from accelsim.sim.api import run
from accelsim.sim.build import mappings_for
from accelsim.validate import cases
from compiler.codegen import generate
from compiler.codegen.assemble import Stream, assemble
from compiler.codegen.nest import Runs
from compiler.program import LOAD, STORE
from tests.compiler.codegen.test_codegen import compiled

GELU = "gelu 1 16777216 fp16"      # 32 MiB in, 32 MiB out: cut into chunks


def dram_rows(arch_name):
    """(kind, operand) of the op's rows on the outermost level, in program order."""
    case = cases.parse(GELU)
    arch, ir = compiled(case.graph(), arch_name, dtype=case.dtype)
    program = generate(ir, arch, mappings_for(ir, arch)).program
    rows = program[program["level"] == 0]
    return [int(k) for k in rows["kind"]]


def test_a_gpu_loads_the_next_chunk_before_storing_this_one():
    kinds = dram_rows("a100_80gb")
    assert kinds.count(LOAD) >= 4
    assert kinds[:3] == [LOAD, LOAD, STORE]        # chunk 1's load, then chunk 0's store


def test_other_targets_keep_their_order():
    """On an NPU (its DMA program is its instruction stream) each chunk is loaded, then stored, then the next loaded."""
    kinds = dram_rows("npu4")
    assert kinds[:4] == [LOAD, STORE, LOAD, STORE]


def test_an_element_wise_op_streams_near_the_dram_bandwidth():
    """GELU of 2^24 fp16 on the A100 80 GB moves 64 MiB through DRAM; issued a chunk ahead it runs its kernel at more
    than 60% of the 2,039 GB/s (in order, a chunk's store held the next chunk's load back: about 50%)."""
    case = cases.parse(GELU)
    result = run(case.graph(), arch="a100_80gb", dtype=case.dtype)
    launch = 3e-6
    seconds = sum(op.seconds for op in result.ops) - launch
    assert 2 * 2 * 2**24 / seconds > 0.6 * 2039e9


def test_an_inner_load_moves_only_with_the_load_it_copies_from():
    """A double-buffered inner stream whose outer one is not double-buffered stays in its step: moving it alone
    would issue it before the load it copies from."""
    runs = Runs(np.array([0, 1, 2]), np.ones(3, np.int64), np.ones(3, bool), np.ones(3, bool))
    nbytes = np.full(3, 64, np.int64)
    outer = Stream(0, 0, 0, runs, nbytes, nbytes, False)
    inner = Stream(0, 1, 1, runs, nbytes, nbytes, True)
    compute = {f: np.ones(3, np.int64) for f in ("m", "n", "k", "work", "useful")}
    rows, _ = assemble([outer, inner], 3, compute, op=0, unit=0, ahead=True)
    deps = rows["dep"]
    assert np.all(deps < np.arange(len(rows))[:, None])
    assert [int(r["level"]) for r in rows if r["kind"] == LOAD][:2] == [0, 1]
