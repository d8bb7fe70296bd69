"""STEM (Khanduri et al., NeurIPS 2021, Algorithm 1 = Algorithm 3), spec STEM §2.1 (RECONSTRUCTED).

Every worker k keeps a local model x^(k) and a momentum direction d^(k). A local step with the
step's mini-batch B (the SAME B at both points) is the STORM-type update

    d_{t+1} = ∇f_k(x_{t+1}; B) + (1 − a) · (d_t − ∇f_k(x_t; B)),     x_{t+2} = x_{t+1} − η d_{t+1},

and after I local steps the server averages both the models and the directions (the "two-sided"
momentum):  x̄ = (1/K) Σ_k (x_{t+1}^(k) − η d_{t+1}^(k)),  d̄ = (1/K) Σ_k d_{t+1}^(k), broadcast to all.
The first local step after a communication uses the worker's OWN last pre-averaging iterate as
the old point x_t and the broadcast x̄ as the new one (spec §2.1 notes), so the server keeps each
worker's last iterate, an (N, P) tensor, as SCAFFOLD keeps its c_i.

Round 0 is the initialisation, the protocol's warm-up round (``RoundPlan.warmup``): d_1 = the average of each worker's
gradients at x_1 over that round's I mini-batches of b (B = b·I samples, Theorem 3.1's initial batch), averaged at the
server, then x_2 = x_1 − η_1 d̄_1 ("Perform" step); the model does not move on the workers in round 0.

Momentum: a = min{1, c·η²} with η this round's rate (eq. 2's a_{t+1} = c·η_t²; the η schedule is
per epoch in the experiments, so η_t = η_{t+1} within an epoch). a = 1 (c·η² ≥ 1) makes every
local step plain SGD: rounds ≥ 1 are then FedAvg with equal weights (a test checks it).

Full participation only (the paper's setting: every WN every round).

Symbols → names: η → the client learning rate (engine schedule; ``LRSchedule("epoch_cube_root")`` is eq. 2),
c → ``momentum_c``, a → ``momentum_weight(lr)``, I → local steps per round, b → the batch size,
K → the number of clients, d̄ → ``StemState.direction``, x_{t}^(k) → ``StemState.last_iterates``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from replicate.core.errors import ReplicateError
from replicate.fl.algorithms.protocol import Population, RoundPlan, descend_, register


@dataclass(frozen=True)
class StemState:
    direction: torch.Tensor  # d̄, (P,); zero until the warm-up round forms d̄_1
    last_iterates: torch.Tensor  # each worker's last pre-averaging iterate x_t^(k), (N, P)


@register("stem", example=dict(momentum_c=2.0))
@dataclass(frozen=True)
class Stem:
    client_fields: ClassVar[tuple[str, ...]] = ()  # c travels in the client state (a row each): runs batch across it
    momentum_c: float = 1.0  # c in a = min{1, c·η²}

    plain_sgd = None  # the momentum direction is not plain SGD
    vectors = (2, 2)  # x̄ and d̄ down, each worker's model and direction up (§3, Alg. 1)
    lockstep = True  # its client step reads the warm-up flag (round 0, ctx.warmup): its batches keep in step

    def __post_init__(self):
        if not self.momentum_c > 0:
            raise ReplicateError(f"STEM's momentum constant c must be positive, got {self.momentum_c}")

    def momentum_weight(self, lr: torch.Tensor, c=None) -> torch.Tensor:
        """a = min{1, c·η²} per worker, for the (m, 1) rates: the weight of the fresh gradient
        (1 − a multiplies the old correction). ``c``: (m, 1) per-worker constants (default ``momentum_c``),
        so runs with other c train in one batch (fl/batching); c·η·η is the same float product either way."""
        return ((self.momentum_c if c is None else c) * lr * lr).clamp(max=1.0)

    def server_init(self, params: torch.Tensor, population: Population) -> StemState:
        return StemState(torch.zeros_like(params), params.unsqueeze(0).repeat(population.num_clients, 1))

    def plan(self, population: Population, work, seed: int, round_: int) -> RoundPlan:
        n, host = population.num_clients, population.weights.device
        return RoundPlan(torch.arange(n, device=host), torch.full((n,), 1.0 / n, dtype=torch.float64, device=host),
                         warmup=round_ == 0)

    def client_init(self, state: StemState, params, plan, ctx):
        m = plan.clients.numel()
        w = params.unsqueeze(0).repeat(m, 1)
        c = w.new_full((m, 1), self.momentum_c)  # a row's c, so runs of other c can share a batch
        if ctx.warmup:  # round 0: accumulate d_1 at x_1
            return {"w": w, "d": torch.zeros_like(w), "prev": w.clone(), "c": c}
        prev = state.last_iterates[plan.clients.to(params.device)]
        return {"w": w, "d": state.direction.unsqueeze(0).repeat(m, 1), "prev": prev, "c": c}

    def client_step(self, state, grad, ctx):
        if ctx.warmup:  # d_1 = (1/I) Σ_s ∇f_k(x_1; B_s): the B = b·I initial batch, model fixed
            steps = ctx.steps.to(state["w"].device, state["w"].dtype).unsqueeze(1)
            state["d"].add_(grad(state["w"]) / steps)
            return state
        a = self.momentum_weight(ctx.lr, state["c"])
        fresh, old = grad(state["w"]), grad(state["prev"])  # the same mini-batch at x_{t+1} and x_t
        state["d"] = fresh + (1.0 - a) * (state["d"] - old)
        state["prev"] = state["w"].clone()
        descend_(state["w"], state["d"], ctx.lr)
        return state

    def client_message(self, state, params, plan, ctx):
        return {"w": state["w"], "d": state["d"], "prev": state["prev"]}

    def server_step(self, state: StemState, params, message, plan: RoundPlan, ctx):
        weights = plan.weights.to(params.dtype).to(params.device)
        direction = weights @ message["d"]
        if plan.warmup:  # x_2 = x_1 − η_1 d̄_1; every worker's old point is x_1
            lr = float(ctx.lr[0])  # every worker runs at the round's one rate (STEM scales no client's)
            return params - lr * direction, StemState(direction, state.last_iterates)
        last = state.last_iterates.index_copy(0, plan.clients.to(params.device), message["prev"])
        return weights @ message["w"], StemState(direction, last)
