"""AlexNet on its 2012 machine: `--parallel groups=2` on two GTX 580s splits every layer's kernels over the cards
as Krizhevsky et al. did (sec. 3.2, fig. 2), and the cards talk over PCIe only into conv3 and the fully connected
layers; the step is faster than on one GTX 580, but not twice as fast."""
import contextlib
import io
import json

import pytest

from accelsim.arch.system_load import load_system
from accelsim.cli import main
from accelsim.parallel.plan import Plan, parse_plan
from accelsim.sim.train import train
from compiler.errors import UserError

BATCH = 128                         # the paper's batch
FP32 = 4                            # a GTX 580 trains in fp32
# what each forward all-gather moves, whole (nccl-tests' size), from the paper's layer sizes: pool2's 256 maps of
# 13 x 13 into conv3, pool5's 6 x 6 x 256 into fc6, fc6's and fc7's 4096 into the next
GATHERS = [("pool2", "conv3", 256 * 13 * 13), ("flatten", "fc6", 6 * 6 * 256), ("drop6", "fc7", 4096),
           ("drop7", "fc8", 4096)]
# the loss reads each card's 500 logits and all-reduces one number per image three times: the maximum logit, the
# sum of exponentials, the label's logit (vocab-parallel cross-entropy, compiler/train/step.py)
LOSS = [("loss/ReduceMax", "loss/Sub"), ("loss/ReduceSum", "loss/Log"), ("loss/ReduceSum_1", "loss/Sub_1")]


@pytest.fixture(scope="module")
def two() -> dict:
    """`accelsim train alexnet --system gtx580x2 --parallel groups=2 --batch 128 --json -`, read back."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["train", "alexnet", "--system", "gtx580x2", "--parallel", "groups=2", "--batch", str(BATCH)]
        assert main(argv + ["--json", "-"]) == 0
    return json.loads(out.getvalue())


def test_two_gtx580s_are_faster_than_one_but_not_twice(two):
    one = train("alexnet", arch="gtx580", batch=BATCH).seconds
    assert two["plan"]["tp"] == 2 and two["plan"]["groups"] is True
    assert two["device_count"] == 2 and [d["count"] for d in two["devices"]] == [2]   # one role, both cards
    assert 1.0 < one / two["step"]["seconds"] < 2.0, (one, two["step"]["seconds"])


def test_the_pcie_transfers_fall_into_conv3_and_the_fully_connected_layers(two):
    collectives = two["devices"][0]["collectives"]
    forward = [c for c in collectives if c["phase"] == "forward"]
    assert [(c["collective"], c["after"], c["before"]) for c in forward] == \
        [("allgather", after, before) for after, before, _ in GATHERS] + [("allreduce", *pair) for pair in LOSS]
    assert [c["bytes"] for c in forward] == [BATCH * n * FP32 for _, _, n in GATHERS] + [BATCH * FP32] * len(LOSS)
    # the backward pass reduce-scatters each gradient back to the card that owns the maps (the loss's gradient is
    # each card's own logits': nothing to send); nothing crosses inside conv1-pool2 or conv3-pool5
    backward = [c for c in collectives if c["phase"] == "backward"]
    assert sorted(c["node"] for c in backward) == sorted(f"{a}/AllGather/grad/ReduceScatter" for a, _, _ in GATHERS)
    grouped = {"conv1", "conv1_relu", "norm1", "pool1", "conv2", "conv2_relu", "norm2", "conv4", "conv4_relu", "conv5",
               "conv5_relu"}
    assert not any(c["after"].split("/")[0] in grouped or c["before"].split("/")[0] in grouped for c in collectives)


def test_each_transfer_takes_what_pcie_gives(two):
    """An all-gather of two cards sends each card's half over PCIe 2.0 x16: 8 GB/s at 0.75 efficiency (the system's
    YAML), plus microseconds of latency."""
    link = load_system("gtx580x2").levels[0]
    rate = link.bandwidth_bytes_per_s * link.efficiency
    for c in two["devices"][0]["collectives"]:
        wire = c["bytes"] / 2 / rate
        assert wire <= c["seconds"] <= wire + 20e-6, c
    total = sum(c["seconds"] for c in two["devices"][0]["collectives"])
    assert total == pytest.approx(sum(e["seconds"] for e in two["communication"]["by_collective"]))


def test_groups_is_tensor_parallelism_along_the_models_groups():
    plan = parse_plan("groups=2", devices=2)
    assert plan == Plan(tp=2, groups=True) and plan.text() == "dp=1,groups=2,pp=1"
    assert parse_plan(plan.text(), devices=2) == plan
    assert parse_plan("groups=2,tp=2") == plan


@pytest.mark.parametrize("text, devices, needle", [
    ("groups=3", 2, "groups=3 puts every layer's channel groups on 3 devices, so dp x groups x pp = 1 x 3 x 1 = 3, "
                    "but the run has 2 devices"),
    ("groups=2,tp=4", 2, "groups=2 is tensor parallelism of degree 2; it cannot go with tp=4"),
    ("groups=1", 1, "groups=1 must be at least 2"),
])
def test_a_bad_groups_plan_is_named(text, devices, needle):
    with pytest.raises(UserError, match=needle):
        parse_plan(text, devices)


def test_three_groups_cannot_split_alexnets_two(capsys):
    argv = ["train", "alexnet", "--system", "dgx_a100", "--devices", "3", "--parallel", "groups=3", "--batch", "3"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "node 'conv2' (Conv) has 2 groups, which 3 devices cannot share out evenly" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
