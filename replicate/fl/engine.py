"""The round loop, with all of a round's sampled clients trained together.

Clients are a tensor dimension: the m sampled clients' parameters form one
``(m, P)`` tensor and every local step is a handful of batched operations
(gather the m mini-batches, one batched gradient, one update), so the only
Python loops are over rounds and local steps. ``replicate.fl.oracle`` runs the same
maths client by client; tests check the two agree.

Adding an algorithm touches ``replicate/algorithms``, not this loop: an algorithm
supplies ``plan`` (sampling), ``coefficients`` (message weights, or None),
``init_state`` and ``server_step``.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.fl.schedules import LRSchedule


@dataclass(frozen=True)
class ClientUpdate:
    """Local solver settings (names as in the papers where they exist)."""

    steps: int  # E: local SGD steps per round
    batch_size: int | None = None  # b; None = full local gradient
    weight_decay: float = 0.0  # λ, added to the gradient as λw (inside the optimiser)
    clip_norm: float | None = None  # clip the loss gradient's norm before weight decay
    prox_mu: float = 0.0  # μ of FedProx: adds μ(w − w_t)

    def __post_init__(self):
        if self.steps < 1:
            raise ReplicateError(f"local steps (E) must be >= 1, got {self.steps}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ReplicateError(f"batch size must be >= 1 or None (full batch), got {self.batch_size}")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def clip_(g: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Per-row version of ``torch.nn.utils.clip_grad_norm_`` (same 1e-6 guard)."""
    norms = torch.linalg.vector_norm(g, dim=-1, keepdim=True)
    return g.mul_(torch.clamp(max_norm / (norms + 1e-6), max=1.0))


def local_update(problem, global_flat, plan, update: ClientUpdate, lr: float, batches,
                 coefficients: torch.Tensor | None = None, fused: bool = True):
    """Run ``update.steps`` local steps for all clients of ``plan`` at once.

    Returns the final local models ``(m, P)`` and, when ``coefficients`` (a_s) are
    given, the message Σ_s a_s g_s each client would send (Charles & Konečný 2021).
    With ``fused`` (and no message to collect) a problem's own solver (``local_sgd``,
    e.g. the linear model's, which keeps its parameters in a faster layout across steps)
    replaces the generic step below; ``fused=False`` forces the generic step.
    """
    clients = plan.clients.to(global_flat.device)
    if fused and coefficients is None and hasattr(problem, "local_sgd"):
        rates = lr if plan.lr_scale is None else lr * plan.lr_scale
        w = problem.local_sgd(global_flat, clients, update, rates, batches)
        if w is not None:
            return w, None
    m = clients.numel()
    w = global_flat.unsqueeze(0).repeat(m, 1)
    step_lr = None
    if plan.lr_scale is not None:
        step_lr = (lr * plan.lr_scale).to(w.dtype).to(w.device).unsqueeze(1)
    message = torch.zeros_like(w) if coefficients is not None else None
    for s in range(update.steps):
        g = problem.grad(w, clients, None if batches is None else batches.step(s))
        if update.clip_norm is not None:
            clip_(g, update.clip_norm)
        if update.weight_decay:
            g.add_(w, alpha=update.weight_decay)
        if update.prox_mu:
            g.add_(w - global_flat, alpha=update.prox_mu)
        if message is not None:
            message.add_(g, alpha=float(coefficients[s]))
        if step_lr is None:
            w.sub_(g, alpha=lr)
        else:
            w.addcmul_(step_lr, g, value=-1.0)
    return w, message


def run(problem, algorithm, update: ClientUpdate, schedule: LRSchedule, *, rounds: int,
        seed: int = 0, eval_every: int = 1, progress: bool = False, desc: str | None = None,
        local=local_update, return_params: bool = False, extra_metrics=None, stop=None):
    """Train for ``rounds`` rounds; metrics before every ``eval_every``-th round and at the end.

    Row r holds the global model's metrics before round r (row ``rounds`` = final model),
    as the authors' code logs them. ``local`` swaps the client solver (the oracle uses it).
    With ``return_params`` the final global parameters come back too: ``(history, params)``.
    ``extra_metrics(problem, params) -> dict`` adds columns to every evaluated row.
    ``stop(row) -> bool`` ends training at the first evaluated row it accepts (e.g. a target
    loss reached), which is then the last row: rounds-to-target sweeps need no more.
    """
    if rounds < 1:
        raise ReplicateError(f"rounds must be >= 1, got {rounds}")
    weights = problem.weights()
    flat = problem.init(seed)
    state = algorithm.init_state(flat)
    coefficients = algorithm.coefficients(update.steps)
    device = flat.device
    rows = []

    def evaluate(r):
        extra = extra_metrics(problem, flat) if extra_metrics is not None else {}
        rows.append({"round": r, "lr": schedule(r), **problem.evaluate(flat), **extra})

    for r in tqdm(range(rounds), desc=desc, disable=not progress, leave=False, mininterval=1.0):
        if r % eval_every == 0:
            evaluate(r)
            if stop is not None and stop(rows[-1]):
                break
        plan = algorithm.plan(weights, seed, r)
        batches = problem.draw_batches(plan.clients.to(device), update.steps, update.batch_size,
                                       rng.generator(seed, "batches", r, device=device))
        local_models, message = local(problem, flat, plan, update, schedule(r), batches, coefficients)
        flat, state = algorithm.server_step(flat, local_models, message, plan, state)
    else:
        evaluate(rounds)
    history = pd.DataFrame(rows)
    return (history, flat.detach().cpu()) if return_params else history
