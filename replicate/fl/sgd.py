"""The pieces of a local (proximal) SGD step, written once for every execution path.

Li et al.'s local solver (spec §2.1) clips the loss gradient's norm as
``torch.nn.utils.clip_grad_norm_`` does (with its 1e-6 guard) and adds weight decay λw;
FedProx (draft eq. 2) and LocalUpdate's α add the proximal pull μ(w − w_t). As one update,

    w ← w − η(clip(∇f(w)) + λw + μ(w − w_t)) = (1 − η(λ + μ))·w + ημ·w_t − η·clip(∇f(w)),

which the generic step applies as a gradient step and a fused solver as the coefficients
(``coefficients``) of its last form. Symbols → names: η ``lr``, λ ``weight_decay``,
μ ``prox_mu``, w_t ``anchor``.
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


def coefficients(lr, weight_decay: float, prox_mu: float):
    """(1 − η(λ + μ), ημ): the update as w ← decay·w + pull·w_t − η·clip(∇f(w))."""
    return 1.0 - lr * (weight_decay + prox_mu), lr * prox_mu


@dataclass(frozen=True)
class RunRows:
    """One run's rows in a fused solve of several runs (``fl/batching``), with what that run alone
    would solve with: its rate η, ``coefficients`` (decay, pull rate) and whether its own mini-batches
    carried a mask. A fused solver's arithmetic depends on them (a rate shared by all of a run's rows
    stays a float, so its decay fits inside one GEMM), so each row computes bitwise what it computes
    alone only when the solver knows them."""

    size: int  # rows (clients) of this run
    lr: float | torch.Tensor  # η: a float when every row of the run shares it, else (size, 1, 1)
    decay: float | torch.Tensor  # 1 − η(λ + μ), of the same kind as ``lr``
    pull_rate: float | torch.Tensor | None  # ημ; None without a proximal term
    masked: bool = True  # its own batches had a mask (masked means weigh by m/Σm, else divide by the width)

    @classmethod
    def of(cls, lr: torch.Tensor, update, weight_decay: float, masked: bool = True) -> "RunRows":
        """A run's rows given its (size,) rates and its algorithm's ``PlainSGD`` update: one float rate
        when they are all equal, as a run alone computes."""
        rate = float(lr[0]) if bool((lr == lr[0]).all()) else lr.view(-1, 1, 1)
        decay, pull = update.coefficients(rate, weight_decay)
        return cls(lr.numel(), rate, decay, pull if update.prox_mu else None, masked)

    def column(self, value, like: torch.Tensor) -> torch.Tensor:
        """``value`` (one of this run's coefficients) as a (size, 1, 1) tensor of ``like``'s dtype: a float
        is cast as a tensor-scalar product casts it, so elementwise products agree bitwise."""
        if torch.is_tensor(value):
            return value.to(like.dtype).view(-1, 1, 1)
        return torch.full((self.size, 1, 1), value, dtype=like.dtype, device=like.device)


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
