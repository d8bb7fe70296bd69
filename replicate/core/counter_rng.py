"""A counter-based random stream in integer tensor ops: the same numbers on any device, drawn where used.

SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014; the
output mix of Vigna's splitmix64.c): word i of the stream ``key`` is ``mix(key + (i + 1)·γ)`` mod 2⁶⁴, with
γ = 0x9E3779B97F4A7C15 and mix two xor-shift-multiply rounds. Nothing is drawn in sequence, so a stream named
by (seed, role, round, step) (``replicate.core.rng.seed_for``) is computed on the device that uses it (no
host draw, no copy to a GPU), and any slice of it is the same numbers whatever else is drawn.

Torch's own generators give other numbers on a CPU (mt19937) and a GPU (its Philox layout), which is why
dropout noise was drawn on one host core and copied. Philox4x32-10 in tensor ops was tried first: several
times slower than ``torch.rand`` on one CPU thread for a FEMNIST step's values; this stream, four 16-bit
values a word, is faster than ``torch.rand`` there (measured, one thread). The products wrap modulo 2⁶⁴ in
int64 (two's complement, as CPUs and CUDA multiply); right shifts are masked to act as unsigned ones.
Checked against the published splitmix64 outputs and exact integer arithmetic (tests/test_counter_rng.py).
"""
from __future__ import annotations

import math

import torch

_GAMMA = 0x9E3779B97F4A7C15
_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def _signed(x: int) -> int:
    """A 64-bit pattern as the int64 value holding it."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >> 63 else x


def words(key: int, first: int, count: int, device="cpu") -> torch.Tensor:
    """Words ``first`` … ``first + count − 1`` of stream ``key`` (an integer < 2⁶⁴), as int64 bit patterns."""
    z = torch.arange(first + 1, first + count + 1, dtype=torch.int64, device=device)
    z.mul_(_signed(_GAMMA)).add_(_signed(key))
    shifted = torch.empty_like(z)
    for k, multiplier in ((30, _MIX[0]), (27, _MIX[1]), (31, None)):  # in place: one buffer, no temporaries
        torch.bitwise_right_shift(z, k, out=shifted).bitwise_and_((1 << (64 - k)) - 1)  # unsigned z >> k
        z.bitwise_xor_(shifted)
        if multiplier is not None:
            z.mul_(_signed(multiplier))
    return z


def uniform(key: int, shape, device="cpu") -> torch.Tensor:
    """float32 uniform on [0, 1) of ``shape`` in steps of 2⁻¹⁶: four values a word, its four 16-bit pieces in
    memory order (the int64 words viewed as int16, little-endian on CPUs and GPUs alike), each k/2¹⁶.

    Sixteen bits are a dropout mask's needs: ``u < p`` holds with probability exactly p for p a multiple of
    2⁻¹⁶ (Reddi et al.'s rates 0.25 and 0.5), within 1.5e-5 for any other; and four values a word need half
    the integer work of two 24-bit ones, which puts the stream below ``torch.rand``'s cost on one CPU thread."""
    shape = tuple(shape)
    n = math.prod(shape)
    pieces = words(key, 0, -(-n // 4), device).view(torch.int16)[:n]
    return pieces.to(torch.float32).add_(32768.0).mul_(1.0 / 65536).reshape(shape)
