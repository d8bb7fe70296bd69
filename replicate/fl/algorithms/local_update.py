"""LocalUpdate of Charles & Konečný (AISTATS 2021), Algorithms 1-2 and Table 1.

"Convergence and Accuracy Trade-Offs in Federated Learning and Meta-Learning".
Each sampled client runs K local (proximal) SGD steps and sends the linear
combination Σ_k a_k g_k of the gradients it computed, not its model delta
(Appendix A); the server averages the messages into a pseudo-gradient q and takes
one ServerOpt step: GD with server learning rate η, optionally with heavy-ball or
Nesterov momentum β (spec §1.3, velocity form v ← βv − ηq; x ← x + v, or
x ← x + βv − ηq for Nesterov).

Symbols → arguments: a → ``a`` (None = 1_K), η → ``server_lr``, β → ``momentum``,
M → ``clients_per_round`` (None = every client, weighted by P), α → ``alpha``
(the proximal term α(x − x_t) is part of each local gradient g_k). The engine's
``LocalWork`` carries K (steps) and B (``batch_size``); γ is the client learning rate.

Table 1 as configurations (ServerOpt = GD): FedAvg / Reptile = (a = 1_K, η = γ);
FedProx = the same with α > 0; FedSGD and mini-batch SGD = (a = e_1); FOMAML =
(a = e_K); MAML on quadratics with K − 1 inner GD steps = (a = e_{2K−1}, Theorem 2);
Lookahead = (a = 1_K, one client, η = β_LA γ).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.fl import sgd
from replicate.fl.algorithms.protocol import Population, RoundPlan, descend_, register


@register("local_update", example=dict(server_lr=0.5, momentum=0.9, nesterov=True, clients_per_round=4,
                                       alpha=0.1))
@dataclass(frozen=True)
class LocalUpdate:
    # read by the client step: runs batch only with equal a and with α > 0 or not; α itself travels in the
    # client state (a row each), so runs of other α share a batch
    client_fields: ClassVar[tuple[str, ...]] = ("a", "proximal")
    server_lr: float = 1.0  # η
    a: tuple[float, ...] | None = None  # coefficient vector (a_1, ..., a_K); None = 1_K
    momentum: float = 0.0  # β of the server
    nesterov: bool = False
    clients_per_round: int | None = None  # M; None = full participation
    alpha: float = 0.0  # α, the proximal strength

    plain_sgd = None  # the message is a weighted sum of gradients, not the local model
    vectors = (1, 1)  # the model down, the message Σ a_k g_k up

    @property
    def lockstep(self) -> bool:
        """The weights a_k are read at each local step (``RoundContext.step``): batches of such runs keep in step."""
        return self.a is not None

    def __post_init__(self):
        if self.a is not None and not any(self.a):
            raise ReplicateError("the coefficient vector a needs at least one non-zero entry")
        if not 0.0 <= self.momentum < 1.0:
            raise ReplicateError(f"server momentum must be in [0, 1), got {self.momentum}")
        if self.nesterov and not self.momentum:
            raise ReplicateError("Nesterov needs a non-zero server momentum")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round (M) must be >= 1, got {self.clients_per_round}")
        if self.alpha < 0:
            raise ReplicateError(f"the proximal strength α must be >= 0, got {self.alpha}")

    @property
    def proximal(self) -> bool:
        return self.alpha > 0

    def coefficients(self, steps: int) -> torch.Tensor:
        """(a_1, ..., a_K) for K = ``steps`` local steps."""
        if self.a is None:
            return torch.ones(steps, dtype=torch.float64, device="cpu")
        if len(self.a) != steps:
            raise ReplicateError(f"a has {len(self.a)} entries but the client runs K = {steps} local steps; "
                                 "set local_steps = len(a)")
        return torch.tensor(self.a, dtype=torch.float64, device="cpu")

    def server_init(self, params: torch.Tensor, population: Population) -> torch.Tensor:
        return torch.zeros_like(params)  # server velocity v

    def plan(self, population: Population, work, seed: int, round_: int) -> RoundPlan:
        """All clients weighted by P, or M clients drawn from P without replacement, equally weighted."""
        self.coefficients(work.amount)  # a must match K before any compute
        p = population.weights.to(torch.float64)
        n = p.numel()
        if self.clients_per_round is None:
            return RoundPlan(torch.arange(n, device=p.device), p.clone())
        if self.clients_per_round > n:
            raise ReplicateError(f"M = {self.clients_per_round} clients per round exceeds the {n} clients")
        g = rng.generator(seed, "sampling", round_)
        clients = torch.multinomial(p, self.clients_per_round, replacement=False, generator=g).sort().values
        return RoundPlan(clients, torch.full((self.clients_per_round,), 1.0 / self.clients_per_round,
                                             dtype=torch.float64, device=p.device))

    def client_init(self, velocity, params, plan, ctx):
        m = plan.clients.numel()
        return {"w": params.unsqueeze(0).repeat(m, 1), "message": params.new_zeros((m, params.numel())),
                "alpha": params.new_full((m, 1), self.alpha)}  # each row's α

    def client_step(self, state, grad, ctx):
        w = state["w"]
        g = grad(w)
        if self.proximal:
            sgd.proximal_(g, w, ctx.params, state["alpha"])
        state["message"].add_(g, alpha=1.0 if self.a is None else float(self.a[ctx.step]))
        descend_(w, g, ctx.lr)
        return state

    def client_message(self, state, params, plan, ctx):
        return {"q": state["message"]}

    def server_step(self, velocity, params, message, plan: RoundPlan, ctx):
        q = plan.weights.to(params.dtype).to(params.device) @ message["q"]
        velocity = self.momentum * velocity - self.server_lr * q
        if self.nesterov:
            return params + self.momentum * velocity - self.server_lr * q, velocity
        return params + velocity, velocity
