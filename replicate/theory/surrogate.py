"""Distortion matrices and surrogate losses of LocalUpdate on quadratics.

Charles & Konečný 2021, Section 3 (spec §1.4, §2.2, §3 Lemma 9, §5 Lemma 11).
Symbols → names: a → ``a`` (coefficient vector, ``a[k-1]`` is a_k), γ → ``gamma``
(client learning rate), α → ``alpha`` (proximal strength), A_c → ``hessians``,
c_c → ``optima``, P → ``weights``.

Matrices are torch float64 tensors with the clients stacked in dim 0; the scalar
spectral functions q(λ), p(λ) are numpy and broadcast over λ.
"""
from __future__ import annotations

import numpy as np
import torch

from replicate.core.errors import ReplicateError


def ones(K: int) -> np.ndarray:
    """The coefficient vector 1_K (eq. 5): FedAvg / FedProx / Reptile send Σ_k g_k."""
    if K < 1:
        raise ReplicateError(f"the number of local steps K must be at least 1, got {K}")
    return np.ones(int(K))


def basis(K: int) -> np.ndarray:
    """The coefficient vector e_K (eq. 5): FOMAML sends the K-th local gradient only."""
    a = np.zeros(int(K))
    if K < 1:
        raise ReplicateError(f"the index K of e_K must be at least 1, got {K}")
    a[-1] = 1.0
    return a


def local_steps(a) -> int:
    """K(a) = max{k : a_k ≠ 0} (eq. 4): how many local gradients ClientUpdate computes."""
    a = np.asarray(a, dtype=float)
    nonzero = np.flatnonzero(a)
    if a.ndim != 1 or nonzero.size == 0:
        raise ReplicateError("a coefficient vector must be 1-D with at least one non-zero entry")
    return int(nonzero[-1]) + 1


def distortion_eigenvalue(lam, a, gamma: float, alpha: float = 0.0) -> np.ndarray:
    """q(λ) = Σ_k a_k (1 - γ(α + λ))^{k-1}, the eigenvalue of Q_c for an eigenvalue λ of A_c (eq. 29)."""
    r = 1.0 - gamma * (alpha + np.asarray(lam, dtype=float))
    return np.polynomial.polynomial.polyval(r, np.asarray(a, dtype=float))


def surrogate_eigenvalue(lam, a, gamma: float, alpha: float = 0.0) -> np.ndarray:
    """p(λ) = λ q(λ), the eigenvalue of Q_c A_c (eq. 30)."""
    return np.asarray(lam, dtype=float) * distortion_eigenvalue(lam, a, gamma, alpha)


def fedavg_q(lam, gamma, K, alpha=0.0) -> np.ndarray:
    """Closed form of q(λ) for a = 1_K (eq. 33): (1 - (1 - γ(α+λ))^K) / (γ(α+λ)), K at γ = 0.

    Written with expm1/log1p so that tiny γ and K up to 1e6 stay accurate.
    """
    s = np.asarray(gamma, dtype=float) * (alpha + np.asarray(lam, dtype=float))
    K = np.asarray(K, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = -np.expm1(K * np.log1p(-s)) / s
    return np.where(s == 0, K, geometric)


def maml_q(lam, gamma, K, alpha=0.0) -> np.ndarray:
    """Closed form of q(λ) for a = e_K: (1 - γ(α+λ))^{K-1} (Lemma 4)."""
    return (1.0 - np.asarray(gamma, dtype=float) * (alpha + np.asarray(lam, dtype=float))) ** (
        np.asarray(K, dtype=float) - 1.0)


def distortion_matrix(hessians: torch.Tensor, a, gamma: float, alpha: float = 0.0) -> torch.Tensor:
    """Q_c = Σ_k a_k (I - γ(αI + A_c))^{k-1} for every stacked A_c (eq. 6), by Horner's rule."""
    a = np.asarray(a, dtype=float)
    eye = torch.eye(hessians.shape[-1], dtype=hessians.dtype, device=hessians.device)
    step = eye - gamma * (alpha * eye + hessians)
    Q = torch.zeros_like(hessians) + float(a[-1]) * eye
    for coefficient in a[-2::-1]:
        Q = Q @ step + float(coefficient) * eye
    return Q


def surrogate_gradient(hessians: torch.Tensor, optima: torch.Tensor, Q: torch.Tensor,
                       x: torch.Tensor) -> torch.Tensor:
    """∇f̃_c(x) = Q_c A_c (x - c_c) for every client (eq. 7); returns shape (clients, d)."""
    return torch.einsum("cij,cjk,ck->ci", Q, hessians, x - optima)


def surrogate_loss(hessians: torch.Tensor, optima: torch.Tensor, weights: torch.Tensor,
                   Q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """f̃(x) = E_c ½ (x - c_c)ᵀ Q_c A_c (x - c_c) (eqs. 7-8)."""
    diff = x - optima
    per_client = 0.5 * torch.einsum("ci,cij,cjk,ck->c", diff, Q, hessians, diff)
    return (weights * per_client).sum()


def minimisers(hessians: torch.Tensor, optima: torch.Tensor, weights: torch.Tensor,
               Q: torch.Tensor | None = None):
    """x* = (E A_c)^{-1} E[A_c c_c] and x̃* = (E Q_c A_c)^{-1} E[Q_c A_c c_c] (Lemma 11).

    Returns ``(x_star, x_tilde_star)``; without ``Q`` the second equals the first.
    """
    def solve(H):
        mean_H = torch.einsum("c,cij->ij", weights, H)
        rhs = torch.einsum("c,cij,cj->i", weights, H, optima)
        return torch.linalg.solve(mean_H, rhs)

    x_star = solve(hessians)
    return x_star, (x_star if Q is None else solve(Q @ hessians))
