"""compiler.memo: a memo keeps at most its size, the least recently used going first; clear_all empties every memo
of the process; a forked worker keeps its own; threads sharing one get each key's one answer."""
import multiprocessing
import threading

import pytest

from compiler.memo import Memo, clear_all, memo, memos


def test_a_memo_keeps_at_most_its_size_and_evicts_the_least_recently_used():
    kept: Memo[str, int] = Memo("test.lru", 2)
    kept["a"], kept["b"] = 1, 2
    assert kept.get("a") == 1                    # "a" is now the more recently used
    kept["c"] = 3
    assert len(kept) == 2 and "b" not in kept and kept.get("a") == 1 and kept["c"] == 3
    assert (kept.hits, kept.misses) == (2, 0)
    assert kept.get("b") is None and kept.misses == 1


def test_recall_computes_once_and_keeps_none_as_a_value():
    kept: Memo[int, int | None] = Memo("test.recall", 4)
    calls = []
    for _ in range(3):
        assert kept.recall(7, lambda: calls.append(7)) is None       # None is an answer, not a miss
    assert calls == [7] and (kept.hits, kept.misses) == (2, 1)
    assert kept.pop(7, 0) is None and 7 not in kept


def test_a_size_below_one_is_refused():
    with pytest.raises(ValueError, match="test.none.*at least 1"):
        Memo("test.none", 0)


def test_the_decorator_keys_by_arguments_and_is_bounded():
    calls = []

    @memo(size=2)
    def square(x, *, plus=0):
        calls.append((x, plus))
        return x * x + plus

    assert [square(2), square(2), square(2, plus=1), square(3)] == [4, 4, 5, 9]
    assert calls == [(2, 0), (2, 1), (3, 0)] and len(square.memo) == 2
    square(2)                                    # evicted by the third distinct call: computed again
    assert calls[-1] == (2, 0)
    assert square.memo in memos()


def test_clear_all_empties_every_memo_and_the_project_s_own():
    from compiler.map import space
    from compiler.targeting import identity

    first: Memo[int, int] = Memo("test.first", 8)
    second: Memo[int, int] = Memo("test.second", 8)
    first[1] = second[2] = 0
    groups = {"b": [], "m": ["m"], "n": ["n"], "k": ["k"]}
    space._tiled(groups, {"m": 512, "n": 512, "k": 64}, {"m": 256, "n": 128, "k": 64}, 4)
    assert len(space._TILED) > 0 and space._TILED in memos() and identity._KEYS in memos()
    clear_all()
    assert len(first) == len(second) == len(space._TILED) == 0 and first.hits == 0


def test_a_memo_no_one_holds_leaves_the_registry():
    Memo("test.dropped", 1)
    assert all(m.name != "test.dropped" for m in memos())       # CPython frees it at once (no cycle holds it)


def _fill(kept: Memo, queue) -> None:
    kept["child"] = 1
    queue.put((sorted(kept._entries), kept.get("parent")))


def test_a_forked_worker_starts_with_its_parents_entries_and_keeps_its_own():
    kept: Memo[str, int] = Memo("test.fork", 4)
    kept["parent"] = 0
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=_fill, args=(kept, queue))
    worker.start()
    seen = queue.get(timeout=30)
    worker.join(timeout=30)
    assert seen == (["child", "parent"], 0) and "child" not in kept


def test_threads_sharing_a_memo_keep_it_within_its_size():
    kept: Memo[int, int] = Memo("test.threads", 16)

    def work(start: int) -> None:
        for i in range(2000):
            key = (start + i) % 40
            assert kept.recall(key, lambda key=key: key * 2) == key * 2

    threads = [threading.Thread(target=work, args=(n * 7,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept) <= 16 and all(kept[k] == k * 2 for k in list(kept._entries))



def test_a_memo_unpickled_in_another_process_is_in_its_registry():
    import pickle

    kept: Memo[str, int] = Memo("test.pickled", 2)
    kept["a"] = 1
    copy = pickle.loads(pickle.dumps(kept))
    assert copy is not kept and copy["a"] == 1 and copy in memos()
    clear_all()
    assert len(copy) == 0
