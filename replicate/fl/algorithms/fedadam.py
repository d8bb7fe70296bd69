"""FedAdam (Reddi, Charles, Zaheer, Garrett, Rush, Konečný, Kumar, McMahan, ICLR 2021,
"Adaptive Federated Optimization", Algorithm 2 with the Adam server update).

Clients run local SGD from the server model x_t and send Δ_i = y_i − x_t; the server treats the
average Δ_t = (1/|S|) Σ_i Δ_i as a pseudo-gradient step for Adam (no bias correction, as there):

    m_t = β₁ m_{t−1} + (1 − β₁) Δ_t,    v_t = β₂ v_{t−1} + (1 − β₂) Δ_t²,    x_{t+1} = x_t + η m_t / (√v_t + τ),

from m_{−1} = 0 and v_{−1} = τ² (the paper asks v_{−1} ≥ τ²). Symbols → names: |S| =
``clients_per_round`` (None = every client), η = ``server_lr``, β₁ = ``beta1``, β₂ = ``beta2``,
τ = ``tau`` (the adaptivity); the client rate is the engine's schedule. Defaults are the paper's
(β₁ = 0.9, β₂ = 0.99, τ = 1e-3). This module is also the worked example of adding an algorithm
(docs/engine.md): it touched this file, the registry and its tests, nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import sampling
from replicate.fl.algorithms.protocol import LocalSGDClients, Population, RoundPlan, register


@dataclass(frozen=True)
class AdamState:
    m: torch.Tensor  # first moment of the pseudo-gradient, (P,)
    v: torch.Tensor  # second moment, (P,)


@register("fedadam", example=dict(clients_per_round=4, beta1=0.5))
@dataclass(frozen=True)
class FedAdam(LocalSGDClients):  # clients: plain SGD from x_t, message the local model
    client_fields: ClassVar[tuple[str, ...]] = ()  # server-side settings only: runs batch across them
    clients_per_round: int | None = 10  # |S|; None = every client
    server_lr: float = 0.01  # η
    beta1: float = 0.9  # β₁
    beta2: float = 0.99  # β₂
    tau: float = 1e-3  # τ

    def __post_init__(self):
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round must be >= 1, got {self.clients_per_round}")
        if not self.server_lr > 0 or not self.tau > 0:
            raise ReplicateError(f"FedAdam needs server_lr > 0 and tau > 0, got {self.server_lr}, {self.tau}")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ReplicateError(f"FedAdam's β₁, β₂ must lie in [0, 1), got {self.beta1}, {self.beta2}")

    def server_init(self, params: torch.Tensor, population: Population) -> AdamState:
        return AdamState(torch.zeros_like(params), torch.full_like(params, self.tau ** 2))

    def plan(self, population: Population, work, seed: int, round_: int) -> RoundPlan:
        n, host = population.num_clients, population.weights.device
        k = n if self.clients_per_round is None else self.clients_per_round
        clients = torch.arange(n, device=host) if k == n else sampling.uniform(n, k, seed, round_)
        return RoundPlan(clients, torch.full((k,), 1.0 / k, dtype=torch.float64, device=host))

    def server_step(self, state: AdamState, params, message, plan: RoundPlan, ctx):
        delta = plan.aggregate(params, message["w"]) - params  # Δ_t = (1/|S|) Σ_i (y_i − x_t)
        m = self.beta1 * state.m + (1 - self.beta1) * delta
        v = self.beta2 * state.v + (1 - self.beta2) * delta * delta
        return params + self.server_lr * m / (v.sqrt() + self.tau), AdamState(m, v)
