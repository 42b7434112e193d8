"""`accelsim map` says why a fold that fills the PEs can leave them idle: too short a stream against each fold's
load, or waits on memory, with the figures of each."""
from accelsim.cli import main


def test_a_full_fold_streaming_one_row_says_the_stream_limits_it(capsys):
    # systolic_32x32, batch-1 FC (512 -> 1000) in WS: every fold fills the 32 x 32 PEs, streams one input row,
    # and double-buffered holds the array for the next 32-row weight load: 1/32 = 3% streaming
    assert main(["map", "resnet18", "--opt", "image=32", "--arch", "systolic_32x32", "--layer", "fc"]) == 0
    out = capsys.readouterr().out
    assert "for m in range(1):  # streamed: 1 input row (m) per fold" in out
    assert "#   512,000 MACs take 500 cycles at peak" in out                  # 1,024 MACs a cycle
    assert "#   fill: a step's 1 fold fills 100% of the PEs" in out
    assert "1 vector a fold against a load of 32 cycles; double-buffered, a fold holds the array max(1, 32) = 32 " \
           "cycles: 3% streaming" in out
    assert "#   limited most by the stream against the load (3% kept)" in out


def test_a_conv_with_a_long_stream_is_limited_elsewhere(capsys):
    assert main(["map", "resnet18", "--arch", "systolic_32x32", "--layer", "layer4.0/conv1"]) == 0
    out = capsys.readouterr().out
    assert "for p in range(7):  # streamed: 49 input rows (p x q) per fold" in out
    assert "#   fill: a step's 2 folds fill 98% of the PEs" in out
    assert "max(49, 32) = 49 cycles: 100% streaming" in out
    assert "limited most by memory waits" in out


def test_output_stationary_streams_the_reduction_against_the_drain(capsys):
    # npu4's OS array keeps the sums in the PEs: a conv1 fold streams c x r x s = 3 x 7 x 7 = 147 operand pairs, and
    # what it must cover is the drain of the 32 rows of finished sums, not a weight load
    assert main(["map", "resnet18", "--opt", "image=32", "--arch", "npu4", "--layer", "conv1"]) == 0
    out = capsys.readouterr().out
    assert "for c in range(3):  # streamed: 147 operand pairs (c x r x s) per fold" in out
    assert "147 vectors a fold against a drain of 32 cycles" in out
