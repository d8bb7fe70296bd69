"""A small reference LocalUpdate (Algorithms 1-2) on federated quadratics.

Charles & Konečný 2021, Section 2.1 and Appendix A (spec §1.1-1.3, §2.1). The
clients are stacked in dim 0 of every tensor and run in lock-step; only the K
local steps and the rounds are Python loops. The client sends Σ_k a_k g_k, never
the model delta, and ServerOpt is GD with heavy-ball or Nesterov momentum in the
velocity form (v ← βv - ηq; x ← x + v, or x ← x + βv - ηq for Nesterov). The clients
are a :class:`replicate.data.quadratic.QuadraticClients`: per-example losses
ℓ(x; z) = ½(x − c_z)ᵀA_z(x − c_z) of eq. 1 (``QuadraticClients.from_examples``).

Symbols → names: a → ``a``, γ → ``gamma``, α → ``alpha``, B → ``batch_size``,
M → ``clients_per_round``, η → ``ServerOpt.lr``, β → ``ServerOpt.momentum``.
This module is the oracle the theory tests run against; it does not use the engine.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from replicate.core.errors import ReplicateError
from replicate.data.quadratic import QuadraticClients
from replicate.theory.surrogate import distortion_eigenvalue, local_steps

DTYPE = torch.float64


def _gradients(problem: QuadraticClients, x: torch.Tensor, batch_size, generator) -> torch.Tensor:
    """Mini-batch gradient of f_c at x_c for every client; full batch when batch_size is None."""
    if batch_size is None:
        return problem.grad_clients(x)
    C, n = problem.example_hessians.shape[:2]
    pick = torch.randint(n, (C, batch_size), generator=generator)
    rows = torch.arange(C)[:, None]
    A, r = problem.example_hessians[rows, pick], problem.example_linear[rows, pick]
    return torch.einsum("cbij,cj->ci", A, x) / batch_size - r.mean(1)


def client_update(problem: QuadraticClients, x: torch.Tensor, a, gamma: float, alpha: float = 0.0,
                  batch_size: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Algorithm 2 for all clients at once; returns the messages q_c = Σ_k a_k g_k, shape (C, d).

    g_k is the mini-batch gradient of f_c + (α/2)‖· - x‖² at the local iterate x_k and
    x_{k+1} = x_k - γ g_k, for k = 1..K(a).
    """
    a = np.asarray(a, dtype=float)
    anchor = torch.as_tensor(x, dtype=DTYPE).expand(problem.num_clients, problem.dim)
    local = anchor.clone()
    message = torch.zeros_like(local)
    for k in range(local_steps(a)):
        g = _gradients(problem, local, batch_size, generator) + alpha * (local - anchor)
        if a[k] != 0.0:
            message = message + a[k] * g
        local = local - gamma * g
    return message


@dataclass(frozen=True)
class ServerOpt:
    """Server GD with optional heavy-ball or Nesterov momentum (spec §1.3)."""

    lr: float  # η
    momentum: float = 0.0  # β
    nesterov: bool = False

    def step(self, x: torch.Tensor, velocity: torch.Tensor, q: torch.Tensor):
        """One step on the pseudo-gradient q; returns (x_next, velocity_next)."""
        velocity = self.momentum * velocity - self.lr * q
        if self.nesterov:
            return x + self.momentum * velocity - self.lr * q, velocity
        return x + velocity, velocity


def local_update(problem: QuadraticClients, x0, a, gamma: float, server: ServerOpt, rounds: int,
                 alpha: float = 0.0, batch_size: int | None = None, clients_per_round: int | None = None,
                 seed: int = 0) -> torch.Tensor:
    """Algorithm 1; returns the server iterates x_0..x_T, shape (T + 1, d).

    With ``clients_per_round=None`` every client takes part and q_t is the P-weighted
    mean (the deterministic LocalUpdate of Section 4.2); otherwise M clients are drawn
    from P without replacement and averaged unweighted.
    """
    if clients_per_round is not None and not 1 <= clients_per_round <= problem.num_clients:
        raise ReplicateError(f"clients_per_round must be in 1..{problem.num_clients}, got {clients_per_round}")
    generator = torch.Generator().manual_seed(seed)
    x = torch.as_tensor(np.asarray(x0), dtype=DTYPE).clone()
    velocity = torch.zeros_like(x)
    iterates = [x]
    for _ in range(rounds):
        messages = client_update(problem, x, a, gamma, alpha, batch_size, generator)
        if clients_per_round is None:
            q = problem.weights @ messages
        else:
            chosen = torch.multinomial(problem.weights, clients_per_round, replacement=False, generator=generator)
            q = messages[chosen].mean(0)
        x, velocity = server.step(x, velocity, q)
        iterates.append(x)
    return torch.stack(iterates)


def observed_rate(iterates, memory: int = 1, floor: float = 1e-9) -> float:
    """ρ measured from a run: spectral radius of the linear map fitted to successive steps.

    The steps δ_t = x_{t+1} - x_t of a deterministic run obey δ_{t+1} = Σ_j M_j δ_{t-j}
    with ``memory`` = 1 for GD and 2 with momentum (no knowledge of x̃* needed). The
    map is fitted by least squares on the steps above the round-off ``floor`` (relative
    to the largest iterate), and its spectral radius is returned.
    """
    x = torch.as_tensor(iterates).detach().cpu().numpy()
    steps = np.diff(x, axis=0)
    keep = np.linalg.norm(steps, axis=1) > floor * np.abs(x).max()
    steps = steps[: int(np.argmin(keep)) if not keep.all() else len(steps)]
    if len(steps) < memory + 2:
        raise ReplicateError("too few informative rounds to measure a rate; run more rounds")
    state = np.concatenate([steps[memory - 1 - j: len(steps) - 1 - j] for j in range(memory)], axis=1)
    target = steps[memory:]
    fitted = np.linalg.lstsq(state, target, rcond=1e-12)[0].T
    d = steps.shape[1]
    companion = np.zeros((d * memory, d * memory))
    companion[:d] = fitted
    companion[d:, :-d] = np.eye(d * (memory - 1))
    return float(np.abs(np.linalg.eigvals(companion)).max())


def worst_case_problem(mu: float, L: float, zeta: float, a, gamma: float, alpha: float = 0.0) -> QuadraticClients:
    """A 3-d, 2-client problem on which both the rate and the distance bound are attained.

    Coordinates 0-1 carry the tightness instance of Appendix B.3 (every client has
    curvatures L and μ there, optimum 0), so the surrogate has μ̃ = p(μ) and L̃ = p(L)
    exactly. Coordinate 2 carries the construction of Appendix C.2: client 1 has
    curvature μ and optimum +ζ, client 2 curvature L and optimum -ζ, with weights such
    that E_π q = √(q(μ) q(L)); then |x̃* - x*| = 2ζ(√ω - 1)/(√ω + 1), ω = q(μ)/q(L).
    """
    q_mu, q_L = distortion_eigenvalue([mu, L], a, gamma, alpha)
    pi = np.array([np.sqrt(q_L), np.sqrt(q_mu)]) / (np.sqrt(q_mu) + np.sqrt(q_L))
    weights = pi / np.array([mu, L])
    hessians = np.stack([np.diag([L, mu, mu]), np.diag([L, mu, L])])
    optima = np.array([[0.0, 0.0, zeta], [0.0, 0.0, -zeta]])
    return QuadraticClients.from_clients(hessians, optima, weights / weights.sum())


def random_problem(d: int, clients: int, mu: float, L: float, zeta: float, rng: np.random.Generator,
                   examples: int = 1) -> QuadraticClients:
    """Random client Hessians with spectra in [μ, L] (both ends attained by every client
    when ``examples`` = 1) in random, non-commuting eigenbases, and optima in the ζ-ball.

    With ``examples`` > 1 each client holds several examples whose A_z, c_z average to
    such a client, so mini-batch gradients are noisy (Theorem 1 tests).
    """
    R = np.linalg.qr(rng.standard_normal((clients, examples, d, d)))[0]
    eig = np.concatenate([np.broadcast_to([mu, L], (clients, examples, 2)),
                          rng.uniform(mu, L, (clients, examples, d - 2))], axis=-1)
    A = np.einsum("cnij,cnj,cnkj->cnik", R, eig, R)
    A = 0.5 * (A + np.swapaxes(A, -1, -2))
    centres = rng.standard_normal((clients, examples, d))
    centres *= zeta * rng.uniform(0.2, 1.0, (clients, examples, 1)) / np.linalg.norm(centres, axis=-1, keepdims=True)
    w = np.full(clients, 1.0 / clients)
    return QuadraticClients.from_examples(A, centres, w)
