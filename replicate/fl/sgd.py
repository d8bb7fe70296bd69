"""The local (proximal) SGD step, stated once: its declaration, its pieces, and the forms it takes.

Li et al.'s local solver (ICLR 2020, spec §2.1) clips the loss gradient's norm as
``torch.nn.utils.clip_grad_norm_`` does (with its 1e-6 guard) and adds weight decay λw;
FedProx (Li, Sahu et al., draft eq. 2) and LocalUpdate's α add the proximal pull μ(w − w_t). As one update,

    w ← w − η(clip(∇f(w)) + λw + μ(w − w_t)) = (1 − η(λ + μ))·w + ημ·w_t − η·clip(∇f(w)).

An algorithm declares it with ``PlainSGD`` (its ``plain_sgd``; μ = 0 is FedAvg's step, as in fedjax's
FedProx, which adds μ in the client's gradient and keeps the rest of FedAvg). η arrives as the round's
per-client rates ``RoundContext.lr``, an (m, 1) column the engine forms from the schedule; every other form
of μ and η that the update's execution paths need is derived here, once, from the declaration:

- the generic step (``PlainSGD.step``) takes the first form, with μ as an (m, 1) column of the client state
  (``PlainSGD.client_init``: a row per client, so that runs of other μ share a batch);
- a fused solver takes the last: ``PlainSGD.fused`` folds a run's η, λ and μ into its coefficients
  (``RunRows``: decay = 1 − η(λ + μ), pull = ημ, and ``RunRows.pull_term``, pull·w_t).

Symbols → names: η ``lr``, λ ``weight_decay``, μ ``prox_mu``, w_t ``anchor`` (``RoundContext.params``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from replicate.core.errors import ReplicateError


def clip_factor(norms: torch.Tensor, max_norm: float) -> torch.Tensor:
    """min(1, max_norm / (‖g‖ + 1e-6)): what clipping multiplies a gradient of norm ``norms`` by."""
    return torch.clamp(max_norm / (norms + 1e-6), max=1.0)


def clip_(g: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Clip each row of ``g`` (one client's gradient a row) to norm ``max_norm``, in place."""
    return g.mul_(clip_factor(torch.linalg.vector_norm(g, dim=-1, keepdim=True), max_norm))


def proximal_(g: torch.Tensor, w: torch.Tensor, anchor: torch.Tensor, prox_mu: torch.Tensor) -> torch.Tensor:
    """g ← g + μ(w − w_t), in place: the gradient of the proximal term (μ/2)‖w − w_t‖². ``prox_mu`` is
    each row's μ, an (m, 1) column (runs of other μ share a batch, ``fl/batching``); ``addcmul_`` with a
    column rounds as ``add_(…, alpha=μ)`` with the float does (checked bitwise on this CPU, float32 and
    float64), so a run alone computes what it computed when μ was a float."""
    return g.addcmul_(w - anchor, prox_mu)


def descend_(w: torch.Tensor, g: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
    """w ← w − η·g in place, with ``lr`` the (m, 1) per-client rates η (``RoundContext.lr``)."""
    return w.addcmul_(lr, g, value=-1.0)


@dataclass(frozen=True)
class RunRows:
    """One run's rows in a fused solve, with the coefficients that run alone solves with (``PlainSGD.fused``)
    and whether its own mini-batches carried a mask. A fused solver's arithmetic depends on them (a rate
    shared by all of a run's rows stays a float, so its decay fits inside one GEMM), so each row computes
    bitwise what it computes alone only when the solver knows them (``fl/models/fused_runs.py``)."""

    size: int  # rows (clients) of this run
    lr: float | torch.Tensor  # η: a float when every row of the run shares it, else (size, 1, 1)
    decay: float | torch.Tensor  # 1 − η(λ + μ), of the same kind as ``lr``
    pull: float | torch.Tensor | None  # ημ, of the same kind; None without a proximal term
    masked: bool = True  # its own batches had a mask (masked means weigh by m/Σm, else divide by the width)

    def pull_term(self, start: torch.Tensor) -> torch.Tensor | None:
        """pull·w_t for this run's rows, from their start w_t (a row each, in the solver's layout): what each
        step adds; None without a proximal term."""
        return None if self.pull is None else start * self.pull

    def column(self, value, like: torch.Tensor) -> torch.Tensor:
        """``value`` (one of this run's coefficients) as a (size, 1, 1) tensor of ``like``'s dtype: a float
        is cast as a tensor-scalar product casts it, so elementwise products agree bitwise."""
        if torch.is_tensor(value):
            return value.to(like.dtype).view(-1, 1, 1)
        return torch.full((self.size, 1, 1), value, dtype=like.dtype, device=like.device)


@dataclass(frozen=True)
class PlainSGD:
    """Declares a client update to be w ← w − η(∇f(w) + μ(w − w_t)) from w = w_t, message w (∇f includes
    the local objective's clipping and λ), so that a problem's fused solver may run the whole local solve
    (``fused``) where the algorithm's client step is this declaration's (``protocol.fused_update``)."""

    prox_mu: float = 0.0  # μ; 0 is FedAvg's step

    def client_init(self, params: torch.Tensor, clients: int) -> dict:
        """The state of ``clients`` clients at the broadcast model w_t: ``"w"``, its copies, and where μ > 0
        ``"prox_mu"``, μ as an (m, 1) column (a row each, so that runs of other μ share a batch)."""
        state = {"w": params.unsqueeze(0).repeat(clients, 1)}
        if self.prox_mu > 0:
            state["prox_mu"] = params.new_full((clients, 1), self.prox_mu)
        return state

    def step(self, state: dict, grad, ctx) -> dict:
        """One generic local step on ``state["w"]`` (every execution path but a fused solver): the gradient,
        μ(w − w_t) added where μ > 0 with each row's ``state["prox_mu"]``, then w ← w − η·g."""
        w = state["w"]
        g = grad(w)
        if self.prox_mu > 0:
            proximal_(g, w, ctx.params, state["prox_mu"])
        descend_(w, g, ctx.lr)
        return state

    def fused(self, lr: torch.Tensor, weight_decay: float, masked: bool = True) -> RunRows:
        """The update as a fused solver runs one run's rows, at their rates ``lr`` (one a row: (size,) or
        (size, 1), as ``RoundContext.lr``) with weight decay λ: one float rate when all are equal, as a run
        alone computes, and the coefficients decay = 1 − η(λ + μ), pull = ημ of the same kind."""
        rate = float(lr[0]) if bool((lr == lr[0]).all()) else lr.view(-1, 1, 1)
        pull = rate * self.prox_mu if self.prox_mu else None
        return RunRows(lr.numel(), rate, 1.0 - rate * (weight_decay + self.prox_mu), pull, masked)


@dataclass(frozen=True)
class LocalObjective:
    """What every client's gradient includes besides its loss (Li et al.'s local solver)."""

    weight_decay: float = 0.0  # λ, added to the gradient as λw (inside the optimiser)
    clip_norm: float | None = None  # clip the loss gradient's norm before weight decay

    def __post_init__(self):
        if self.weight_decay < 0:
            raise ReplicateError(f"weight decay (λ) must be >= 0, got {self.weight_decay}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ReplicateError(f"clip_norm must be positive or None, got {self.clip_norm}")

    def gradient(self, loss_grad: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """clip(∇f(w)) + λw, in place on ``loss_grad``."""
        if self.clip_norm is not None:
            clip_(loss_grad, self.clip_norm)
        if self.weight_decay:
            loss_grad.add_(w, alpha=self.weight_decay)
        return loss_grad
