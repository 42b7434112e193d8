"""A parallel plan on a torus slice: its groups take the dimensions their ranks fill (x first, tp innermost), each
group's collectives are priced on those dimensions, so the slice's shape changes the step as `accelsim collective`
says it should, and plans or slices that cannot be placed are refused by name."""
import json

import pytest

from accelsim.arch.system_load import load_system, systems_dir
from accelsim.cli import main
from accelsim.comm import collective
from accelsim.parallel.groups import cost, groups, groups_on, level_name, on_torus
from compiler.errors import UserError

MiB = 1 << 20
GPT = ["--opt", "layers=2", "--opt", "hidden=64", "--opt", "heads=4", "--opt", "vocab=512", "--seq", "16"]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """tpu_v4_pod's links as a 64x64x64 torus, so that 1x1x64 is a slice of it too."""
    text = (systems_dir() / "tpu_v4_pod.yaml").read_text().replace("shape: 16x16x16", "shape: 64x64x64")
    text = text.replace("max: 4096}", "max: 262144}")
    path = tmp_path_factory.mktemp("systems") / "wide_torus.yaml"
    path.write_text(text)
    return path


def _on(system, shape):
    whole = load_system(system)
    return whole.sliced(whole.fit(shape=shape))


def test_tp_is_a_ring_along_x_and_dp_the_torus_of_y_and_z_on_4x4x4():
    tpu = _on("tpu_v4_pod", (4, 4, 4))
    by_kind = groups_on(tpu, 4, 16, 1)
    tp, dp = on_torus(tpu, by_kind["tp"]), on_torus(tpu, by_kind["dp"])
    assert (tp.shape, tp.step, tp.closed) == (((4, 1, 1),), ((1, 1, 1),), ((True, False, False),))
    assert (dp.shape, dp.step, dp.closed) == (((1, 4, 4),), ((1, 1, 1),), ((False, True, True),))
    assert level_name(tpu, by_kind["tp"]) == "ici x" and level_name(tpu, by_kind["dp"]) == "ici y,z"
    # each is priced as that sub-torus alone: a 4-ring along x, a 4x4 torus
    assert cost(tpu, by_kind["tp"], "allreduce", 64 * MiB).seconds == \
        collective("allreduce", "tpu_v4_pod", size=64 * MiB, slice="4x1x1").seconds
    assert cost(tpu, by_kind["dp"], "allreduce", 64 * MiB).seconds == \
        collective("allreduce", "tpu_v4_pod", size=64 * MiB, slice="1x4x4").seconds


def test_on_one_long_ring_tp_is_an_open_segment_and_dp_every_fourth_device(wide):
    ring = _on(wide, (1, 1, 64))
    by_kind = groups(4, 16, 1)
    tp, dp = on_torus(ring, by_kind["tp"]), on_torus(ring, by_kind["dp"])
    assert (tp.shape, tp.step, tp.closed) == (((1, 1, 4),), ((1, 1, 1),), ((False, False, False),))
    assert (dp.shape, dp.step, dp.closed) == (((1, 1, 16),), ((1, 1, 4),), ((False, False, True),))
    assert level_name(ring, by_kind["tp"]) == level_name(ring, by_kind["dp"]) == "ici z"
    # dp's ring of 16, members 4 links apart: 4 (n-1)/n x S at one link's 45 GB/s per direction, half each way
    assert cost(ring, by_kind["dp"], "allreduce", 128 * MiB).seconds == pytest.approx(4 * 15 / 16 * 128 * MiB / 45e9,
                                                                                      rel=0.01)


def test_the_slice_changes_a_groups_price_as_collective_says(wide):
    """dp over the whole slice is the slice's own all-reduce: 4x4x4 about three times faster than 1x1x64."""
    dp = groups(1, 64, 1)["dp"]
    for shape, text in (((4, 4, 4), "4x4x4"), ((1, 1, 64), "1x1x64")):
        assert cost(_on(wide, shape), dp, "allreduce", 128 * MiB).seconds == \
            collective("allreduce", wide, size=128 * MiB, slice=text).seconds
    cube = cost(_on(wide, (4, 4, 4)), dp, "allreduce", 128 * MiB).seconds
    ring = cost(_on(wide, (1, 1, 64)), dp, "allreduce", 128 * MiB).seconds
    assert 2.5 < ring / cube < 3.5


def _communication(argv, capsys) -> dict:
    assert main(argv + GPT + ["--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    return {(c["collective"], c["level"]): c["seconds"] for c in data["communication"]["by_collective"]}


def test_train_and_run_json_show_the_slice(wide, capsys):
    """The same plan on 4x4x4 and on 1x1x64: train's gradient all-reduce (dp=64) and run's tensor-parallel
    collectives (tp=4: a ring of 4 against an open segment of the long ring) cost more on the long ring, on the
    dimensions named."""
    base = ["--system", str(wide), "--batch", "64"]
    cube = _communication(["train", "gpt2", "--slice", "4x4x4"] + base, capsys)
    ring = _communication(["train", "gpt2", "--slice", "1x1x64"] + base, capsys)
    assert set(cube) == {("allreduce", "ici x,y,z")} and set(ring) == {("allreduce", "ici z")}
    assert ring[("allreduce", "ici z")] > 2 * cube[("allreduce", "ici x,y,z")]
    run = ["run", "gpt2", "--parallel", "tp=4,dp=16"] + base
    cube = _communication(run + ["--slice", "4x4x4"], capsys)
    ring = _communication(run + ["--slice", "1x1x64"], capsys)
    assert {level for _, level in cube} == {"ici x"} and {level for _, level in ring} == {"ici z"}
    assert ring[("allreduce", "ici z")] > cube[("allreduce", "ici x")]


@pytest.mark.parametrize("argv, needle", [
    (["train", "gpt2", "--system", "tpu_v4_pod", "--slice", "1x1x64"], "--slice 1x1x64 does not fit level 'ici', a "
                                                                        "16x16x16 torus"),
    (["run", "gpt2", "--system", "tpu_v4_pod", "--devices", "4093"], "4093 devices do not form a slice of level 'ici'"),
    (["train", "gpt2", "--system", "tpu_v4_pod", "--devices", "48", "--parallel", "tp=2,dp=24", "--batch", "48"],
     "dp=24 with ranks 2 apart does not take whole dimensions, or an even share of one, of the 3x4x4 slice"),
])
def test_slices_and_plans_that_cannot_be_placed_are_one_line(argv, needle, capsys):
    assert main(argv + GPT) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_plan_that_fits_another_turn_of_the_slice_says_which():
    tpu = _on("tpu_v4_pod", (3, 4, 4))
    with pytest.raises(UserError, match="--slice 4x3x4 places every group"):
        groups_on(tpu, 2, 24, 1)
