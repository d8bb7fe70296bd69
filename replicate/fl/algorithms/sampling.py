"""Client sampling and stragglers, as pure functions of (seed, round).

Every draw comes from a stream named (seed, role, round): ``sampling`` for which clients
train, ``stragglers`` for which of them fall behind and how far (FedProx final paper §5.2,
spec §2.2 [PROPOSED: a dedicated stream; the authors' code reuses numpy's global state]).
Algorithms that share a sampling law therefore see the same clients in the same round.
"""
from __future__ import annotations

import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError


def check_fraction(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ReplicateError(f"{name} must be in [0, 1], got {value}")


def uniform(n: int, k: int, seed: int, round_: int) -> torch.Tensor:
    """k of n clients uniformly without replacement, sorted."""
    if k > n:
        raise ReplicateError(f"K = {k} clients per round exceeds the {n} clients of this dataset")
    g = rng.generator(seed, "sampling", round_)
    return torch.randperm(n, generator=g, device=g.device)[:k].sort().values


def proportional(p: torch.Tensor, k: int, seed: int, round_: int) -> tuple[torch.Tensor, torch.Tensor]:
    """k draws with replacement with P(k) = p_k; the distinct clients (sorted) and multiplicities."""
    g = rng.generator(seed, "sampling", round_)
    draws = torch.multinomial(p, k, replacement=True, generator=g)
    return torch.unique(draws, sorted=True, return_counts=True)


def stragglers(m: int, fraction: float, epochs: int, seed: int, round_: int) -> torch.Tensor:
    """Units of work per selected client: round(m(1 − d)) active ones do all ``epochs`` (E),
    each straggler a uniform draw from {1, …, E − 1} (the authors' ``randint(1, E)``; with
    E = 1 a straggler still does its one epoch). Returns (m,) int64."""
    g = rng.generator(seed, "stragglers", round_)
    active = int(round(m * (1.0 - fraction)))
    order = torch.randperm(m, generator=g, device=g.device)
    work = torch.full((m,), epochs, dtype=torch.int64, device=g.device)
    lagging = order[active:]
    if lagging.numel():
        work[lagging] = torch.randint(1, max(epochs, 2), (lagging.numel(),), generator=g, device=g.device)
    return work
