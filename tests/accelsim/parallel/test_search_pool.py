"""The planner's tasks (accelsim.parallel.search): each runs with the cyclic garbage collector paused, in a worker or
in this process, and leaves it as it found it; one that made more than COLLECT_AFTER objects collects once."""
import gc

from accelsim.parallel import search as search_module
from accelsim.parallel.search import run_task


def test_a_task_runs_with_the_collector_paused_and_leaves_it_as_it_was():
    seen = []

    def work(question, items, until):
        seen.append(gc.isenabled())
        return [item * 2 for item in items]

    assert gc.isenabled()
    assert run_task(work, None, [1, 2], None) == [2, 4]
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        run_task(work, None, [3], None)
        assert not gc.isenabled()         # paused before: still paused
    finally:
        gc.enable()


def test_a_task_that_made_many_objects_collects_once(monkeypatch):
    monkeypatch.setattr(search_module, "COLLECT_AFTER", 1000)

    def work(question, items, until):
        return [[] for _ in range(5000)]        # kept: the count of objects made rises past the limit

    gc.collect()
    kept = run_task(work, None, [], None)
    assert len(kept) == 5000 and gc.get_count()[0] < 1000


def test_workers_are_forked_on_linux_unless_another_thread_runs(monkeypatch):
    import threading

    from accelsim.parallel.search import starting

    monkeypatch.setattr(search_module.sys, "platform", "linux")
    assert starting() == "fork"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert starting() == "spawn"          # forking a threaded process can hang
    finally:
        stop.set()
        other.join()
    monkeypatch.setattr(search_module.sys, "platform", "darwin")
    assert starting() == "spawn"
