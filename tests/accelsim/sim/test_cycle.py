"""The cycle-level model of rtl/systolic_core.v (accelsim.sim.cycle, accelsim/engine/cycle/systolic.py) against
docs/rtl.md: values against numpy, cycles against the closed form, the handshake rules re-derived from the accept
cycles alone, the driver's offer rule, and the VCD it writes."""
from types import SimpleNamespace

import numpy as np
import pytest

from accelsim.price import compute
from accelsim.arch import load_arch
from accelsim.price.systolic import native_cycles
from accelsim.sim.cycle import run, write_vcd
from accelsim.sim.stimulus import Stimulus, assemble, chain, expected_outputs, gemm, with_gaps
from compiler.dtypes import DType

SHAPES = [(1, 1), (2, 2), (3, 5), (5, 3), (8, 8), (16, 16)]


def closed_form_cycles(m: int, n: int, k: int, rows: int, cols: int) -> int:
    """The tile-level engine's closed form (docs/rtl.md) for this core: WS, two weight buffers, 3 io registers."""
    return int(native_cycles(m, n, k, rows, cols, "ws", 2, 1, 3))


def test_the_teaching_preset_prices_tiles_as_the_cycle_model_runs_them():
    """The tile-level engine (compute.matrix_cycles on archs/systolic_8x8.yaml) equals the cycle-level model."""
    arch = load_arch("systolic_8x8")
    shapes = [(1, 8, 8), (3, 5, 17), (8, 8, 8), (9, 16, 24), (40, 20, 13), (512, 8, 64)]
    for m, n, k in shapes:
        stim, _ = gemm(np.ones((m, k), np.int8), np.ones((k, n), np.int8), 8, 8, acc_depth=512)
        priced = compute.matrix_cycles(np.array([m]), np.array([n]), np.array([k]), arch.matrix, arch,
                                       SimpleNamespace(dataflow="ws"), DType.int8)
        assert run(stim).cycles == int(priced[0]), (m, n, k)


def lat(stim):
    return stim.rows + stim.cols + 1


def operands(rng, m, k, n, ternary):
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-1, 2, (k, n)) if ternary else rng.integers(-128, 128, (k, n))
    return a, b


def tile_bounds(stim):
    """Per tile: index of its last weight row and of its last activation row (the x_last row)."""
    last_w = np.arange(stim.tiles) * stim.rows + stim.rows - 1
    last_x = np.flatnonzero(stim.x_last)
    return last_w, last_x


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.parametrize("ternary", [False, True])
def test_values_equal_numpy_for_ragged_gemms(rows, cols, ternary):
    rng = np.random.default_rng(rows * 100 + cols + ternary)
    for m, k, n in [(1, 1, 1), (rows + 1, 2 * rows + 1, cols + 2), (max(1, rows - 1), rows, 2 * cols - 1)]:
        a, b = operands(rng, m, k, n, ternary)
        stim, plan = gemm(a, b, rows, cols, acc_depth=16, ternary=ternary)
        out = run(stim, acc_depth=16)
        np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 16))
        np.testing.assert_array_equal(assemble(plan, out.y_data), (a @ b).astype(np.int32))
        assert (out.y_cycle - out.x_accept == lat(stim)).all()
        np.testing.assert_array_equal(out.y_last, stim.x_last)


def test_extreme_operands_reach_16384_per_pe_row():
    stim, _ = gemm(np.full((5, 3), -128), np.full((3, 4), -128), 3, 4, acc_depth=8)
    assert (run(stim, 8).y_data == 3 * 16384).all()          # -128 * -128 summed over ROWS = 3 PEs
    stim, _ = gemm(np.full((5, 7), 127), np.full((7, 4), -128), 3, 4, acc_depth=8)   # 3 folds, 1 ragged
    out = run(stim, 8)
    np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 8))
    assert (out.y_data[-5:] == 7 * 127 * -128).all()


def test_long_accumulation_wraps_past_2_to_the_31():
    k = 8 * 16400                                            # 16400 folds of 8 rows: 131200 * 16384 > 2^31
    stim, plan = gemm(np.full((3, k), -128), np.full((k, 5), -128), 8, 8, acc_depth=4)
    out = run(stim, 4)
    np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 4))
    wrapped = (k * 16384 + 2**31) % 2**32 - 2**31
    assert wrapped < 0 and (assemble(plan, out.y_data) == wrapped).all()
    assert out.cycles == closed_form_cycles(3, 5, k, 8, 8)


@pytest.mark.parametrize("rows, cols", [(2, 2), (3, 5), (5, 3), (8, 8), (16, 16)])
def test_back_to_back_cycles_equal_the_closed_form(rows, cols):
    rng = np.random.default_rng(rows * cols)
    for m, k, n in [(1, 1, 1), (1, 3 * rows, 2 * cols), (rows - 1, rows + 1, cols), (rows, 2 * rows, cols + 1),
                    (rows + 1, 3 * rows, 2 * cols), (4 * rows + 3, rows, 3 * cols)]:
        a, b = operands(rng, max(m, 1), k, n, False)
        stim, _ = gemm(a, b, rows, cols, acc_depth=512)
        out = run(stim)
        assert out.cycles == closed_form_cycles(len(a), n, k, rows, cols)
        assert out.y_cycle[-1] == out.cycles - 1
        _, last_x = tile_bounds(stim)
        first_x = np.concatenate([[0], last_x[:-1] + 1])
        np.testing.assert_array_equal(out.x_accept[first_x], rows + np.arange(stim.tiles) * max(len(a), rows))
        np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 512))


def check_handshake(stim, out, waves):
    """docs/rtl.md's rules, re-derived from the accept cycles alone and compared with the ports in every cycle."""
    last_w, last_x = tile_bounds(stim)
    full_from = out.w_accept[last_w] + 1               # tile j's bank (j % 2) is FULL from here ...
    free_from = out.x_accept[last_x] + 1               # ... until here
    for c in range(waves.cycles):
        loaded = int(np.sum(full_from <= c))           # tiles whose weights are all in; load_ptr = loaded % 2
        streamed = int(np.sum(free_from <= c))         # tiles whose activations are all in; stream_ptr likewise
        w_ready = loaded < 2 or free_from[loaded - 2] <= c
        x_ready = streamed < loaded
        assert (waves.w_ready[c], waves.x_ready[c]) == (w_ready, x_ready), f"cycle {c}"
    for queue, accept, delay in (("w", out.w_accept, stim.w_delay), ("x", out.x_accept, stim.x_delay)):
        valid, ready, row = (getattr(waves, f"{queue}_{s}") for s in ("valid", "ready", "row"))
        took = np.flatnonzero(valid & ready)
        np.testing.assert_array_equal(took, accept)    # accepted exactly when valid and ready
        np.testing.assert_array_equal(row[took], np.arange(len(accept)))
        offer = np.concatenate([[0], accept[:-1] + 1]) + delay
        if queue == "w":
            wait = stim.w_wait
            offer = np.where(wait > 0, np.maximum(offer - delay, out.y_cycle[np.maximum(wait, 1) - 1] + 1) + delay,
                             offer)
        for i, (first, acc) in enumerate(zip(offer, accept)):
            assert (row[first:acc + 1] == i).all(), f"{queue} row {i} offered from {first}, held until accepted"
            assert first == 0 or row[first - 1] != i
    np.testing.assert_array_equal(np.flatnonzero(waves.y_valid), out.y_cycle)
    np.testing.assert_array_equal(waves.y_row[out.y_cycle], np.arange(len(out.y_cycle)))
    np.testing.assert_array_equal(waves.y_last[out.y_cycle], out.y_last)
    assert not (waves.y_last & ~waves.y_valid).any(), "y_last is high only with y_valid"
    assert not ((waves.x_last | waves.x_acc) & ~waves.x_valid).any(), "x_last, x_acc are 0 while no row is offered"


def test_x_ready_rises_the_cycle_after_the_last_weight_row():
    rng = np.random.default_rng(1)
    stim, _ = gemm(*operands(rng, 3, 4, 2, False), 2, 2, acc_depth=8)
    stim.w_delay[:] = [0, 5, 0, 3]                   # weights late: activations (offered from cycle 0) wait
    out, waves = run(stim, 8, waves=True)
    last_w, last_x = tile_bounds(stim)
    assert out.x_accept[0] == out.w_accept[1] + 1 == 7
    assert waves.x_ready[:7].sum() == 0 and waves.x_valid[:7].all()
    check_handshake(stim, out, waves)


def test_a_bank_is_reused_the_cycle_after_its_x_last_row():
    rng = np.random.default_rng(2)
    stim, _ = gemm(*operands(rng, 10, 6, 2, False), 2, 2, acc_depth=16)   # 3 tiles of 10 rows, ROWS = 2
    out, waves = run(stim, 16, waves=True)
    last_w, last_x = tile_bounds(stim)
    assert out.w_accept[4] == out.x_accept[last_x[0]] + 1        # tile 2's first weight row into bank 0
    assert waves.w_ready[out.w_accept[3] + 1:out.w_accept[4]].sum() == 0
    check_handshake(stim, out, waves)


@pytest.mark.parametrize("rows, cols, longest", [(2, 2, 6), (3, 5, 6), (5, 3, 20), (8, 8, 40)])
def test_random_gaps_keep_values_and_latency(rows, cols, longest):
    rng = np.random.default_rng(rows + 7 * cols)
    for ternary in (False, True):
        a, b = operands(rng, 2 * rows + 1, 2 * rows + 1, cols + 1, ternary)
        stim, plan = gemm(a, b, rows, cols, acc_depth=8, ternary=ternary)     # m > 8: chunks of 8 rows
        stim = with_gaps(stim, rng, p=0.4, longest=longest)
        out, waves = run(stim, 8, waves=True)
        np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 8))
        np.testing.assert_array_equal(assemble(plan, out.y_data), (a @ b).astype(np.int32))
        assert (out.y_cycle - out.x_accept == lat(stim)).all()
        check_handshake(stim, out, waves)


def test_chained_parts_each_take_their_closed_form_cycles():
    rng = np.random.default_rng(3)
    shapes = [(5, 9, 7), (1, 4, 3), (12, 3, 10), (4, 4, 4)]
    parts = [gemm(*operands(rng, m, k, n, False), 4, 3, acc_depth=32)[0] for m, k, n in shapes]
    stim = chain(parts, drain=True)
    out, waves = run(stim, 32, waves=True)
    np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 32))
    check_handshake(stim, out, waves)
    start, first_w, first_x = 0, 0, 0
    for (m, k, n), part in zip(shapes, parts):
        assert out.w_accept[first_w] == start                          # an idle core: its first row goes in at once
        end = out.y_cycle[first_x + len(part.x_rows) - 1]
        assert end + 1 - start == closed_form_cycles(m, n, k, 4, 3)
        start, first_w, first_x = end + 1, first_w + len(part.w_rows), first_x + len(part.x_rows)


@pytest.mark.parametrize("rows, cols", [(4, 3), (8, 8)])
def test_tile_gemms_back_to_back_stream_as_the_cycle_model_runs_them(rows, cols):
    """The tile engine issues each tile GEMM as its own compute row. Undrained, the core takes the next row's
    weights while the last one streams and drains (docs/rtl.md): N independent rows end where the cycle-level
    model's last output of the same tiles appears, about N x steady + one skew and drain, not N x their own
    cycles (the tile engine charged every row its skew and drain: TPU v1's alexnet fc6, 576 x 767 cycles)."""
    from accelsim.price.systolic import steady_and_tail
    from accelsim.engine.tile import schedule

    rng = np.random.default_rng(rows * cols)
    shapes = [(5, 9, 7), (1, 4, 3), (12, 3, 10), (4, 4, 4), (1, 2 * rows, 2 * cols), (2 * rows, rows, cols),
              (1, 1, 1)]
    parts = [gemm(*operands(rng, m, k, n, False), rows, cols, acc_depth=32)[0] for m, k, n in shapes]
    out = run(chain(parts, drain=False), 32)
    m, k, n = (np.array(x, np.int64) for x in zip(*shapes))
    steady, tail = steady_and_tail(m, n, k, rows, cols, "ws", 2, 1, 3)
    count = len(shapes)
    start, end = schedule(np.zeros(count, np.int64), steady, tail, np.full((count, 1), -1, np.int64),
                          np.zeros(count, np.int64), 1)
    assert end.max() == out.y_cycle[-1] + 1
    alone = sum(closed_form_cycles(mm, nn, kk, rows, cols) for mm, kk, nn in shapes)
    assert end.max() == steady.sum() + tail[-1] < alone - (count - 1) * (rows + cols - 2)
    first_x = np.cumsum([0] + [len(p.x_rows) for p in parts])[:-1]
    np.testing.assert_array_equal(out.x_accept[first_x], start + rows)   # each row's first vector on time


def test_the_engine_streams_a_batch_1_fc_layer_as_one_gemm():
    """TPU v1 with weights arriving faster than the array shifts them in, a batch-1 FC layer of 8 x 8 weight
    tiles, one compute row each: the layer computes in about what the closed form gives the whole GEMM run back
    to back (256 + 63 x 256 + 1 + 510 = 16,895), not 64 x 767 = 49,088 (each row's skew and drain paid again).
    What remains on top: each of the 8 output tiles' stores waits for its last drain, and the unified buffer's
    channel serves the next activations behind it (about 517 cycles per output tile)."""
    import accelsim
    from accelsim.arch import load_arch_text, presets_dir
    from compiler.builder import Builder

    source = presets_dir() / "tpu_v1.yaml"
    fast = load_arch_text(source.read_text().replace("bandwidth: 34 GB/s", "bandwidth: 34000 GB/s"), "fast", source)
    b = Builder("fc")
    y = b.node("MatMul", [b.input("x", (1, 2048)), b.weight("w", (2048, 2048))])
    (op,) = accelsim.run(b.build([y]), arch=fast).ops
    whole = int(native_cycles(1, 2048, 2048, 256, 256, "ws", 2))
    assert op.tiles == 64 and whole == 16_895
    assert whole <= op.compute_cycles < 1.25 * whole


def timing_only_stimuli():
    rng = np.random.default_rng(7)
    for rows, cols, (m, k, n), ternary in [(3, 5, (7, 11, 12), False), (5, 3, (13, 6, 4), True),
                                            (8, 8, (9, 17, 10), False), (1, 1, (2, 3, 1), False)]:
        yield gemm(*operands(rng, m, k, n, ternary), rows, cols, acc_depth=8, ternary=ternary)[0]
        yield with_gaps(gemm(*operands(rng, m, k, n, ternary), rows, cols, acc_depth=8, ternary=ternary)[0],
                        rng, p=0.4, longest=2 * (rows + cols))
    parts = [gemm(*operands(rng, m, k, n, False), 4, 3, acc_depth=8)[0] for m, k, n in [(5, 9, 7), (1, 4, 3),
                                                                                            (12, 3, 10)]]
    yield chain(parts, drain=True)


def test_timing_only_mode_keeps_every_cycle_and_zeros_the_values():
    for stim in timing_only_stimuli():
        full, full_waves = run(stim, 8, waves=True)
        fast, fast_waves = run(stim, 8, waves=True, values=False)
        for name in ("w_accept", "x_accept", "y_cycle", "y_last"):
            np.testing.assert_array_equal(getattr(fast, name), getattr(full, name), err_msg=name)
        assert fast.cycles == full.cycles
        assert fast.y_data.shape == full.y_data.shape and not fast.y_data.any()
        for f in full_waves.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(fast_waves, f), getattr(full_waves, f), err_msg=f)
        np.testing.assert_array_equal(run(stim, 8, values=False).y_cycle, full.y_cycle)


def test_rows_past_acc_depth_wrap_the_accumulator_address():
    rng = np.random.default_rng(4)
    stim, _ = gemm(*operands(rng, 11, 6, 3, False), 3, 3, acc_depth=64)   # tiles of 11 rows, accumulated
    out = run(stim, acc_depth=4)
    np.testing.assert_array_equal(out.y_data, expected_outputs(stim, 4))
    assert not np.array_equal(out.y_data, expected_outputs(stim, 64))


def test_malformed_or_hopeless_stimuli_raise():
    rng = np.random.default_rng(5)
    stim, _ = gemm(*operands(rng, 3, 4, 2, False), 2, 2, acc_depth=8)
    waits_for_itself = chain([stim])
    waits_for_itself.w_wait[0] = 1          # tile 0's weights wait for an output that needs them
    with pytest.raises(ValueError, match="cannot finish.*weight row 0 waits for 1 output"):
        run(waits_for_itself, 8)
    too_few = Stimulus(2, 2, False, stim.w_rows[:2], stim.w_delay[:2], stim.w_wait[:2], stim.x_rows,
                       stim.x_last, stim.x_acc, stim.x_delay)
    with pytest.raises(ValueError, match="1 weight tiles .* but 2 activation tiles"):
        run(too_few, 8)
    no_last = chain([stim])
    no_last.x_last[-1] = 0
    with pytest.raises(ValueError, match="does not have x_last"):
        run(no_last, 8)
    negative = chain([stim])
    negative.x_delay[2] = -1
    with pytest.raises(ValueError, match="x_delay must be >= 0; row 2"):
        run(negative, 8)


def parse_vcd(text):
    """(timescale, scope, {name: width}, {name: [(time, value)]}) from a VCD: a reader for this test only."""
    header, body = text.split("$enddefinitions $end")
    tokens = header.split()
    timescale = tokens[tokens.index("$timescale") + 1]
    scope = tokens[tokens.index("$scope") + 2]
    widths, names = {}, {}
    for i, tok in enumerate(tokens):
        if tok == "$var":
            assert tokens[i + 1] == "wire"
            width, code, name = int(tokens[i + 2]), tokens[i + 3], tokens[i + 4]
            widths[name], names[code] = width, name
    changes = {name: [] for name in widths}
    time = None
    for line in body.split("\n"):
        line = line.strip()
        if not line or line in ("$dumpvars", "$end"):
            continue
        if line[0] == "#":
            assert time is None or int(line[1:]) > time
            time = int(line[1:])
        elif line[0] == "b":
            bits, code = line[1:].split()
            assert len(bits) <= widths[names[code]]
            changes[names[code]].append((time, int(bits, 2)))
        else:
            changes[names[line[1:]]].append((time, int(line[0])))
    return timescale, scope, widths, changes


def value_at(changes, time):
    value = None
    for t, v in changes:
        if t > time:
            break
        value = v
    return value


@pytest.mark.parametrize("inputs_at_fall", [True, False])
def test_vcd_has_the_ports_and_the_outcome(tmp_path, inputs_at_fall):
    rng = np.random.default_rng(6)
    stim, _ = gemm(*operands(rng, 4, 5, 5, False), 3, 2, acc_depth=8)
    stim = with_gaps(stim, rng)
    out, waves = run(stim, 8, waves=True)
    path = tmp_path / "core.vcd"
    write_vcd(path, stim, out, waves, reset_cycles=2, inputs_at_fall=inputs_at_fall)
    timescale, scope, widths, changes = parse_vcd(path.read_text())
    assert (timescale, scope) == ("1ns", "systolic_core")
    assert widths == {"clk": 1, "rst": 1, "w_valid": 1, "w_ready": 1, "w_data": 2 * 8, "x_valid": 1,
                      "x_ready": 1, "x_data": 3 * 8, "x_last": 1, "x_acc": 1, "y_valid": 1, "y_data": 2 * 32,
                      "y_last": 1}
    for name, events in changes.items():                      # a value is written only when it changes
        values = [v for _, v in events]
        assert all(a != b for a, b in zip(values, values[1:])), name
    assert [t for t, v in changes["clk"] if v == 1] == list(range(0, 10 * (out.cycles + 3), 10))
    for name in ("rst", "w_valid", "w_data", "x_valid", "x_data", "x_last", "x_acc"):     # driven by the bench
        assert {t % 10 for t, _ in changes[name][1:]} == {5 if inputs_at_fall else 0}, name
    for name in ("w_ready", "x_ready", "y_valid", "y_data", "y_last"):                     # registered outputs
        assert {t % 10 for t, _ in changes[name][1:]} == {0}, name
    rises = [t // 10 - 2 for t, v in changes["y_valid"] if v == 1]
    starts = [c for c in out.y_cycle if c == 0 or c - 1 not in set(out.y_cycle)]
    assert rises == starts
    mid = lambda c: 10 * (c + 2) + 7                           # noqa: E731  (sampled while clk is low)
    assert value_at(changes["rst"], mid(-1)) == 1 and value_at(changes["rst"], mid(0)) == 0
    w_words, x_words = stim.w_words(), stim.x_words()
    for i, c in enumerate(out.y_cycle):
        word = value_at(changes["y_data"], mid(c))
        assert [(word >> (32 * j)) & 0xFFFFFFFF for j in range(2)] == [int(v) & 0xFFFFFFFF for v in out.y_data[i]]
        assert value_at(changes["y_last"], mid(c)) == out.y_last[i]
    for i, c in enumerate(out.w_accept):
        assert value_at(changes["w_valid"], mid(c)) == value_at(changes["w_ready"], mid(c)) == 1
        assert value_at(changes["w_data"], mid(c)) == w_words[i]
    for i, c in enumerate(out.x_accept):
        assert value_at(changes["x_data"], mid(c)) == x_words[i]
        assert value_at(changes["x_last"], mid(c)) == stim.x_last[i]
