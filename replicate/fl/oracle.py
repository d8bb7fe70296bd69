"""The sequential reference: one client at a time, one step at a time, autograd, plain tensors.

Used by tests (the engine must match it, for every algorithm) and by
``python -m replicate bench`` as the baseline. It shares the engine's round plan,
mini-batch draws and dropout streams and drives the algorithm's own client functions
with one-row states, but computes every gradient by autograd on the client's scalar
loss, runs each client exactly its own number of steps, and uses no fused solver, no
stacking and no masking — so any difference comes from the engine's vectorized
execution (batched gradients, gathers, masking of finished clients, fused solvers).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from replicate.fl import sgd
from replicate.fl.engine import run
from replicate.fl.local_steps import Trainer


def sequential_train(problem, algorithm, state, ctx, clients, batches, objective, dropout=None, execution=None):
    """Train each client of ``state`` in turn, step by step, with autograd gradients (``dropout(s, batch)``: the
    engine's noise stream)."""
    steps = ctx.steps.tolist()
    for j, k in enumerate(clients.tolist()):
        row = {name: value[j:j + 1].clone() for name, value in state.items()}
        client_ctx = ctx.rows(torch.tensor([j], device=ctx.steps.device))
        for s in range(steps[j]):
            rows, noise = None, None
            if batches is not None:
                index, mask = batches.step(s)
                rows = index[j] if mask is None else index[j][mask[j]]
                full = None if dropout is None else dropout(s, (index, mask))
                if full is not None:
                    noise = full[j] if mask is None else full[j][mask[j]]

            row = algorithm.client_step(row, _autograd(problem, objective, k, rows, noise),
                                        replace(client_ctx, step=ctx.step + s))
        for name, value in row.items():
            state[name][j:j + 1] = value
    return state


def _autograd(problem, objective, k, rows, noise=None):
    """Client k's local-objective gradient on ``rows`` (None = all its data) by autograd, row by row."""
    def grad(w):
        out = []
        for w_row in w:  # one parameter vector at a time, like a client would
            w_row = w_row.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(problem.client_loss(w_row, k, rows, noise), w_row)
            if objective.clip_norm is not None:
                g = g * sgd.clip_factor(torch.linalg.vector_norm(g), objective.clip_norm)
            if objective.weight_decay:
                g = g + objective.weight_decay * w_row.detach()
            out.append(g)
        return torch.stack(out)

    return grad


def full_gradients(problem, clients, objective):
    """``RoundContext.full_grad`` client by client: autograd on each client's whole training set."""
    batch = problem.full_batch(clients)

    def full_grad(w):
        out = []
        for j, k in enumerate(clients.tolist()):
            rows = None if batch is None else (batch[0][j] if batch[1] is None else batch[0][j][batch[1][j]])
            out.append(_autograd(problem, objective, k, rows)(w[j:j + 1]))
        return torch.cat(out)

    return full_grad


SEQUENTIAL = Trainer(sequential_train, full_gradients, fuses=False)


def run_sequential(problem, algorithm, work, schedule, **kwargs):
    """``engine.run`` with the client-by-client, autograd solver."""
    return run(problem, algorithm, work, schedule, trainer=SEQUENTIAL, **kwargs)
