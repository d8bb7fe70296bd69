"""The sequential reference: one client at a time, autograd, plain tensors.

Used by tests (the engine must match it) and by ``python -m replicate bench``
as the baseline. It shares the engine's round plan and mini-batch draws, so any
difference comes from the vectorized local training or the aggregation.
"""
from __future__ import annotations

import torch

from replicate.fl.engine import ClientUpdate, run


def sequential_local_update(problem, global_flat, plan, update: ClientUpdate, lr: float, batches,
                            coefficients=None):
    """Train each sampled client in turn with autograd; same maths as ``engine.local_update``."""
    locals_, messages = [], []
    scales = plan.lr_scale.tolist() if plan.lr_scale is not None else [1.0] * plan.clients.numel()
    for j, k in enumerate(plan.clients.tolist()):
        w = global_flat.clone()
        message = torch.zeros_like(w)
        client_lr = lr * scales[j]
        for s in range(update.steps):
            rows = None
            if batches is not None:
                index, mask = batches.step(s)
                rows = index[j] if mask is None else index[j][mask[j]]
            w.requires_grad_(True)
            loss = problem.client_loss(w, k, rows)
            (g,) = torch.autograd.grad(loss, w)
            w = w.detach()
            if update.clip_norm is not None:
                g = g * min(1.0, update.clip_norm / (float(torch.linalg.vector_norm(g)) + 1e-6))
            if update.weight_decay:
                g = g + update.weight_decay * w
            if update.prox_mu:
                g = g + update.prox_mu * (w - global_flat)
            if coefficients is not None:
                message = message + float(coefficients[s]) * g
            w = w - client_lr * g
        locals_.append(w)
        messages.append(message)
    message = torch.stack(messages) if coefficients is not None else None
    return torch.stack(locals_), message


def run_sequential(problem, algorithm, update, schedule, **kwargs):
    """``engine.run`` with the client-by-client solver."""
    return run(problem, algorithm, update, schedule, local=sequential_local_update, **kwargs)
