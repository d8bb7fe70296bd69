"""Random streams named by role and round.

Every random draw of a run comes from ``generator(seed, role, round)``: a pure
function, so a resumed run, a rerun, or another algorithm in the same figure gets
exactly the same clients and mini-batches for the same (seed, round).
"""
from __future__ import annotations

import zlib

import numpy as np
import torch

# tuning: the arena's trials; partition: data.partitions
ROLES = ("init", "sampling", "batches", "stragglers", "dropout", "embedding", "tuning", "partition")


def seed_for(seed: int, role: str, round_: int = 0, *within: int) -> int:
    """A 63-bit integer seed derived from (seed, role, round) with numpy's SeedSequence.

    ``within`` names a finer stream inside a round (e.g. the local step of a dropout draw),
    so that any execution order of a round's clients can draw the same numbers.
    """
    if role not in ROLES:
        raise ValueError(f"unknown random role {role!r}; expected one of {ROLES}")
    entropy = [int(seed), zlib.crc32(role.encode()), int(round_), *map(int, within)]
    return int(np.random.SeedSequence(entropy).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def generator(seed: int, role: str, round_: int = 0, *within: int, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed_for(seed, role, round_, *within))
    return g
