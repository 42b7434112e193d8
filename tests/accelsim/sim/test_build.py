"""The pipeline, once: `build` and `simulate` are what every caller runs, and a Result carries what its
views draw, so a report never runs the pipeline again."""
import pytest

import accelsim
from accelsim.cli import main
from accelsim.price.compat import ScaleSim
from accelsim.sim import build as pipeline

SMALL = {"image": 32}


def test_one_build_serves_both_fidelities():
    compiled = accelsim.build("resnet18", "tpu_v1", **SMALL)
    assert set(compiled.mappings) == {op.name for op in compiled.ir.ops}     # every op, vector ops' plans too
    tile, roof = accelsim.simulate(compiled), accelsim.simulate(compiled, "roofline")
    assert tile.to_dict() == accelsim.run("resnet18", arch="tpu_v1", **SMALL).to_dict()
    kernels: dict[str, list] = {}             # per kernel: its ops may run beside each other (an output stage)
    for t, r in zip(tile.ops, roof.ops):
        kernels.setdefault(t.kernel or t.name, []).append((t.cycles, r.cycles))
    assert all(sum(t for t, _ in ops) >= max(r for _, r in ops) for ops in kernels.values())
    assert tile.mappings == compiled.mappings and roof.mappings == {}
    nest = tile.loop_nests()["layer1.0/conv1"]
    assert nest == compiled.mappings["layer1.0/conv1"].text() and "for " in nest


def test_an_unmapped_build_is_mapped_when_the_engine_needs_it():
    compiled = accelsim.build("resnet18", "tpu_v1", mapped=False, **SMALL)
    assert compiled.mappings == {}
    assert accelsim.simulate(compiled).seconds == accelsim.run("resnet18", arch="tpu_v1", **SMALL).seconds


def test_run_with_a_report_runs_the_pipeline_once(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path / "cache"))    # no run read back from an earlier test
    calls = []
    place = pipeline.place
    monkeypatch.setattr(pipeline, "place", lambda *a, **k: calls.append(1) or place(*a, **k))
    page = tmp_path / "run.html"
    assert main(["run", "resnet18", "--opt", "image=32", "--arch", "tpu_v1", "--html", str(page)]) == 0
    assert len(calls) == 1 and "layer1.0/conv1" in page.read_text()


def test_compat_is_one_object_chosen_at_the_api():
    cfg = "tests/golden/scalesim_16x8_os.cfg"
    by_name = accelsim.run("tests/golden/scalesim_gemm.csv", arch=cfg, compat="scalesim")
    by_object = accelsim.run("tests/golden/scalesim_gemm.csv", arch=cfg, compat=ScaleSim())
    assert by_name.to_dict() == by_object.to_dict() and "scalesim" in " ".join(by_name.notes)
    with pytest.raises(accelsim.arch.ArchError, match="needs a systolic array"):
        accelsim.run("tests/golden/scalesim_gemm.csv", arch="h100", compat="scalesim")


def test_compat_utilisation_follows_the_cycles_it_reports():
    """SCALE-Sim's compute utilisation: MACs over rows x cols x the cycles reported (16 x 8 PEs, one at a clock)."""
    cfg = "tests/golden/scalesim_16x8_os.cfg"
    result = accelsim.run("tests/golden/scalesim_gemm.csv", arch=cfg, compat="scalesim")
    einsums = [op for op in result.ops if op.kind == "einsum"]
    assert einsums
    for op in einsums:
        assert op.utilisation == pytest.approx(op.macs / (16 * 8 * op.cycles), rel=1e-6), op.name
