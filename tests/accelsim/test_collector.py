"""accelsim.collector.paused: the collector off inside, as it was after, and one collection past collect_after new
objects; the `accelsim` command runs under it."""
import gc

import accelsim.cli as cli
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
    monkeypatch.setattr(cli, "_archs", lambda args: seen.append(gc.isenabled()))
    assert cli.main(["archs"]) == 0
    assert seen == [False] and gc.isenabled()
