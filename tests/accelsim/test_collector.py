"""accelsim.collector.paused: the collector off inside, as it was after, and one collection past collect_after new
objects; the `accelsim` command runs under it."""
import gc
from dataclasses import replace

import accelsim.cli as cli
from accelsim import commands
from accelsim.collector import paused


def test_the_collector_is_off_inside_and_as_it_was_after():
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()       # paused before: still paused
    finally:
        gc.enable()


def test_a_block_that_made_many_objects_collects_once():
    gc.collect()
    with paused(collect_after=1000):
        kept = [[i] for i in range(5000)]
        assert gc.get_count()[0] >= 5000
    assert len(kept) == 5000 and gc.get_count()[0] < 1000


def test_a_command_runs_with_the_collector_paused(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(commands, "COMMANDS", tuple(replace(c, handler=lambda args: seen.append(gc.isenabled()))
                                                    if c.name == "archs" else c for c in commands.COMMANDS))
    assert cli.main(["archs"]) == 0
    assert seen == [False] and gc.isenabled()


def test_a_sweeps_points_run_with_the_collector_on_inside_a_paused_command(tmp_path, monkeypatch):
    """A sweep is a loop over many models: each point's cycles are freed as it goes, not held to the command's end."""
    import yaml

    import accelsim.sweep.executors as executors
    from accelsim.sweep import load_spec, run_sweep

    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"base": "systolic_8x8", "objectives": ["latency"],
                                    "models": [{"name": "resnet18", "options": {"image": 32, "width": 0.25}}],
                                    "axes": {"memory.dram.bandwidth": ["4 GB/s", "8 GB/s"]}}))
    seen = []
    monkeypatch.setattr(executors, "evaluate", lambda task: seen.append(gc.isenabled()) or executors.crashed_row(
        task, "not run"))
    with paused():
        run_sweep(load_spec(spec), tmp_path / "sweep.sqlite", jobs=1, progress=False)
        assert not gc.isenabled()
    assert seen == [True, True]
