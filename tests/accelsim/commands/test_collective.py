"""`accelsim collective`: nccl-tests' rows (sizes doubling up to --bytes; time, algbw, busbw with nccl-tests'
factors per op), the JSON, torus slices, and one clear line with exit 2 for every kind of bad input."""
import json

import pytest

from accelsim.arch.system_load import load_system_text, system_names, systems_dir
from accelsim.cli import main

FACTOR_8 = {"allreduce": 2 * 7 / 8, "reducescatter": 7 / 8, "allgather": 7 / 8, "alltoall": 7 / 8, "broadcast": 1.0,
            "sendrecv": 1.0}


def run_json(capsys, *argv) -> dict:
    assert main(["collective", *argv, "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_rows_double_from_the_smallest_to_the_size_asked(capsys):
    data = run_json(capsys, "allreduce", "--system", "dgx_a100", "--bytes", "1MiB", "--min-bytes", "1KiB")
    assert {"op", "devices", "algorithm", "rows"} <= set(data) and data["op"] == "allreduce"
    assert data["devices"] == 8 and data["algorithm"] == "auto"
    assert [row["bytes"] for row in data["rows"]] == [1024 << i for i in range(11)]
    for row in data["rows"]:
        assert row["algbw"] == pytest.approx(row["bytes"] / row["seconds"])
    seconds = [row["seconds"] for row in data["rows"]]
    assert seconds == sorted(seconds)


@pytest.mark.parametrize("op", sorted(FACTOR_8))
def test_bus_bandwidth_uses_nccl_tests_factor_for_each_op(op, capsys):
    data = run_json(capsys, op, "--system", "dgx_h100", "--bytes", "64MiB", "--min-bytes", "64MiB")
    (row,) = data["rows"]
    assert row["busbw"] == pytest.approx(row["algbw"] * FACTOR_8[op])


def test_the_table_names_the_slice_and_the_algorithm(capsys):
    assert main(["collective", "allreduce", "--system", "tpu_v4_pod", "--slice", "4x4x8", "--bytes", "4MiB",
                 "--min-bytes", "1MiB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# allreduce on tpu_v4_pod: 128 x tpu_v4, 4x4x8 on ici; algorithm auto"
    assert out[1].split()[:2] == ["bytes", "time"] and len(out) == 2 + 3
    assert all(line.split()[-1] == "torus" for line in out[2:])


def test_a_forced_algorithm_is_used_for_every_row(capsys):
    data = run_json(capsys, "allreduce", "--system", "dgx_a100", "--devices", "16", "--algorithm", "ring",
                    "--bytes", "64KiB", "--min-bytes", "16KiB")
    assert data["algorithm"] == "ring" and {row["algorithm"] for row in data["rows"]} == {"ring"}


def test_archs_lists_the_systems_after_the_devices(capsys):
    assert main(["archs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    systems = [line for line in lines if line.split()[1] == "system"]
    assert [line.split()[0] for line in systems] == system_names()
    assert "nvlink switch 300 GB/s > infiniband fat_tree 25 GB/s" in next(s for s in systems if "dgx_a100" in s)


ZERO_LINK = (systems_dir() / "dgx_a100.yaml").read_text().replace("bandwidth: 25 GB/s\n    latency: 0.6 us",
                                                                   "bandwidth: 0 GB/s\n    latency: 0.6 us")


@pytest.mark.parametrize("argv, message", [
    (["allreduse", "--system", "dgx_a100"], "unknown collective 'allreduse'; did you mean 'allreduce'?"),
    (["allreduce", "--system", "dgx_a1000"], "unknown system 'dgx_a1000'; did you mean 'dgx_a100'?"),
    (["allreduce", "--system", "dgx_a100", "--devices", "12"], "12 devices do not fill whole groups of 8"),
    (["allreduce", "--system", "gtx580x2", "--devices", "4"], "gtx580x2: 4 devices; this system takes 2 to 2"),
    (["allreduce", "--system", "tpu_v4_pod", "--slice", "4x4x4", "--devices", "32"],
     "--slice 4x4x4 is 64 devices, not --devices 32"),
    (["allreduce", "--system", "tpu_v4_pod", "--slice", "4x4xfour"], "--slice '4x4xfour': write the torus shape"),
    (["allreduce", "--system", "dgx_a100", "--bytes", "0B"], "--bytes 0: must be greater than zero"),
    (["allreduce", "--system", "dgx_a100", "--bytes=-1GiB"], "is negative"),
    (["allreduce", "--system", "dgx_a100", "--bytes", "1024"], "--bytes '1024' has no unit: write 1024 B"),
    (["allreduce", "--system", "dgx_a100", "--bytes", "1Gb"], "did you mean 'GB'?"),
    (["allreduce", "--system", "dgx_a100", "--bytes", "1e300TiB"], "'1e300TiB' is too large to be a size"),
    (["allreduce", "--system", "dgx_a100", "--algorithm", "nvls"], "no level of the slice reduces in the network"),
    (["allreduce", "--system", "dgx_a100", "--algorithm", "tre"], "did you mean 'tree'?"),
    (["allreduce", "--system", "{zero}"], r"levels[0].bandwidth: '0 GB/s' must be greater than zero"),
])
def test_bad_input_is_one_clear_line_and_exit_2(argv, message, tmp_path, capsys):
    zero = tmp_path / "zero_link.yaml"
    zero.write_text(ZERO_LINK)
    assert main(["collective", *[a.format(zero=zero) for a in argv]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("accelsim: error: ") and err.count("\n") == 1 and message in err, err


def test_the_commands_and_python_of_the_collectives_page_run(capsys):
    """docs/collectives.md: every `.venv/bin/accelsim` line runs, its Python block too, and its example system
    file loads."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "collectives.md").read_text()
    commands = [line.split() for line in text.splitlines() if line.startswith(".venv/bin/accelsim ")]
    assert len(commands) >= 3
    for argv in commands:
        assert main(argv[1:]) == 0, argv
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    scope: dict = {}
    exec(compile(block, "collectives.md", "exec"), scope)
    assert scope["r"].algorithm == "nvls" and scope["a"].seconds > 0 and scope["b"].seconds > 0
    (example,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    assert load_system_text(example, "collectives.md", Path("collectives.yaml")).fit().participants == (4, 2)
