"""Condition numbers of the surrogate loss (Section 4.1, Lemmas 2-4, 6) and the
random spectra of Appendix D.1 (spec §3, §5 Lemma 6, §6.5).

All functions are numpy and broadcast over their array arguments. μ → ``mu``,
L → ``L``, γ → ``gamma``, K → ``K`` (number of local steps), α → ``alpha``.
"""
from __future__ import annotations

import numpy as np

from replicate.core.errors import ReplicateError
from replicate.theory.surrogate import distortion_eigenvalue, fedavg_q, maml_q


def gamma_max_fedavg(L: float, alpha: float = 0.0) -> float:
    """Largest client learning rate of Lemma 3 / Theorem 3: γ < 1/(L + α)."""
    return 1.0 / (L + alpha)


def gamma_max_maml(L: float, K, alpha: float = 0.0):
    """Largest client learning rate of Lemma 4 (guaranteed MAML regime): γ ≤ 1/(KL + α)."""
    return 1.0 / (np.asarray(K, dtype=float) * L + alpha)


def _check_regime(gamma, limit, name):
    if np.any(np.asarray(gamma) < 0) or np.any(np.asarray(gamma) > np.asarray(limit) * (1 + 1e-12)):
        raise ReplicateError(f"{name} holds only for 0 <= gamma <= {name} limit; got gamma outside it")


def kappa_fedavg(mu, L, gamma, K, alpha=0.0):
    """κ(1_K, γ, α) of Lemma 3, eq. (11).

    κ = L(α+μ)[1-(1-γ(α+L))^K] / (μ(α+L)[1-(1-γ(α+μ))^K]) = p(L)/p(μ), valid for
    γ ≤ 1/(L+α); it equals L/μ at γ = 0 or K = 1.
    """
    _check_regime(gamma, gamma_max_fedavg(L, alpha), "eq. (11)")
    return (L * fedavg_q(L, gamma, K, alpha)) / (mu * fedavg_q(mu, gamma, K, alpha))


def kappa_maml(mu, L, gamma, K, alpha=0.0):
    """κ(e_K, γ, α) of Lemma 4, eq. (13): (L/μ) ((1-γ(α+L)) / (1-γ(α+μ)))^{K-1}, for γ ≤ 1/(KL+α)."""
    _check_regime(gamma, gamma_max_maml(L, K, alpha), "eq. (13)")
    return (L * maml_q(L, gamma, K, alpha)) / (mu * maml_q(mu, gamma, K, alpha))


def kappa_min_fedavg(mu, L, alpha=0.0):
    """inf κ over K ≥ 1 and γ < 1/(L+α) for a = 1_K: L(α+μ)/(μ(α+L)), the K → ∞ limit (spec §3)."""
    return L * (alpha + mu) / (mu * (alpha + L))


def kappa_min_fedavg_fixed_K(mu, L, K, alpha=0.0):
    """inf κ over γ < 1/(L+α) at fixed K: the γ → 1/(L+α) limit of eq. (11); > 1 for finite K."""
    return kappa_fedavg(mu, L, gamma_max_fedavg(L, alpha), K, alpha)


def kappa_min_maml(mu, L, K):
    """κ at the edge γ = 1/(KL+α) of the guaranteed MAML regime: (L/μ)((K-1)L/(KL-μ))^{K-1} (spec §3)."""
    K = np.asarray(K, dtype=float)
    return (L / mu) * ((K - 1.0) * L / (K * L - mu)) ** (K - 1.0)


def spectral_condition(eigenvalues, a, gamma: float, alpha: float = 0.0):
    """(κ, ω) from the eigenvalues of A via Lemma 9: κ = cond(QA) as in eq. (9), ω = cond(Q).

    ``eigenvalues`` is the spectrum of one A (Appendix D.1) or a dense grid on [μ, L]
    (then κ is eq. (9) itself). ``a`` is an explicit coefficient vector.
    """
    q = distortion_eigenvalue(eigenvalues, a, gamma, alpha)
    p = np.asarray(eigenvalues, dtype=float) * q
    if np.any(q <= 0):
        raise ReplicateError("Q is not positive definite at this gamma (Lemma 1 needs gamma < 1/(L+alpha))")
    return p.max() / p.min(), q.max() / q.min()


def family_condition(eigenvalues, family: str, gamma, K, alpha: float = 0.0):
    """Vectorised (κ, ω) over a γ-grid for a = 1_K (``"fedavg"``) or a = e_K (``"maml"``).

    Same quantity as :func:`spectral_condition`, but with the closed forms of q so
    that long γ-grids and large K are cheap. Returns arrays shaped like ``gamma``.
    """
    q_of = {"fedavg": fedavg_q, "maml": maml_q}.get(family)
    if q_of is None:
        raise ReplicateError(f"family must be 'fedavg' or 'maml', got {family!r}")
    lam = np.asarray(eigenvalues, dtype=float)[:, None]
    q = q_of(lam, np.atleast_1d(gamma)[None, :], K, alpha)
    if np.any(q <= 0):
        raise ReplicateError("Q is not positive definite on this gamma grid (need gamma < 1/(L+alpha))")
    p = lam * q
    return p.max(0) / p.min(0), q.max(0) / q.min(0)


def random_spectrum(d: int, mu: float, L: float, rng: np.random.Generator) -> np.ndarray:
    """Eigenvalues of the random Hessian of Appendix D.1.

    B has i.i.d. N(0, 1) entries and A = s(B + Bᵀ) + tI with the unique s > 0, t giving
    λ_min(A) = μ and λ_max(A) = L. Returned sorted ascending; only the spectrum of A
    enters κ and ω (Lemma 9), so the eigenvectors are not kept.
    """
    B = rng.standard_normal((d, d))
    sym = np.linalg.eigvalsh(B + B.T)
    s = (L - mu) / (sym[-1] - sym[0])
    eig = s * (sym - sym[0]) + mu
    eig[-1] = L  # remove the last rounding error: the construction pins both ends
    return eig


def random_hessian(d: int, mu: float, L: float, rng: np.random.Generator) -> np.ndarray:
    """The matrix A = s(B + Bᵀ) + tI of Appendix D.1 itself (for tests and small problems)."""
    B = rng.standard_normal((d, d))
    S = B + B.T
    sym = np.linalg.eigvalsh(S)
    s = (L - mu) / (sym[-1] - sym[0])
    return s * S + (mu - s * sym[0]) * np.eye(d)
