"""Multinomial logistic regression, the convex model of Li et al. and FedProx, with a fused solver.

``LogisticRegression.sgd`` runs a whole round of local SGD for all of a round's clients in
the layout CPU batched GEMM likes best; it is the fast path that plain-SGD algorithms
(FedAvg, FedProx) opt into (``PlainSGD``); tests check it against the generic step.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from replicate.fl.models import fused_runs
from replicate.fl.models.base import Model
from replicate.fl.models.linear_step import run_step


class LogisticRegression(Model):
    """Multinomial logistic regression ``logits = x W + b`` (the papers' convex model)."""

    def __init__(self, num_features: int, num_classes: int):
        self.d, self.c = num_features, num_classes
        self.shapes = {"weight": (num_features, num_classes), "bias": (num_classes,)}

    def cpu_execution(self) -> str:
        return "stacked"  # batched GEMMs (and the fused solver): the clients dimension is the fast path

    def init(self, generator, dtype=torch.float32):
        # PyTorch's nn.Linear default (uniform in ±1/sqrt(fan_in)), which the authors'
        # code used; the paper's text says w0 = 0.
        bound = 1.0 / math.sqrt(self.d)
        return (torch.rand(self.num_params, generator=generator, dtype=dtype, device=generator.device) * 2 - 1) * bound

    fused = True  # has ``sgd``, the fused local solver
    batch_exact = True  # its step is per-row GEMMs and elementwise ops, each run's arithmetic kept (fused_runs)
    eval_batch_size = 1 << 20  # logits are n × C: one chunk keeps the plain mean of earlier results

    def forward(self, params, x, noise=None):
        return x.reshape(x.shape[0], -1) @ params["weight"] + params["bias"]

    def predict(self, flat, x):
        """Logits of one model for all rows of ``x``, with W held as (C, d) in memory (see ``grad``)."""
        params = self.unflatten(flat)
        return x.reshape(x.shape[0], -1) @ params["weight"].t().contiguous().t() + params["bias"]

    def prepare(self, x: torch.Tensor, y: torch.Tensor, num_classes: int):
        """Training arrays in the form ``grad`` wants: x with a ones column (so the flat
        parameters view as one (d+1, C) matrix) and one-hot targets."""
        ones = torch.ones(x.shape[0], 1, dtype=x.dtype, device=x.device)
        onehot = F.one_hot(y, num_classes).to(x.dtype)
        return torch.cat([x.reshape(x.shape[0], -1), ones], dim=1), onehot

    def grad(self, flat: torch.Tensor, x_aug: torch.Tensor, onehot: torch.Tensor,
             mask: torch.Tensor | None = None, noise=None) -> torch.Tensor:
        """Stacked mean cross-entropy gradients (K, P) on prepared batches (K, b, d+1)."""
        k = flat.shape[0]
        # Both products run with the narrow class dimension leading, (K, C, d+1): CPU batched
        # GEMM is 2-4x faster in that layout for d = 785, C = 10 than with C trailing, and the
        # two small transposes of the parameters and the gradient cost far less than they save.
        w_t = flat.view(k, self.d + 1, self.c).transpose(1, 2).contiguous()
        g = torch.softmax(torch.bmm(x_aug, w_t.transpose(1, 2)), dim=-1).sub_(onehot)  # dCE/dlogits
        if mask is None:
            g.div_(x_aug.shape[1])
        else:
            m = mask.to(g.dtype)
            g.mul_((m / m.sum(1, keepdim=True)).unsqueeze(-1))
        g_t = torch.bmm(g.transpose(1, 2).contiguous(), x_aug)
        return g_t.transpose(1, 2).reshape(k, -1)

    def grad_norm_bound(self, row_norms: torch.Tensor) -> float:
        """A bound on every mini-batch gradient's norm, given the prepared rows' norms ‖x_i‖.

        The gradient is Σ_i ω_i (p_i − e_{y_i}) x_iᵀ with weights ω_i ≥ 0 summing to 1, and
        ‖p − e_y‖ ≤ √2 for any softmax output p, so its Frobenius norm is at most
        √2 · max_i ‖x_i‖. When that is below the clipping threshold, clipping never acts.
        """
        return math.sqrt(2.0) * float(row_norms.max())

    def sgd(self, flat: torch.Tensor, batches, steps, runs, clip_norm: float | None = None) -> torch.Tensor:
        """Local SGD for all K rows of ``flat`` at once: the linear model's fused solver.

        ``steps`` is an int, or a (K,) tensor of per-row step counts: a row that has done its
        count is left as it is while the others go on. ``batches(s, rows=None)`` gives step s's prepared
        ``(x_aug (K, b, d+1), onehot (K, b, C), mask, row_norms)`` with ``row_norms`` (K, b) =
        ‖x_i‖ (needed only with ``clip_norm``), for the given rows only. The update is the algorithm's
        (``replicate.fl.sgd``): w ← decay·w + pull·w₀ − lr·clip(∇), with each run's rows, rate and
        coefficients in ``runs`` (``sgd.RunRows``, one per run: one unless runs are batched). Same maths as
        the generic step (tests check they agree).

        Layout: the parameters stay class-major, (K, C, d+1), for the whole call, so both
        products run with the narrow class dimension leading (logits as (K, C, b) = W·xᵀ, the
        update as one ``baddbmm`` of (K, C, b)·(K, b, d+1)), which CPU batched GEMM does 2–3x
        faster than the (K, b, d+1)·(K, d+1, C) layout, and no step transposes anything.
        Clipping: ‖∇‖ ≤ Σ_i ω_i ‖p_i − e_{y_i}‖·‖x_i‖ costs K·b·C to evaluate; only at steps
        where that bound reaches ``clip_norm`` for some client of a run is that run's gradient formed
        explicitly and its exact norm taken. Elsewhere clipping is a no-op either way.
        Several runs (``fused_runs``) compute every row exactly as its run alone would.
        """
        k = flat.shape[0]
        w = flat.reshape(k, self.d + 1, self.c).transpose(1, 2).contiguous()
        step = run_step(w, runs[0]) if len(runs) == 1 else fused_runs.Step(w, runs)
        counts = steps if torch.is_tensor(steps) else None
        live = k  # rows still working; counts only change at a row's last step, so track them lazily
        idx = None
        for s in range(int(counts.max()) if counts is not None else steps):
            if counts is not None and live and int((counts > s).sum()) != live:
                idx = (counts > s).nonzero().squeeze(1)  # only the rows still working: no wasted gathers or GEMMs
                live = idx.numel()
            if idx is None:
                step(w, *batches(s), clip_norm=clip_norm)
                continue
            sub = w.index_select(0, idx)
            step(sub, *batches(s, idx), clip_norm=clip_norm, rows=idx)
            w.index_copy_(0, idx, sub)
        return w.transpose(1, 2).reshape(k, -1)

    def loss_and_grad(self, flat, x, y, mask=None, noise=None):
        x_aug, onehot = self.prepare(x.reshape(-1, x.shape[-1]), y.reshape(-1), self.c)
        x_aug = x_aug.view(*x.shape[:-1], self.d + 1)
        onehot = onehot.view(*y.shape, self.c)
        logp = torch.log_softmax(torch.bmm(x_aug, flat.view(flat.shape[0], self.d + 1, self.c)), -1)
        nll = -(logp * onehot).sum(-1)
        m = torch.ones_like(nll) if mask is None else mask.to(nll.dtype)
        return (nll * m).sum(1) / m.sum(1), self.grad(flat, x_aug, onehot, mask)
