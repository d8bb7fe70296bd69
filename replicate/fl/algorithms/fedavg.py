"""FedAvg with the sampling and averaging schemes of Li et al. (ICLR 2020, §3.3 and App. D.2).

Li, Huang, Yang, Wang, Zhang, "On the Convergence of FedAvg on Non-IID Data".
Symbols: N clients with weights p_k = n_k/n, K = ``clients_per_round``, E local
SGD steps (the engine's ``ClientUpdate.steps``). Schemes, as implemented in the
authors' code (spec §2.1):

- ``scheme1``: K draws with replacement, P(k) = p_k; each distinct client trains
  once; w ← Σ (multiplicity_k / K) · w_k.
- ``scheme2``: K clients uniformly without replacement; w ← (N/K) Σ p_k w_k.
- ``original`` (McMahan et al.): uniform without replacement;
  w ← Σ p_k w_k + (1 − Σ p_k) w_t.
- ``transformed2``: uniform without replacement; client k trains with lr · N p_k;
  w ← (1/K) Σ w_k.
- ``full``: every client, w ← Σ p_k w_k (full participation).

Sampling is a pure function of (seed, round): schemes that share a sampling
distribution (original, scheme2, transformed2) see the same clients.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms.base import RoundPlan

SCHEMES = ("full", "scheme1", "scheme2", "original", "transformed2")


def _uniform_without_replacement(n: int, k: int, g: torch.Generator) -> torch.Tensor:
    return torch.randperm(n, generator=g)[:k].sort().values


@dataclass(frozen=True)
class FedAvg:
    scheme: str = "scheme1"
    clients_per_round: int = 10  # K

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ReplicateError(f"unknown sampling scheme {self.scheme!r}; choose one of {', '.join(SCHEMES)}")
        if self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round (K) must be >= 1, got {self.clients_per_round}")

    def plan(self, weights: torch.Tensor, seed: int, round_: int) -> RoundPlan:
        p = weights.to(torch.float64)
        n, k = p.numel(), self.clients_per_round
        if self.scheme == "full":
            return RoundPlan(torch.arange(n), p.clone())
        if self.scheme != "scheme1" and k > n:
            raise ReplicateError(f"K = {k} clients per round exceeds the {n} clients of this dataset")
        g = rng.generator(seed, "sampling", round_)
        if self.scheme == "scheme1":
            draws = torch.multinomial(p, k, replacement=True, generator=g)
            clients, counts = torch.unique(draws, sorted=True, return_counts=True)
            return RoundPlan(clients, counts.to(torch.float64) / k)
        clients = _uniform_without_replacement(n, k, g)
        pk = p[clients]
        if self.scheme == "scheme2":
            return RoundPlan(clients, pk * (n / k))
        if self.scheme == "original":
            return RoundPlan(clients, pk.clone(), residual=float(1.0 - pk.sum()))
        return RoundPlan(clients, torch.full((k,), 1.0 / k, dtype=torch.float64), lr_scale=pk * n)

    def coefficients(self, steps: int):
        return None  # FedAvg sends its model, not a weighted sum of gradients

    def init_state(self, flat):
        return None

    def server_step(self, flat, local_models, message, plan: RoundPlan, state):
        return plan.aggregate(flat, local_models), state
