"""Argument checks shared by the dataset builders; each failure is one actionable message."""
from __future__ import annotations

import numbers

from replicate.core.errors import ReplicateError


def check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**32:
        raise ReplicateError(f"seed must be an integer in [0, 2**32), got {seed!r}")


def check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ReplicateError(f"{name} must be a positive integer, got {value!r}")


def check_nonnegative(name: str, value, what: str = "a number") -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ReplicateError(f"{name} must be {what} >= 0, got {value!r}")
