"""A training step that does not fit its device says so before it is simulated: the memory comes from liveness over
the step's graph, which needs no simulation."""
import json
import warnings
from pathlib import Path

import pytest

import accelsim.sim.train as train_module
from accelsim.cli import main
from compiler.errors import CapacityWarning


class Simulated(Exception):
    """Raised where the step would be simulated: what came before it came before the work."""


@pytest.fixture
def no_simulation(monkeypatch):
    def simulate(*args, **kwargs):
        raise Simulated

    monkeypatch.setattr(train_module, "simulate", simulate)


def test_a_step_that_does_not_fit_says_so_before_it_is_simulated(no_simulation):
    # GPT-2's logits at batch 8 and 1,024 tokens are 8 x 1024 x 50257 fp32 values, 1.53 GiB; the step holds them
    # and the loss's copy of them at once: more than the GTX 580's 3 GiB before any layer is counted
    logits = 8 * 1024 * 50257 * 4
    assert 2 * logits > 3 * 2**30
    with pytest.warns(CapacityWarning, match=r"needs [\d.]+ GiB .* gtx580's gddr5 holds 3.00 GiB: it does not fit"):
        with pytest.raises(Simulated):
            train_module.train("gpt2", "gtx580", batch=8, seq=1024, layers=1)


def test_a_step_that_fits_says_nothing(no_simulation):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        with pytest.raises(Simulated):
            train_module.train("gpt2", "gtx580", batch=1, seq=64, layers=1)


def test_the_command_line_warns_in_one_line_and_its_json_says_it_does_not_fit(tmp_path, capsys):
    # a GTX 580 with 256 MiB: GPT-2's token embedding alone is 50257 x 768 fp32 values (147 MiB), trained with its
    # gradient and SGD's momentum beside it (three copies, 442 MiB)
    assert 3 * 50257 * 768 * 4 > 256 * 2**20
    text = (Path(__file__).parents[3] / "archs" / "gtx580.yaml").read_text()
    assert text.count("capacity: 3 GiB") == 1
    small = tmp_path / "gtx580_256mib.yaml"
    small.write_text(text.replace("capacity: 3 GiB", "capacity: 256 MiB"))
    assert main(["train", "gpt2", "--arch", str(small), "--batch", "1", "--seq", "64", "--opt", "layers=1",
                 "--json", "-"]) == 0
    out, err = capsys.readouterr()
    warning = [line for line in err.splitlines() if line.startswith("accelsim: warning:")]
    assert len(warning) == 1 and "does not fit" in warning[0] and "simulated as if it did" in warning[0]
    result = json.loads(out)
    assert result["fits"] is False and result["step"]["seconds"] > 0
