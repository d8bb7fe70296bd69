"""Textbook forms of the algorithms of Table 1, one deterministic round each.

Charles & Konečný 2021, Table 1 and Appendix A (spec §1.4). Each function is
written the way its own paper states it (model averaging, Lookahead's slow
weights, MAML's meta-gradient by automatic differentiation through the inner
steps), with full-batch client gradients, so that it can be compared with one
round of the general :func:`replicate.theory.reference.local_update` under the
coefficient vector and learning rates that Table 1 assigns to it.
"""
from __future__ import annotations

import torch

from replicate.data.quadratic import QuadraticClients


def _local_gd(problem: QuadraticClients, x: torch.Tensor, gamma: float, steps: int, alpha: float = 0.0):
    """``steps`` full-batch (proximal) GD steps from x (shape (d,) or (C, d)) on every client; returns (C, d)."""
    anchor = x.expand(problem.num_clients, problem.dim)
    local = anchor.clone()
    for _ in range(steps):
        local = local - gamma * (problem.grad_clients(local) + alpha * (local - anchor))
    return local


def client_loss(problem: QuadraticClients, x: torch.Tensor) -> torch.Tensor:
    """f_c(x_c) = ½ (x_c - c_c)ᵀ A_c (x_c - c_c) for every client (eq. 3, up to a constant)."""
    diff = x - problem.optima
    return 0.5 * torch.einsum("ci,cij,cj->c", diff, problem.hessians, diff)


def fedavg_round(problem, x, gamma, local_steps):
    """FedAvg / Local SGD (McMahan et al. 2017): average the client models after K local steps."""
    return problem.weights @ _local_gd(problem, x, gamma, local_steps)


def fedprox_round(problem, x, gamma, local_steps, alpha):
    """FedProx (Li et al. 2020): local steps on f_c + (α/2)‖· - x‖², then model averaging."""
    return problem.weights @ _local_gd(problem, x, gamma, local_steps, alpha)


def lookahead_round(problem, x, gamma, local_steps, slow_lr):
    """Lookahead (Zhang et al. 2019) on one client: φ ← φ + β_LA (θ_K - φ)."""
    fast = _local_gd(problem, x, gamma, local_steps)[0]
    return x + slow_lr * (fast - x)


def fedsgd_round(problem, x, server_lr):
    """FedSGD (McMahan et al. 2017): one full-batch gradient per client, averaged, one server step."""
    grad = problem.grad_clients(x.expand(problem.num_clients, -1))
    return x - server_lr * (problem.weights @ grad)


def minibatch_sgd_round(problem, x, lr):
    """(Mini-batch) SGD on f; with full client batches this is gradient descent on f (autograd)."""
    z = x.detach().clone().requires_grad_(True)
    loss = problem.weights @ client_loss(problem, z.expand(problem.num_clients, -1))
    return x - lr * torch.autograd.grad(loss, z)[0]


def fomaml_round(problem, x, gamma, local_steps, server_lr):
    """FOMAML (Finn et al. 2017): K-1 inner steps, then send ∇f_c at the adapted point."""
    adapted = _local_gd(problem, x, gamma, local_steps - 1)
    return x - server_lr * (problem.weights @ problem.grad_clients(adapted))


def maml_gradient(problem: QuadraticClients, x: torch.Tensor, gamma: float, inner_steps: int) -> torch.Tensor:
    """∇_x f_c(U_c(x)) for every client by autograd, U_c = ``inner_steps`` GD steps (Theorem 2).

    Each client differentiates its own copy of x (row c), so one backward pass gives all rows.
    """
    z = x.detach().expand(problem.num_clients, problem.dim).clone().requires_grad_(True)
    meta_loss = client_loss(problem, _local_gd(problem, z, gamma, inner_steps)).sum()
    return torch.autograd.grad(meta_loss, z)[0]


def maml_round(problem, x, gamma, local_steps, server_lr):
    """MAML with K local steps (K-1 inner steps plus the meta-gradient)."""
    return x - server_lr * (problem.weights @ maml_gradient(problem, x, gamma, local_steps - 1))
