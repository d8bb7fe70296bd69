"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith; draft Algorithm 2, MLSys 2020 final).

Each selected device k approximately minimises the proximal local objective (draft eq. 2)

    h_k(w; w_t) = F_k(w) + (μ/2) ‖w − w_t‖²

with E epochs of mini-batch SGD of batch b (the final code's PGD): w ← w − η(∇F_k(w; ξ)
+ μ(w − w_t)), where the anchor w_t is the round's global model. μ = ``prox_mu``, the
weight of the proximal term; μ = 0 is FedAvg (a test checks they are equal, bit for bit).
As in fedjax, μ enters once, in the client step: ``plain_sgd`` declares the update with μ
(``replicate.fl.sgd.PlainSGD``, where every form of μ the execution paths use is derived)
and the rest is FedAvg's. Local work, counted in epochs of ⌈n_k/b⌉ steps (last batch
smaller), is the engine's ``LocalWork``.

Sampling (``sampling``):
- ``uniform`` (the final code, spec §2.2): K devices uniformly without replacement,
  w ← Σ n_k w_k / Σ n_k over the devices that return;
- ``proportional`` (the draft's Algorithm 2): K draws with P(k) = p_k, w ← (1/K) Σ w_k
  (each distinct device trains once and counts with its multiplicity).

Systems heterogeneity (final paper §5.2, spec §2.2): a fraction d = ``straggler_fraction``
of the selected devices are stragglers; each runs x epochs, x uniform on {1, …, E − 1}
(the authors' ``randint(1, E)``; the paper says [1, E]), from a dedicated random stream
[PROPOSED]. FedProx keeps their partial work and aggregates every device.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import torch

from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import sampling
from replicate.fl.algorithms.protocol import LocalSGDClients, PlainSGD, Population, RoundPlan, server_move, register

SAMPLING = ("uniform", "proportional")


@register("fedprox", example=dict(prox_mu=0.1, clients_per_round=4, straggler_fraction=0.5))
@dataclass(frozen=True)
class FedProx(LocalSGDClients):  # FedAvg's client half, its declared update (plain_sgd) with μ
    # μ travels in the client state (a row each: PlainSGD.client_init), so runs of other μ share a batch; only
    # whether there is a proximal term at all is the client step's (μ = 0 skips it, bit for bit FedAvg)
    client_fields: ClassVar[tuple[str, ...]] = ("proximal",)
    prox_mu: float = 0.0  # μ
    clients_per_round: int = 10  # K
    sampling: str = "uniform"
    straggler_fraction: float = 0.0  # d
    server_lr: float = 1.0  # η_s (1 in the paper)

    def __post_init__(self):
        if self.prox_mu < 0:
            raise ReplicateError(f"prox_mu (μ) must be >= 0, got {self.prox_mu}")
        if self.sampling not in SAMPLING:
            raise ReplicateError(f"unknown FedProx sampling {self.sampling!r}; choose one of {', '.join(SAMPLING)}")
        if self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round (K) must be >= 1, got {self.clients_per_round}")
        if not self.server_lr > 0:
            raise ReplicateError(f"server_lr must be positive, got {self.server_lr}")
        sampling.check_fraction("straggler_fraction", self.straggler_fraction)

    @property
    def proximal(self) -> bool:
        return self.prox_mu > 0

    @functools.cached_property  # read every local step: made once per algorithm object
    def plain_sgd(self) -> PlainSGD:
        return PlainSGD(prox_mu=self.prox_mu)

    def server_init(self, params, population: Population):
        return None

    def plan(self, population: Population, work, seed: int, round_: int) -> RoundPlan:
        p = population.weights.to(torch.float64)
        k = self.clients_per_round
        if self.sampling == "uniform":
            clients = sampling.uniform(p.numel(), k, seed, round_)
            weights = p[clients] / p[clients].sum()
        else:
            clients, counts = sampling.proportional(p, k, seed, round_)
            weights = counts.to(torch.float64) / k
        units = None
        if self.straggler_fraction:
            units = sampling.stragglers(clients.numel(), self.straggler_fraction, work.amount, seed, round_)
        return RoundPlan(clients, weights, work=units)

    def server_step(self, server_state, params, message, plan: RoundPlan, ctx):
        return server_move(params, plan.aggregate(params, message["w"]), self.server_lr), server_state
