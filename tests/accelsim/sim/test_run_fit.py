"""A run that does not fit its device says so before it is mapped and simulated: its memory comes from liveness over
the model's graph, which needs neither."""
import warnings

import pytest

import accelsim
import accelsim.sim.build as build_module
from accelsim.cli import main
from compiler.errors import CapacityWarning


class Mapped(Exception):
    """Raised where the run would be mapped: what came before it came before the work."""


@pytest.fixture
def no_mapping(monkeypatch):
    def mappings_for(*args, **kwargs):
        raise Mapped

    monkeypatch.setattr(build_module, "mappings_for", mappings_for)


def test_a_run_that_does_not_fit_says_so_before_it_is_mapped(no_mapping):
    # GPT-2's logits at batch 16 and 1,024 tokens are 16 x 1024 x 50257 fp32 values: more than the GTX 580's 3 GiB
    assert 16 * 1024 * 50257 * 4 > 3 * 2**30
    with pytest.warns(CapacityWarning, match=r"run needs [\d.]+ GiB .* gtx580's gddr5 holds 3 GiB: it does not fit"):
        with pytest.raises(Mapped):
            accelsim.run("gpt2", arch="gtx580", batch=16, seq=1024, layers=1)


def test_a_run_that_fits_says_nothing(no_mapping):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        with pytest.raises(Mapped):
            accelsim.run("gpt2", arch="gtx580", batch=1, seq=64, layers=1)


def test_the_command_line_warns_in_one_line_first(capsys):
    assert main(["run", "gpt2", "--arch", "gtx580", "--batch", "16", "--seq", "1024", "--opt", "layers=1",
                 "--fidelity", "roofline"]) == 0
    out, err = capsys.readouterr()
    warning = [line for line in err.splitlines() if line.startswith("accelsim: warning:")]
    assert len(warning) == 1 and "it does not fit" in warning[0] and "simulated as if it did" in warning[0]
    assert "DOES NOT FIT" in out
