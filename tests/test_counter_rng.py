"""replicate.core.counter_rng: SplitMix64 as a counter-based stream in integer tensor ops (issue #38 item 3)."""
import pytest
import torch

from replicate.core import counter_rng

U64 = (1 << 64) - 1


def _reference(key: int, i: int) -> int:
    """splitmix64.c's i-th output for seed ``key``, in Python's exact integers."""
    z = (key + (i + 1) * 0x9E3779B97F4A7C15) & U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
    return z ^ (z >> 31)


def test_the_published_splitmix64_outputs():
    """splitmix64.c seeded with 1234567 (the vectors its users test against)."""
    expected = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
                16408922859458223821]
    assert [w & U64 for w in counter_rng.words(1234567, 0, 5).tolist()] == expected


@pytest.mark.parametrize("key", [0, 1, 2**63 - 1, 2**63, U64, 0x0123456789ABCDEF])
def test_wrapping_int64_arithmetic_equals_exact_arithmetic(key):
    first = 2**40 - 3  # far into the stream: the counter's product wraps too
    got = [w & U64 for w in counter_rng.words(key, first, 64).tolist()]
    assert got == [_reference(key, first + i) for i in range(64)]


def test_any_slice_is_the_same_numbers_and_keys_differ():
    whole = counter_rng.words(77, 0, 1000)
    assert torch.equal(counter_rng.words(77, 313, 50), whole[313:363])
    assert not torch.equal(counter_rng.words(78, 0, 1000), whole)


def test_uniform_is_exact_float32_on_zero_one_and_looks_uniform():
    u = counter_rng.uniform(2024, (1000, 250))
    assert u.dtype == torch.float32 and u.shape == (1000, 250)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert torch.equal(u * (1 << 16), torch.round(u * (1 << 16)))  # multiples of 2^-16: exact float32
    assert abs(float(u.mean()) - 0.5) < 3e-3 and abs(float(u.var()) - 1 / 12) < 1e-3
    counts = torch.histc(u, bins=10, min=0, max=1)
    assert float(counts.min()) > 0.98 * 25_000 and float(counts.max()) < 1.02 * 25_000
    assert torch.equal(counter_rng.uniform(2024, (7, 3)).reshape(-1), u.reshape(-1)[:21])
    first = counter_rng.words(2024, 0, 1).item() & U64  # its four 16-bit pieces, low first (memory order)
    assert u.reshape(-1)[:4].tolist() == [((first >> s) & 0xFFFF ^ 0x8000) / 2**16 for s in (0, 16, 32, 48)]
    assert float((u < 0.25).float().mean()) == pytest.approx(0.25, abs=3e-3)  # a dropout rate, exactly in 2^-16



def test_the_bench_times_both_draws_of_a_femnist_step(capsys):
    """``bench --sections noise``: the counter stream beside the host draw it replaced (timings recorded, not
    asserted)."""
    from replicate.cli import main

    assert main.main(["bench", "--sections", "noise", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "10 × 20 × 9344 values" in out and "counter stream on the device" in out and "CPU generator" in out
