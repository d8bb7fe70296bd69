"""SCAFFOLD (Karimireddy et al., ICML 2020, Algorithm 1), the STEM paper's baseline (spec STEM §4).

Server state: the model x and the control variate c; client i keeps c_i across rounds.
Round: sample S (``clients_per_round`` uniformly without replacement; None = all N, as in
STEM's full-participation experiments). Each i ∈ S sets y_i ← x and takes K_loc local steps

    y_i ← y_i − η_l (g_i(y_i) − c_i + c),

then sets its new control variate c_i⁺ by one of the paper's two options (eq. 4):

- option I: c_i⁺ ← ∇f_i(x), the full-batch local gradient at the server model (an extra pass
  over the local data; the engine's ``RoundContext.full_grad``, taken in ``client_init``);
- option II (the default, as in STEM's experiments): c_i⁺ ← c_i − c + (x − y_i)/(K_loc η_l);

uploads (Δy_i, Δc_i) = (y_i − x, c_i⁺ − c_i) and keeps c_i ← c_i⁺. The server takes

    x ← x + η_g · (1/|S|) Σ Δy_i,    c ← c + (|S|/N) · (1/|S|) Σ Δc_i.

Symbols → names: η_l = the client learning rate (engine schedule), η_g = ``server_lr``,
the option = ``option`` ("I" or "II"),
K_loc = each client's local step count (``RoundContext.steps``; with unequal local work
each client uses its own). c = c_i = 0 at the start [PROPOSED, spec STEM §4]: then the first
round is FedAvg with equal weights (a test checks it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import sampling
from replicate.fl.algorithms.protocol import Population, RoundPlan, descend_, register


@dataclass(frozen=True)
class ScaffoldState:
    control: torch.Tensor  # c, (P,)
    client_controls: torch.Tensor  # c_i for every client, (N, P)


@register("scaffold", example=dict(clients_per_round=4, option="I"))
@dataclass(frozen=True)
class Scaffold:
    # decides the client state's entries: runs batch only with one option
    client_fields: ClassVar[tuple[str, ...]] = ("option",)
    clients_per_round: int | None = None  # |S|; None = every client
    server_lr: float = 1.0  # η_g
    option: str = "II"  # how c_i⁺ is formed (eq. 4): "I" full local gradient at x, "II" from the iterates

    plain_sgd = None  # the control-variate correction is not plain SGD
    vectors = (2, 2)  # the model and the control variate c down, Δy and Δc up (Karimireddy et al., Alg. 1)

    def __post_init__(self):
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ReplicateError(f"clients_per_round must be >= 1, got {self.clients_per_round}")
        if not self.server_lr > 0:
            raise ReplicateError(f"server_lr (η_g) must be positive, got {self.server_lr}")
        if self.option not in ("I", "II"):
            raise ReplicateError(f"SCAFFOLD's control-variate option is 'I' or 'II', got {self.option!r}")

    def server_init(self, params: torch.Tensor, population: Population) -> ScaffoldState:
        return ScaffoldState(torch.zeros_like(params), params.new_zeros((population.num_clients, params.numel())))

    def plan(self, population: Population, work, seed: int, round_: int) -> RoundPlan:
        n, host = population.num_clients, population.weights.device
        k = n if self.clients_per_round is None else self.clients_per_round
        clients = torch.arange(n, device=host) if k == n else sampling.uniform(n, k, seed, round_)
        return RoundPlan(clients, torch.full((k,), 1.0 / k, dtype=torch.float64, device=host))

    def client_init(self, state: ScaffoldState, params, plan, ctx):
        m = plan.clients.numel()
        ci = state.client_controls[plan.clients.to(params.device)]
        w = params.unsqueeze(0).repeat(m, 1)
        out = {"w": w, "ci": ci, "correction": state.control - ci}
        if self.option == "I":
            out["c_plus"] = ctx.full_grad(w.clone())  # ∇f_i(x) before any local step
        return out

    def client_step(self, state, grad, ctx):
        g = grad(state["w"]).add_(state["correction"])  # g_i(y_i) − c_i + c
        descend_(state["w"], g, ctx.lr)
        return state

    def client_message(self, state, params, plan, ctx):
        delta_y = state["w"] - params
        if self.option == "I":
            return {"delta_y": delta_y, "delta_c": state["c_plus"] - state["ci"]}
        rate = ctx.steps.to(params.device, params.dtype).unsqueeze(1) * ctx.lr
        # c_i⁺ − c_i = −c + (x − y_i)/(K_loc η_l), and −c = −(c − c_i) − c_i
        delta_c = -state["correction"] - state["ci"] - delta_y / rate
        return {"delta_y": delta_y, "delta_c": delta_c}

    def server_step(self, state: ScaffoldState, params, message, plan: RoundPlan, ctx):
        weights = plan.weights.to(params.dtype).to(params.device)
        clients = plan.clients.to(params.device)
        new_params = params + self.server_lr * (weights @ message["delta_y"])
        n = state.client_controls.shape[0]
        control = state.control + (clients.numel() / n) * (weights @ message["delta_c"])
        client_controls = state.client_controls.index_add(0, clients, message["delta_c"])
        return new_params, ScaffoldState(control, client_controls)
