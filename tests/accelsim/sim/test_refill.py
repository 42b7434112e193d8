"""accelsim.sim.refill: a level refilled tile by tile (TPU v1's weight FIFO) adds dependencies per part; a matrix
of them past the tile engine's bound is refused before it is allocated, naming the level and the way out."""
import pytest

import accelsim.sim.refill as refill
from accelsim.sim.api import run
from compiler.errors import UserError
from compiler.program import MAX_DEPS, MAX_ROWS


def test_a_dependency_matrix_past_the_bound_is_refused_before_allocation(monkeypatch):
    """A 1x1 array on TPU v1's memories refilled the weight FIFO in 19,975 parts: 299,799 rows x 19,975 columns,
    an internal MemoryError for 44.6 GiB. The bound here is lowered to what ResNet-18 at 32x32 needs on TPU v1
    itself, so the test runs in seconds."""
    monkeypatch.setattr(refill, "MAX_CELLS", 1000)
    with pytest.raises(UserError, match=r"tpu_v1: weight_fifo \(refill: tile\) is refilled in so many parts that "
                                        r"[\d,]+ Program rows would wait on up to [\d,]+ rows each, "
                                        r"[\d,]+ dependencies; "
                                        r"the tile engine takes at most 1,000 .*--fidelity roofline"):
        run("resnet18", arch="tpu_v1", image=32, trace=True)     # traced: never answered from the cache


def test_the_bound_is_a_programs_worth_and_presets_stay_under_it():
    assert refill.MAX_CELLS == MAX_ROWS * MAX_DEPS
    assert run("resnet18", arch="tpu_v1", image=32, trace=True).seconds > 0
