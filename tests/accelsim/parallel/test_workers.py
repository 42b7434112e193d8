"""The planner's workers (accelsim.parallel.workers): a task goes to the worker that did the work it shares with an
earlier task (a stage built for a lower bound is simulated where it was built), each task runs once and its result or
exception comes back to it."""
import os

import pytest

from accelsim.parallel.search import starting
from accelsim.parallel.workers import Workers


@pytest.fixture
def workers():
    pool = Workers(2, starting(), os.getpid, os.getpid, ())       # a task answers the pid of the worker it ran in
    yield pool
    pool.close()


def test_a_task_runs_in_the_worker_that_built_what_it_shares(workers):
    first = [workers.submit(near=(("tp", 1, 4), ("tp", 1))), workers.submit(near=(("tp", 2, 4), ("tp", 2)))]
    built = {key: task.result() for key, task in zip((1, 2), first)}
    assert len(set(built.values())) == 2 != os.getpid()          # two workers, neither this process
    for _ in range(3):          # both free each time: the second task would go to the first worker if not sent home
        later = [workers.submit(near=(("tp", 2, 4), ("tp", 2))), workers.submit(near=(("tp", 1, 4), ("tp", 1)))]
        assert [t.result() for t in later] == [built[2], built[1]]
    again = workers.submit(near=(("tp", 2, 8), ("tp", 2)))         # a new micro-batch: where its tp's stages are
    assert again.result() == built[2]


def test_a_busy_home_does_not_hold_a_task_back_and_every_task_answers_once(workers):
    tasks = [workers.submit(near=(("tp", 1),)) for _ in range(6)]
    done = list(workers.as_completed(tasks))
    assert sorted(map(id, done)) == sorted(map(id, tasks))
    assert all(t.result() != os.getpid() for t in tasks)


def test_an_exception_in_a_task_is_raised_where_its_result_is_asked():
    pool = Workers(2, starting(), int, os.getpid, ())
    try:
        bad, good = pool.submit("seven"), pool.submit("7")
        assert good.result() == 7
        with pytest.raises(ValueError, match="seven"):
            bad.result()
    finally:
        pool.close()
