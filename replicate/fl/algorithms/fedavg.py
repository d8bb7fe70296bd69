"""FedAvg with the sampling and averaging schemes of Li et al. (ICLR 2020, §3.3 and App. D.2).

Li, Huang, Yang, Wang, Zhang, "On the Convergence of FedAvg on Non-IID Data".
Symbols: N clients with weights p_k = n_k/n, K = ``clients_per_round``, E local SGD
steps or epochs (the engine's ``LocalWork``), η_s = ``server_lr`` (1 in every paper here).
Client update (Algorithm 1 of McMahan et al.): w ← w − η ∇F_k(w; ξ), E times from w_t.
Schemes, as implemented in the authors' code (spec §2.1):

- ``scheme1``: K draws with replacement, P(k) = p_k; each distinct client trains
  once; w ← Σ (multiplicity_k / K) · w_k.
- ``scheme2``: K clients uniformly without replacement; w ← (N/K) Σ p_k w_k.
- ``original`` (McMahan et al.): uniform without replacement;
  w ← Σ p_k w_k + (1 − Σ p_k) w_t.
- ``transformed2``: uniform without replacement; client k trains with lr · N p_k;
  w ← (1/K) Σ w_k.
- ``full``: every client, w ← Σ p_k w_k (full participation).
- ``weighted``: the FedProx code's FedAvg (spec §2.2): uniform without replacement;
  w ← Σ n_k w_k / Σ n_k over the clients that return. With ``straggler_fraction`` d,
  round(K(1 − d)) of them train and the stragglers are *dropped* (FedProx final paper §5.2).

Sampling is a pure function of (seed, round): schemes that share a sampling
distribution (original, scheme2, transformed2, weighted) see the same clients.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import sampling
from replicate.fl.algorithms.protocol import LocalSGDClients, Population, RoundPlan, server_move, register

SCHEMES = ("full", "scheme1", "scheme2", "original", "transformed2", "weighted")


@register("fedavg", example=dict(scheme="weighted", clients_per_round=4, server_lr=0.5,
                                 straggler_fraction=0.5))
@dataclass(frozen=True)
class FedAvg(LocalSGDClients):  # clients: E steps of w ← w − η∇F_k(w; ξ) from w_t, message w
    client_fields: ClassVar[tuple[str, ...]] = ()  # plan and server settings only: runs batch across them (fl/batching)
    scheme: str = "scheme1"
    clients_per_round: int = 10  # K
    server_lr: float = 1.0  # η_s
    straggler_fraction: float = 0.0  # d: stragglers are dropped (``weighted`` only)

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ReplicateError(f"unknown sampling scheme {self.scheme!r}; choose one of {', '.join(SCHEMES)}")
        if self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round (K) must be >= 1, got {self.clients_per_round}")
        if not self.server_lr > 0:
            raise ReplicateError(f"server_lr must be positive, got {self.server_lr}")
        sampling.check_fraction("straggler_fraction", self.straggler_fraction)
        if self.straggler_fraction and self.scheme != "weighted":
            raise ReplicateError("FedAvg drops stragglers only with the FedProx code's scheme 'weighted'")

    def server_init(self, params, population: Population):
        return None

    def plan(self, population: Population, work, seed: int, round_: int) -> RoundPlan:
        p = population.weights.to(torch.float64)
        n, k = p.numel(), self.clients_per_round
        if self.scheme == "full":
            return RoundPlan(torch.arange(n, device=p.device), p.clone())
        if self.scheme == "scheme1":
            clients, counts = sampling.proportional(p, k, seed, round_)
            return RoundPlan(clients, counts.to(torch.float64) / k)
        clients = sampling.uniform(n, k, seed, round_)
        pk = p[clients]
        if self.scheme == "scheme2":
            return RoundPlan(clients, pk * (n / k))
        if self.scheme == "original":
            return RoundPlan(clients, pk.clone(), residual=float(1.0 - pk.sum()))
        if self.scheme == "transformed2":
            return RoundPlan(clients, torch.full((k,), 1.0 / k, dtype=torch.float64, device=p.device),
                             lr_scale=pk * n)
        if self.straggler_fraction:
            units = sampling.stragglers(k, self.straggler_fraction, work.amount, seed, round_)
            clients, pk = clients[units == work.amount], pk[units == work.amount]
            if not clients.numel():  # every client straggled: nobody returns, the model stays
                return RoundPlan(clients, pk, residual=1.0)
        return RoundPlan(clients, pk / pk.sum())

    def server_step(self, server_state, params, message, plan: RoundPlan, ctx):
        return server_move(params, plan.aggregate(params, message["w"]), self.server_lr), server_state
