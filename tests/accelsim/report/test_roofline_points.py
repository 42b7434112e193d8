"""The roofline figure draws a kernel, not its ops one by one: an epilogue fused into a conv is part of its point."""
import pytest

from accelsim.report.breakdown import roofline_points
from accelsim.sim.api import run


@pytest.fixture(scope="module")
def tile():
    return run("resnet18", arch="tpu_v1", image=32)


def test_a_fused_epilogue_is_part_of_its_kernels_point(tile):
    ops = {op.name: op for op in tile.ops}
    conv, bn, relu = ops["conv1"], ops["bn1"], ops["bn1_relu"]
    assert bn.kernel == relu.kernel == "conv1"
    points = roofline_points(tile, "ddr3")
    # by hand from the three rows: their work summed over their ddr3 bytes summed, and over their time summed
    work = 2 * conv.macs + bn.ops + relu.ops
    moved = sum(op.bytes_by_level.get("ddr3", 0) for op in (conv, bn, relu))
    assert (work / moved, work / (conv.seconds + bn.seconds + relu.seconds)) in points
    # no point of the BatchNorm alone: its parameters (256 B) against its own work
    alone = bn.ops / bn.bytes_by_level["ddr3"]
    assert all(x != pytest.approx(alone) for x, _ in points)
    assert len(points) == len({op.kernel or op.name for op in tile.ops if op.bytes_by_level.get("ddr3")
                               and op.seconds and (op.macs or op.ops)})
