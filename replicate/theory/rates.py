"""Convergence rate ρ(κ) of Table 2 (Theorem 3, via Lessard, Recht & Packard 2016,
Proposition 1) and the suboptimality ε of eq. (17) (spec §4, §5).

ServerOpt names: ``"gd"`` (no momentum), ``"nesterov"``, ``"heavyball"``. The
paper's Nesterov row is lost; ``nesterov="optimal"`` (LRP's optimal tuning,
ρ = 1 - 2/√(3κ+1)) is the default and ``"standard"`` (ρ = 1 - 1/√κ) the alternative.
"""
from __future__ import annotations

import numpy as np

from replicate.core.errors import ReplicateError

SERVERS = ("gd", "nesterov", "heavyball")
NESTEROV_TUNINGS = ("optimal", "standard")


def _check(server, nesterov):
    if server not in SERVERS:
        raise ReplicateError(f"server must be one of {SERVERS}, got {server!r}")
    if nesterov not in NESTEROV_TUNINGS:
        raise ReplicateError(f"nesterov tuning must be one of {NESTEROV_TUNINGS}, got {nesterov!r}")


def rho_of_kappa(kappa, server: str = "gd", nesterov: str = "optimal"):
    """ρ(κ) of Table 2: (κ-1)/(κ+1), 1 - 2/√(3κ+1) (or 1 - 1/√κ), (√κ-1)/(√κ+1)."""
    _check(server, nesterov)
    kappa = np.asarray(kappa, dtype=float)
    if server == "gd":
        return (kappa - 1.0) / (kappa + 1.0)
    if server == "heavyball":
        return (np.sqrt(kappa) - 1.0) / (np.sqrt(kappa) + 1.0)
    if nesterov == "optimal":
        return 1.0 - 2.0 / np.sqrt(3.0 * kappa + 1.0)
    return 1.0 - 1.0 / np.sqrt(kappa)


def kappa_of_rho(rho, server: str = "gd", nesterov: str = "optimal"):
    """Inverse of :func:`rho_of_kappa` on ρ ∈ [0, 1) (every row of Table 2 is increasing in κ)."""
    _check(server, nesterov)
    rho = np.asarray(rho, dtype=float)
    if server == "gd":
        return (1.0 + rho) / (1.0 - rho)
    if server == "heavyball":
        return ((1.0 + rho) / (1.0 - rho)) ** 2
    if nesterov == "optimal":
        return (4.0 / (1.0 - rho) ** 2 - 1.0) / 3.0
    return 1.0 / (1.0 - rho) ** 2


def server_tuning(mu_s: float, L_s: float, server: str = "gd", nesterov: str = "optimal"):
    """(η, β) achieving Table 2 for a surrogate with strong convexity μ̃ and smoothness L̃ (spec §4)."""
    _check(server, nesterov)
    kappa = L_s / mu_s
    if server == "gd":
        return 2.0 / (L_s + mu_s), 0.0
    if server == "heavyball":
        root = (np.sqrt(kappa) - 1.0) / (np.sqrt(kappa) + 1.0)
        return 4.0 / (np.sqrt(L_s) + np.sqrt(mu_s)) ** 2, root**2
    if nesterov == "optimal":
        s = np.sqrt(3.0 * kappa + 1.0)
        return 4.0 / (3.0 * L_s + mu_s), (s - 2.0) / (s + 2.0)
    return 1.0 / L_s, (np.sqrt(kappa) - 1.0) / (np.sqrt(kappa) + 1.0)


def iteration_radius(h, eta: float, beta: float, server: str = "gd"):
    """Spectral radius of one ServerOpt step on a quadratic mode with curvature h.

    GD: 1 - ηh. Heavy-ball: roots of z² - (1+β-ηh)z + β. Nesterov (Lessard form,
    y = x_t + β(x_t - x_{t-1}), x_{t+1} = y - η∇f(y)): roots of
    z² - (1+β)(1-ηh)z + β(1-ηh). Used to verify Table 2 independently of its formulas.
    """
    _check(server, "optimal")
    h = np.asarray(h, dtype=float)
    if server == "gd":
        return np.abs(1.0 - eta * h)
    if server == "heavyball":
        trace, det = 1.0 + beta - eta * h, beta * np.ones_like(h)
    else:
        trace, det = (1.0 + beta) * (1.0 - eta * h), beta * (1.0 - eta * h)
    disc = np.sqrt((trace**2 - 4.0 * det).astype(complex))
    return np.maximum(np.abs((trace + disc) / 2.0), np.abs((trace - disc) / 2.0))


def eps_of_omega(omega):
    """Normalised distance between minimisers, (√ω - 1)/(√ω + 1) (Lemma 5 without ζ and its constant)."""
    root = np.sqrt(np.asarray(omega, dtype=float))
    return (root - 1.0) / (root + 1.0)


def eps_of_kappa(kappa, condition):
    """Suboptimality of eq. (17): ε(κ) = (√(L/μ) - √κ)/(√(L/μ) + √κ), i.e. ω = (L/μ)/κ (Lemma 6)."""
    return eps_of_omega(np.asarray(condition, dtype=float) / np.asarray(kappa, dtype=float))
