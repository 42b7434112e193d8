"""The link engine's kernels on tiny hand-made transfer lists: contention, latency in flight, dependencies, the
oldest piece first, flows sharing a link, cut-through paths, pipelined stages, and the two bounds it must never
beat. Expected times are worked out by hand in each test."""
import numpy as np
import pytest

from accelsim.engine.links import bounds, time_transfers

I = np.int64
GB = 1e9
US = 1e-6


def run(transfers, bandwidth=(GB,), latency=(US,), grain=1e12):
    """transfers: dicts with path, nbytes, and optionally share, hops, stages, deps, piece, release."""
    n, width = len(transfers), max(len(t["path"]) for t in transfers)
    deps = max((len(t.get("deps", ())) for t in transfers), default=1) or 1
    path = np.full((n, width), -1, I)
    share, hops = np.zeros((n, width)), np.zeros((n, width), I)
    dep = np.full((n, deps), -1, I)
    for i, t in enumerate(transfers):
        k = len(t["path"])
        path[i, :k] = t["path"]
        share[i, :k] = t.get("share", 1.0)
        hops[i, :k] = t.get("hops", 1)
        dep[i, :len(t.get("deps", ()))] = t.get("deps", ())
    stages = np.array([t.get("stages", 1) for t in transfers], I)
    nbytes = np.array([t["nbytes"] for t in transfers], float)
    release = np.array([t.get("release", 0.0) for t in transfers])
    piece = np.array([t.get("piece", i) for i, t in enumerate(transfers)], I)
    args = np.array(bandwidth, float), np.array(latency, float), path, share, hops
    start, end = time_transfers(*args, stages, nbytes, dep, release, piece, float(grain))
    chain, load = bounds(*args, nbytes, dep)
    return start, end, chain, load


def test_a_channel_carries_one_transfer_at_a_time_and_latency_is_in_flight():
    # 1000 B at 1 GB/s = 1 us on the wire, 1 us of flight: the second may leave at 1 us, lands at 3 us
    start, end, _, _ = run([{"path": [0], "nbytes": 1000}, {"path": [0], "nbytes": 1000}])
    assert start == pytest.approx([0, 1 * US]) and end == pytest.approx([2 * US, 3 * US])


def test_separate_channels_run_at_once():
    start, end, _, _ = run([{"path": [0], "nbytes": 1000}, {"path": [1], "nbytes": 1000}],
                           bandwidth=(GB, GB), latency=(US, US))
    assert start == pytest.approx([0, 0]) and end == pytest.approx([2 * US, 2 * US])


def test_a_transfer_waits_for_its_dependency_to_land():
    start, end, chain, _ = run([{"path": [0], "nbytes": 1000}, {"path": [1], "nbytes": 1000, "deps": [0]}],
                               bandwidth=(GB, GB), latency=(US, 5 * US))
    assert start[1] == pytest.approx(2 * US) and end[1] == pytest.approx(8 * US)   # 2 + 1 on the wire + 5 flight
    assert chain == pytest.approx(6 * US)                                         # latencies only: 1 + 5


def test_flows_sharing_a_link_take_their_share_of_it():
    # the transfer stands for 4 devices' flows through one link: 4 x 1000 B at 1 GB/s
    start, end, _, load = run([{"path": [0], "nbytes": 1000, "share": 4.0}, {"path": [0], "nbytes": 1000}])
    assert end[0] == pytest.approx(5 * US) and start[1] == pytest.approx(4 * US) and load[0] == pytest.approx(5 * US)


def test_the_oldest_piece_is_served_first_when_a_channel_comes_free():
    # rows 1 (piece 5) and 2 (piece 0) both wait while row 0 holds the channel; piece 0 goes first
    start, _, _, _ = run([{"path": [0], "nbytes": 1000, "piece": 9},
                          {"path": [0], "nbytes": 1000, "piece": 5, "release": 0.5 * US},
                          {"path": [0], "nbytes": 1000, "piece": 0, "release": 0.7 * US}])
    assert start == pytest.approx([0, 2 * US, 1 * US])


def test_a_free_channel_never_waits_for_an_older_piece_not_yet_ready():
    start, _, _, _ = run([{"path": [0], "nbytes": 1000, "piece": 0, "release": 5 * US},
                          {"path": [0], "nbytes": 1000, "piece": 7}])
    assert start == pytest.approx([5 * US, 0])


def test_a_path_holds_every_channel_and_pays_every_hop():
    # 1000 B over channel 0 (1 GB/s, 2 hops of 1 us) then channel 1 (0.5 GB/s, 1 hop of 3 us): the slower sets
    # the rate (2 us), flight 2 + 3 us; channel 0 is busy only its own 1 us
    start, end, chain, load = run([{"path": [0, 1], "nbytes": 1000, "hops": [2, 1]},
                                   {"path": [0], "nbytes": 1000}],
                                  bandwidth=(GB, 0.5 * GB), latency=(US, 3 * US))
    assert end[0] == pytest.approx(7 * US) and start[1] == pytest.approx(1 * US)
    assert chain == pytest.approx(5 * US) and load == pytest.approx([2 * US, 2 * US])


def test_a_chain_of_stages_pays_the_fill_once():
    # 8000 B through 4 store-and-forward stages in 1000 B pieces: 8 us + 3 x 1 us fill + 4 hops of 1 us
    _, end, _, _ = run([{"path": [0], "nbytes": 8000, "stages": 4, "hops": 4}], grain=1000)
    assert end[0] == pytest.approx(15 * US)


def test_a_transfer_caught_in_a_cycle_never_runs():
    start, _, _, _ = run([{"path": [0], "nbytes": 10}, {"path": [0], "nbytes": 10, "deps": [2]},
                          {"path": [0], "nbytes": 10, "deps": [1]}])
    assert start[0] == 0 and start[1] == start[2] == -1


def test_the_makespan_never_beats_either_bound():
    """Random transfer lists on three channels: the simulated end is at least the busiest channel's time and
    the longest latency chain, and no channel ever carries two transfers at once."""
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(5, 40))
        transfers = []
        for i in range(n):
            k = int(rng.integers(1, 3))
            deps = sorted(set(rng.integers(0, i, int(rng.integers(0, 3))).tolist())) if i else []
            transfers.append({"path": list(rng.choice(3, k, replace=False)), "nbytes": float(rng.integers(1, 5000)),
                              "share": float(rng.choice([1.0, 2.0, 3.0])), "deps": deps,
                              "piece": int(rng.integers(0, 4))})
        start, end, chain, load = run(transfers, bandwidth=(GB, 2 * GB, 0.5 * GB), latency=(US, 2 * US, 0.5 * US))
        assert (start >= 0).all()
        assert end.max() >= max(chain, load.max()) * (1 - 1e-12)
        for c in range(3):
            spans = sorted((start[i], start[i] + t["share"] * t["nbytes"] / (GB, 2 * GB, 0.5 * GB)[c])
                           for i, t in enumerate(transfers) if c in t["path"])
            assert all(a[1] <= b[0] + 1e-15 for a, b in zip(spans, spans[1:]))
        for i, t in enumerate(transfers):
            assert all(start[i] >= end[d] - 1e-15 for d in t["deps"])
