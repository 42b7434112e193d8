"""One way to print each quantity: bytes in binary prefixes, bandwidths in decimal GB/s, energy in SI prefixes by
magnitude; energy lines say it is dynamic energy, and never set its average power against the chip's TDP."""
import accelsim
from accelsim.results.units import bandwidth, binary, energy, si


def test_bytes_are_binary_bandwidths_decimal_and_energy_si():
    assert [binary(n) for n in (512, 3 * 2**10, 77_200_000, 40 * 2**30)] == ["512 B", "3 KiB", "73.6 MiB", "40 GiB"]
    assert [bandwidth(b) for b in (3.352e12, 1.924e11, 34e9, 1.2e8)] == ["3,352 GB/s", "192 GB/s", "34 GB/s",
                                                                       "120 MB/s"]
    assert [si(f, "FLOP") for f in (3.39e18, 9.11e9, 512)] == ["3.39 EFLOP", "9.11 GFLOP", "512 FLOP"]
    assert [energy(j) for j in (3.2, 1.39e-3, 4.5e-6, 7e-9, 2.5e-10, 0)] == ["3.2 J", "1.39 mJ", "4.5 uJ", "7 nJ",
                                                                             "250 pJ", "0 J"]


def test_the_run_table_says_dynamic_energy_and_prints_bytes_in_binary():
    result = accelsim.run("resnet18", arch="a100", image=32)
    text = result.table(3)
    totals = result.totals()
    assert f"dynamic energy: {energy(totals['energy_j'])} (average dynamic power " in text
    assert "static power is not modelled" in text and "TDP" not in text and "\nenergy:" not in text
    level, moved = next(iter(totals["bytes_by_level"].items()))
    assert f"bytes by level: {level} {binary(moved)}" in text and " MB" not in text and " kB" not in text


def test_a_language_model_run_gives_tokens_per_second():
    decode = accelsim.run("gpt2", arch="a100", batch=4, fidelity="roofline", mode="decode", past=16, layers=1,
                          hidden=64, heads=2, vocab=256, max_positions=64)
    assert decode.to_dict()["model"]["tokens_per_sample"] == 1           # logits [4, 1, 256]: a token per sequence
    assert f"{4 / decode.seconds:,.0f} tokens/s (4 sequences x 1 token)" in decode.table(1)
    prefill = accelsim.run("gpt2", arch="a100", batch=2, seq=32, fidelity="roofline", layers=1, hidden=64, heads=2,
                           vocab=256, max_positions=64)
    assert f"{2 * 32 / prefill.seconds:,.0f} tokens/s (2 sequences x 32 tokens)" in prefill.table(1)
    assert "tokens/s" not in accelsim.run("resnet18", arch="a100", image=32, fidelity="roofline").table(1)
    from accelsim.report.run_page import summary
    assert f"{4 / decode.seconds:,.0f}" in summary(decode) and "tokens/s" in summary(decode)
