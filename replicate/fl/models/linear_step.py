"""The linear model's fused SGD step, one run's rows (``sgd_step``, its coefficients bound by ``run_step``), and
the pieces it shares with the step for several batched runs (``fused_runs.Step``): the mini-batch's gradient
weights, the clip bound and the explicit clipped update. ``LogisticRegression.sgd`` (``linear.py``) drives
either step. The coefficients are the declared update's (``sgd.PlainSGD.fused``): w ← decay·w + pull·w_t −
lr·clip(∇), decay = 1 − η(λ + μ), pull = ημ, the start w_t being the round's broadcast model.
"""
from __future__ import annotations

import functools

import torch

from replicate.fl import sgd


def clip_may_act(bound, clip_norm: float) -> bool:
    """Whether gradients whose norms are at most ``bound`` (a float or a tensor of per-client
    bounds) may be clipped at ``clip_norm``, with a margin for rounding."""
    bound = bound if torch.is_tensor(bound) else torch.tensor(bound, dtype=torch.float32, device="cpu")
    return bool(_within_margin(bound, clip_norm).any())


def _within_margin(bound: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """Elementwise: a norm of at most ``bound`` may reach ``clip_norm`` (a margin for rounding)."""
    return bound * (1 + 1e-4) + 1e-6 >= clip_norm


def run_step(w, run: sgd.RunRows):
    """``sgd_step`` for one run's rows from their start ``w`` (K, C, d+1), its coefficients bound."""
    return functools.partial(sgd_step, lr=run.lr, decay=run.decay, pull_term=run.pull_term(w))


def sgd_step(w, x, onehot, mask, row_norms, *, lr, decay, pull_term, clip_norm, rows=None) -> None:
    """One fused SGD step on class-major parameters ``w`` (K, C, d+1), in place (``rows``: the
    rows of the round's K that ``w`` holds, when only some still work)."""
    if rows is not None:
        lr, decay, pull_term = (t.index_select(0, rows) if torch.is_tensor(t) and t.dim() else t
                                for t in (lr, decay, pull_term))
    g = gradient_weights(w, x, onehot, mask)
    if clip_norm is not None and may_clip(g, row_norms, clip_norm).any():
        explicit_(w, g, x, lr, decay, clip_norm)
    else:
        g.mul_(lr)
        if torch.is_tensor(decay):
            w.mul_(decay).baddbmm_(g, x, alpha=-1.0)
        else:
            w.baddbmm_(g, x, beta=decay, alpha=-1.0)
    if pull_term is not None:
        w.add_(pull_term)


def gradient_weights(w, x, onehot, mask, masked=None, logits=None) -> torch.Tensor:
    """dCE/dlogits of every sample, weighted for a mean over each row's real samples: (K, C, b).

    A row without a mask divides by the width b; a masked row multiplies by m/Σm. ``masked`` (K,)
    marks, in a batch of runs, the rows whose run alone had a mask: the others multiply by m (exact)
    and divide by Σm, which is their width, so each row rounds as it does alone. ``logits``: ``w xᵀ`` (K, C, b)
    already formed (a batch of runs forms each run's on its own block: ``fused_runs._own``)."""
    logits = torch.bmm(w, x.transpose(1, 2)) if logits is None else logits
    g = logits.softmax(dim=1).sub_(onehot.transpose(1, 2))
    if mask is None:
        return g.div_(x.shape[1])
    m = mask.to(g.dtype)
    total = m.sum(1, keepdim=True)
    if masked is None or bool(masked.all()):
        return g.mul_((m / total).unsqueeze(1))
    keep = masked.unsqueeze(1)
    return g.mul_(torch.where(keep, m / total, m).unsqueeze(1)).div_(torch.where(keep, 1.0, total).unsqueeze(1))


def may_clip(g: torch.Tensor, row_norms: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """Per row (K,), whether clipping may act on the gradient Σ_i g_i x_iᵀ (g: (K, C, b), already
    weighted), by the triangle bound Σ_i ‖g_i‖·‖x_i‖ with ``clip_may_act``'s margin for rounding."""
    return _within_margin((g.square().sum(1).sqrt_() * row_norms).sum(-1), clip_norm)


def explicit_(w, g, x, lr, decay, clip_norm) -> None:
    """w ← decay·w − lr·clip(Σ_i g_i x_iᵀ), the gradient formed explicitly to take its exact norm."""
    grad = torch.bmm(g, x)
    norms = torch.linalg.vector_norm(grad, dim=(1, 2), keepdim=True)
    factor = sgd.clip_factor(norms, clip_norm).mul_(lr)
    w.mul_(decay).sub_(grad.mul_(factor))
