"""A group of a parallel plan inside a torus slice, as accelsim.parallel.groups hands it over (a Slice with each
dimension's step and closure): members `step` links apart pay `step` hops and share each link with the `step - 1`
groups interleaved between them; an open segment of a ring is a line, not a ring."""
import pytest

from accelsim.arch.system import Slice
from accelsim.comm import collective

MiB = 1 << 20
LINK = 45e9            # tpu_v4_pod: one ICI link, per direction


def _along_z(members: int, step: int, closed: bool) -> Slice:
    return Slice(members, (members,), ((1, 1, members),), ((1, 1, step),), ((False, False, closed),))


def test_members_four_links_apart_move_a_quarter_as_fast():
    """A ring of 16 round z, both ways: each direction carries 2 (n-1)/n x S / 2 of an allreduce; with the 4 groups
    interleaved on every link, at a quarter of the link each."""
    size = 128 * MiB
    near = collective("allreduce", "tpu_v4_pod", size=size, slice=_along_z(16, 1, True))
    far = collective("allreduce", "tpu_v4_pod", size=size, slice=_along_z(16, 4, True))
    assert near.seconds == pytest.approx(15 / 16 * size / LINK, rel=0.01)
    assert far.seconds == pytest.approx(4 * 15 / 16 * size / LINK, rel=0.01)


@pytest.mark.parametrize("op, algorithm", [("broadcast", None), ("alltoall", None), ("allgather", "halving_doubling"),
                                           ("reducescatter", "torus")])
def test_every_algorithm_pays_for_the_step(op, algorithm):
    near = collective(op, "tpu_v4_pod", size=64 * MiB, slice=_along_z(16, 1, True), algorithm=algorithm)
    far = collective(op, "tpu_v4_pod", size=64 * MiB, slice=_along_z(16, 4, True), algorithm=algorithm)
    assert far.seconds == pytest.approx(4 * near.seconds, rel=0.02)


def test_a_pipeline_hop_four_links_away_shares_them_four_ways():
    hop = collective("sendrecv", "tpu_v4_pod", size=128 * MiB, slice=_along_z(2, 4, True))
    assert hop.seconds == pytest.approx(4 * 128 * MiB / LINK, rel=0.01)


def test_an_open_segment_is_a_line_not_a_ring():
    """Four devices of a longer ring without its closing link: one zig-zag ring, 2 hops a step, all of the data one
    way (3/4 x S per pass), where a closed ring of four sends half each way."""
    size = 128 * MiB
    line = collective("allreduce", "tpu_v4_pod", size=size, slice=_along_z(4, 1, False))
    ring = collective("allreduce", "tpu_v4_pod", size=size, slice=_along_z(4, 1, True))
    assert line.seconds == pytest.approx(2 * 3 / 4 * size / LINK, rel=0.01)
    assert ring.seconds == pytest.approx(3 / 4 * size / LINK, rel=0.01)
