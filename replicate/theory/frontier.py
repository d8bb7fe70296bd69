"""Convergence-accuracy Pareto frontiers (Section 5, Appendix D; spec §5 "key
structural fact", §6).

An operating point (γ, K, α, a, ServerOpt) maps to (ρ, ε): ρ from Table 2 at the
surrogate's κ, ε from eq. (17) (or from ω, Lemma 5 form, for simulated spectra).
"""
from __future__ import annotations

import numpy as np

from replicate.core.errors import ReplicateError
from replicate.theory.rates import eps_of_kappa, eps_of_omega, kappa_of_rho, rho_of_kappa


def operating_point(kappa, condition, server: str = "gd", nesterov: str = "optimal", omega=None):
    """(ρ, ε) for surrogate condition number κ; ε from ω when given (Appendix D.1), else eq. (17)."""
    rho = rho_of_kappa(kappa, server, nesterov)
    eps = eps_of_kappa(kappa, condition) if omega is None else eps_of_omega(omega)
    return rho, eps


def kappa_grid(kappa_min: float, kappa_max: float, n: int) -> np.ndarray:
    """Geometric grid on [κ_min, κ_max], the parameter of the universal frontier curve."""
    if not 1.0 <= kappa_min <= kappa_max:
        raise ReplicateError(f"need 1 <= kappa_min <= kappa_max, got {kappa_min}, {kappa_max}")
    return np.geomspace(kappa_min, kappa_max, n)


def gamma_grid(gamma_max: float, n: int, lowest: float = 1e-4, highest: float = 1.0 - 1e-9) -> np.ndarray:
    """n client learning rates in (0, γ_max): log-spaced from ``lowest``·γ_max to ``highest``·γ_max."""
    return gamma_max * np.geomspace(lowest, highest, n)


def steps_grid(K_max: int, n: int) -> np.ndarray:
    """Distinct integers K in [1, K_max], roughly log-spaced."""
    return np.unique(np.round(np.geomspace(1, K_max, n)).astype(int))


def pareto_mask(rho, eps) -> np.ndarray:
    """Points not dominated by another one (smaller-or-equal ρ and ε, one strictly)."""
    rho, eps = np.asarray(rho, dtype=float), np.asarray(eps, dtype=float)
    order = np.lexsort((eps, rho))
    keep = np.zeros(rho.size, dtype=bool)
    best = np.inf
    for i in order:
        if eps[i] < best:
            keep[i], best = True, eps[i]
    return keep


def gap_to_curve(rho, eps, ref_rho, ref_eps) -> np.ndarray:
    """|ε - ε_ref(ρ)| with ε_ref linearly interpolated on a reference curve; NaN outside its ρ-range."""
    order = np.argsort(ref_rho)
    ref_rho, ref_eps = np.asarray(ref_rho)[order], np.asarray(ref_eps)[order]
    rho = np.asarray(rho, dtype=float)
    inside = (rho >= ref_rho[0]) & (rho <= ref_rho[-1])
    gap = np.abs(np.asarray(eps) - np.interp(rho, ref_rho, ref_eps))
    return np.where(inside, gap, np.nan)


def mirror_defect(rho, eps, condition, server: str, nesterov: str = "optimal") -> np.ndarray:
    """How far each point's mirror image (ε, ρ) lies from the analytic frontier, in ε.

    For a point (ρ_i, ε_i), the frontier's ε at ρ = ε_i is ε(κ(ε_i)) with κ(·) the inverse
    of Table 2; the curve is symmetric about ρ = ε iff this equals ρ_i for every point.
    """
    mirrored = eps_of_kappa(kappa_of_rho(np.asarray(eps), server, nesterov), condition)
    return np.abs(mirrored - np.asarray(rho))
