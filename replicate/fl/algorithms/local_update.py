"""LocalUpdate of Charles & Konečný (AISTATS 2021), Algorithms 1-2 and Table 1.

"Convergence and Accuracy Trade-Offs in Federated Learning and Meta-Learning".
Each sampled client runs K local (proximal) SGD steps and sends the linear
combination Σ_k a_k g_k of the gradients it computed, not its model delta
(Appendix A); the server averages the messages into a pseudo-gradient q and takes
one ServerOpt step: GD with server learning rate η, optionally with heavy-ball or
Nesterov momentum β (spec §1.3, velocity form v ← βv − ηq; x ← x + v, or
x ← x + βv − ηq for Nesterov).

Symbols → arguments: a → ``a`` (None = 1_K), η → ``server_lr``, β → ``momentum``,
M → ``clients_per_round`` (None = every client, weighted by P). The engine's
``ClientUpdate`` carries K (``steps``), B (``batch_size``) and α (``prox_mu``);
γ is the engine's client learning-rate schedule.

Table 1 as configurations (ServerOpt = GD): FedAvg / Reptile = (a = 1_K, η = γ);
FedProx = the same with α > 0; FedSGD and mini-batch SGD = (a = e_1); FOMAML =
(a = e_K); MAML on quadratics with K − 1 inner GD steps = (a = e_{2K−1}, Theorem 2);
Lookahead = (a = 1_K, one client, η = β_LA γ).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms.base import RoundPlan


@dataclass(frozen=True)
class LocalUpdate:
    server_lr: float = 1.0  # η
    a: tuple[float, ...] | None = None  # coefficient vector (a_1, ..., a_K); None = 1_K
    momentum: float = 0.0  # β of the server
    nesterov: bool = False
    clients_per_round: int | None = None  # M; None = full participation

    def __post_init__(self):
        if self.a is not None and not any(self.a):
            raise ReplicateError("the coefficient vector a needs at least one non-zero entry")
        if not 0.0 <= self.momentum < 1.0:
            raise ReplicateError(f"server momentum must be in [0, 1), got {self.momentum}")
        if self.nesterov and not self.momentum:
            raise ReplicateError("Nesterov needs a non-zero server momentum")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round (M) must be >= 1, got {self.clients_per_round}")

    @classmethod
    def fedavg(cls, client_lr: float, **kwargs) -> "LocalUpdate":
        """FedAvg (and FedProx with the engine's ``prox_mu``) as LocalUpdate: a = 1_K, η = γ."""
        return cls(server_lr=client_lr, **kwargs)

    def plan(self, weights: torch.Tensor, seed: int, round_: int) -> RoundPlan:
        """All clients weighted by P, or M clients drawn from P without replacement, equally weighted."""
        p = weights.to(torch.float64)
        n = p.numel()
        if self.clients_per_round is None:
            return RoundPlan(torch.arange(n), p.clone())
        if self.clients_per_round > n:
            raise ReplicateError(f"M = {self.clients_per_round} clients per round exceeds the {n} clients")
        g = rng.generator(seed, "sampling", round_)
        clients = torch.multinomial(p, self.clients_per_round, replacement=False, generator=g).sort().values
        return RoundPlan(clients, torch.full((self.clients_per_round,), 1.0 / self.clients_per_round,
                                             dtype=torch.float64))

    def coefficients(self, steps: int) -> torch.Tensor:
        """(a_1, ..., a_K) for the engine's K = ``steps`` local steps."""
        if self.a is None:
            return torch.ones(steps, dtype=torch.float64)
        if len(self.a) != steps:
            raise ReplicateError(f"a has {len(self.a)} entries but the client runs K = {steps} local steps; "
                                 "set ClientUpdate(steps=len(a))")
        return torch.tensor(self.a, dtype=torch.float64)

    def init_state(self, flat: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(flat)  # server velocity v

    def server_step(self, flat, local_models, message, plan: RoundPlan, state):
        q = plan.weights.to(message.dtype).to(message.device) @ message
        velocity = self.momentum * state - self.server_lr * q
        if self.nesterov:
            return flat + self.momentum * velocity - self.server_lr * q, velocity
        return flat + velocity, velocity
