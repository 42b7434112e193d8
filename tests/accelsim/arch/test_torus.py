"""Torus slices: a slice is a box that fits the machine's torus (turned as need be), a device count forms one only
when some AxBxC of it fits, refusals name the value and what is allowed, the run's system is its slice, and a
group of ranks (x filled first) spans whole dimensions or an even share of one."""
import itertools
import math

import pytest

from accelsim.arch.system_load import load_system, load_system_text, systems_dir
from accelsim.arch.torus import Span, balanced_shape, fits, nearest_counts, shapes, span
from compiler.errors import UserError

POD = (16, 16, 16)


def _brute(n: int, machine: tuple[int, ...]) -> set[tuple[int, ...]]:
    """Every sorted AxBxC = n with A, B, C within the machine's sorted dimensions, by trying them all."""
    limits = sorted(machine)
    return {s for s in itertools.combinations_with_replacement(range(1, max(limits) + 1), len(limits))
            if math.prod(s) == n and all(a <= m for a, m in zip(s, limits))}


@pytest.mark.parametrize("n", [1, 12, 48, 64, 96, 720, 3840, 4093, 4095, 4096])
def test_shapes_are_every_box_of_the_count_that_fits_the_pod(n):
    assert set(shapes(n, POD)) == _brute(n, POD)


def test_a_non_cubic_machine_takes_its_slices_turned():
    assert set(shapes(32, (2, 4, 8))) == _brute(32, (2, 4, 8)) == {(1, 4, 8), (2, 2, 8), (2, 4, 4)}
    assert fits((8, 2, 4), (2, 4, 8)) and not fits((1, 1, 16), (2, 4, 8)) and not fits((4, 4), (2, 4, 8))


def test_the_balanced_shape_is_the_most_cubic_within_the_machine():
    assert balanced_shape(64, 3, 4, POD) == (4, 4, 4)
    assert balanced_shape(4096, 3, 4, POD) == (16, 16, 16)
    assert balanced_shape(48, 3, 4, POD) == (3, 4, 4)
    assert balanced_shape(4093, 3, 4, POD) is None                 # a prime over 16 has no box in the pod
    assert balanced_shape(17, 3) == (1, 1, 17)                     # without a machine, any box


def test_a_refused_count_is_told_its_neighbours():
    # 4,095 = 3^2 x 5 x 7 x 13: no three factors of at most 16 (16 x 16 x 16 = 4,096 is the only box above 3,840)
    assert nearest_counts(4093, POD) == (3840, 4096)
    assert nearest_counts(17, POD) == (16, 18)
    assert nearest_counts(5, (10**6,) * 3) == (None, None)        # too large a machine to list


@pytest.mark.parametrize("shape, devices, message", [
    ((1, 1, 64), None, "--slice 1x1x64 does not fit level 'ici', a 16x16x16 torus: a slice's dimensions, in some "
                       "order, are each at most the torus's (64 is too long)"),
    ((1, 1, 4096), None, "(4096 is too long)"),
    ((2, 32, 1), None, "(32 is too long)"),
    (None, 4093, "4093 devices do not form a slice of level 'ici', a 16x16x16 torus (no AxBxC of 4093 fits it); the "
                 "nearest counts that do: 3840 (15x16x16), 4096 (16x16x16)"),
    (None, 17, "17 devices do not form a slice of level 'ici'"),
])
def test_impossible_slices_are_refused_by_name(shape, devices, message):
    with pytest.raises(UserError) as refused:
        load_system("tpu_v4_pod").fit(devices, shape)
    assert str(refused.value).startswith("tpu_v4_pod: ") and message in str(refused.value)


def test_slices_that_fit_the_pod_are_taken_as_given():
    tpu = load_system("tpu_v4_pod")
    assert tpu.fit(shape=(2, 2, 16)).shape == ((2, 2, 16),) and tpu.fit(shape=(16, 1, 4)).devices == 64
    assert tpu.fit(4096).shape == (POD,) and tpu.fit(13).shape == ((1, 1, 13),)


def test_a_run_sees_its_slice_as_the_system():
    tpu = load_system("tpu_v4_pod")
    cut = tpu.fit(shape=(4, 4, 8))
    mine = tpu.sliced(cut)
    assert mine.levels[0].shape == (4, 4, 8) and mine.levels[0].devices == 128
    assert mine.fit() == cut and mine.devices.maximum == 128
    dgx = load_system("dgx_a100")
    assert dgx.sliced(dgx.fit(16)).levels == dgx.levels


def test_a_torus_of_a_million_per_side_loads_and_slices_without_counting_to_its_size():
    """Attack H1: `_factorisations` looped to n = 10^18 while loading. The whole machine is its own shape, and a
    count's shapes come from its divisors up to the longest dimension."""
    text = (systems_dir() / "tpu_v4_pod.yaml").read_text()
    text = text.replace("shape: 16x16x16", "shape: 1000000x1000000x1000000")
    text = text.replace("devices: {default: 64, min: 2, max: 4096}", "devices: {default: 64, min: 2}")
    huge = load_system_text(text, "huge.yaml", systems_dir() / "huge.yaml")
    assert huge.fit(10**18).shape == ((10**6,) * 3,) and huge.fit().shape == ((4, 4, 4),)
    # 2 x 10^12 = 2^13 x 5^12, cube root 12,599: its first divisor above is 12,800 = 2^9 x 5^2, leaving 12,500^2
    assert huge.fit(2 * 10**12).shape == ((12500, 12500, 12800),)
    with pytest.raises(UserError, match="999999999989 devices do not form a slice"):   # a prime above 10^6
        huge.fit(999_999_999_989)


# A group of `size` ranks `stride` apart; ranks fill x, then y, then z.
@pytest.mark.parametrize("shape, size, stride, members, step, closed", [
    ((4, 4, 4), 4, 1, (4, 1, 1), (1, 1, 1), (True, False, False)),      # tp=4: a ring along x
    ((4, 4, 4), 16, 4, (1, 4, 4), (1, 1, 1), (False, True, True)),      # dp=16: the 4x4 torus along y and z
    ((4, 4, 4), 2, 1, (2, 1, 1), (1, 1, 1), (False, False, False)),     # tp=2: half of x, a line of two
    ((4, 4, 4), 32, 2, (2, 4, 4), (2, 1, 1), (True, True, True)),       # dp=32 after tp=2: x's 0 and 2, 2 links apart
    ((1, 1, 64), 4, 1, (1, 1, 4), (1, 1, 1), (False, False, False)),    # tp=4 on a 64-ring: a segment, open
    ((1, 1, 64), 16, 4, (1, 1, 16), (1, 1, 4), (False, False, True)),   # dp=16: every 4th device round the ring
    ((2, 2, 16), 16, 4, (1, 1, 16), (1, 1, 1), (False, False, True)),   # 2x2 for tp, z for dp
    ((4, 4, 8), 2, 64, (1, 1, 2), (1, 1, 4), (False, False, True)),     # pp=2 neighbours: 4 links apart along z
    ((2, 4, 4), 4, 1, (2, 2, 1), (1, 1, 1), (False, False, False)),     # x (2: no wrap) and half of y
])
def test_a_group_spans_the_dimensions_its_ranks_fill(shape, size, stride, members, step, closed):
    assert span(shape, size, stride, lambda n: n > 2 and n % 4 == 0) == Span(members, step, closed)


def test_a_group_that_does_not_take_an_even_share_of_a_dimension_has_no_span():
    wraps = lambda n: n % 4 == 0   # noqa: E731
    assert span((3, 4, 4), 24, 2, wraps) is None          # x holds ranks 0, 1, 2: every second rank is x = 0, 2, 1, ...
    assert span((4, 3, 4), 24, 2, wraps) == Span((2, 3, 4), (2, 1, 1), (True, False, True))
