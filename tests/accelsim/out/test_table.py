"""The terminal table fits the width it is given: names wrap, then the intensity and roof columns go, then shape,
then op; --wide keeps all."""
import pytest

import accelsim
from accelsim.cli import main


@pytest.fixture(scope="module")
def result():
    return accelsim.run("resnet18", arch="tpu_v1", image=32)


@pytest.mark.parametrize("width, columns", [(60, 6), (80, 6), (100, 7), (120, 8), (140, 10)])
def test_the_table_fits_its_width(result, width, columns):
    text = result.table(5, width)
    table = text.split("\nlatency")[0].splitlines()
    assert max(len(line) for line in table) <= width
    assert table[2].count("┃") - 1 == columns                 # the header row: drop FLOP/B and roof, shape, op
    assert "total" in text and "latency" in text


def test_wide_keeps_every_column_and_the_default_is_unchanged(result, capsys):
    assert result.table(5, None).splitlines()[2].count("┃") - 1 == 10
    assert result.table(5) == result.table(5, 120)
    assert main(["run", "resnet18", "--opt", "image=32", "--limit", "3", "--wide"]) == 0
    assert "shape" in capsys.readouterr().out


def test_the_memory_line_says_what_the_model_holds_and_whether_it_fits():
    from accelsim.results.table import memory_line

    held = {"weights": 3 * 2**30, "activations": 2**29, "inputs": 2**28, "peak": 3 * 2**30 + 2**29,
            "capacity": 4 * 2**30, "capacity_level": "hbm2"}
    assert memory_line(held) == ("memory 3.5 GiB of 4 GiB hbm2 (weights 3 GiB, activations 512 MiB; "
                                 "inputs 256 MiB)")
    assert memory_line({**held, "capacity": 3 * 2**30}).endswith("inputs 256 MiB)  DOES NOT FIT")


def test_a_huge_model_shows_the_first_rows_and_says_where_the_rest_are(result, monkeypatch):
    from accelsim.results import table

    monkeypatch.setattr(table, "ROWS", 4)
    rows = result.table(None, None).split("\nlatency")[0]
    assert f"... {len(result.ops) - 4} more ops (--limit 0 shows all" in rows
    assert result.table(0, None).count("\n") == result.table(len(result.ops), None).count("\n")
    assert "more ops" not in result.table(0, None)
