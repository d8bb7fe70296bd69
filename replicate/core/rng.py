"""Random streams named by role and round.

Every random draw of a run comes from ``generator(seed, role, round)``: a pure
function, so a resumed run, a rerun, or another algorithm in the same figure gets
exactly the same clients and mini-batches for the same (seed, round).
"""
from __future__ import annotations

import zlib

import numpy as np
import torch

ROLES = ("init", "sampling", "batches", "stragglers")


def seed_for(seed: int, role: str, round_: int = 0) -> int:
    """A 63-bit integer seed derived from (seed, role, round) with numpy's SeedSequence."""
    if role not in ROLES:
        raise ValueError(f"unknown random role {role!r}; expected one of {ROLES}")
    entropy = [int(seed), zlib.crc32(role.encode()), int(round_)]
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def generator(seed: int, role: str, round_: int = 0, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed_for(seed, role, round_))
    return g
