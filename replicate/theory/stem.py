"""Complexities of STEM and of its FedAvg special case (Khanduri et al., NeurIPS 2021, §3 and App. A),
from the bounds as the spec RECONSTRUCTS them (spec STEM §2.2-§3, §7): the seed text lost every formula.

With constants and logarithms dropped and L = σ² = 1 (the spec's §2.3 and §3 scalings):

- STEM, the generic bound of Theorem A.10:  E‖∇f(x̄_a)‖² ≲ I/T + 1/(b·K·T)^{2/3};
- FedAvg, Theorem 3.2:  E‖∇f(x̄_a)‖² ≲ 1/√(b·K·T) + (b·K·I²/T)·(σ²/b + ζ²).

The iterations T(ε) to reach ε are the smallest T making every term ≤ ε (constant factors dropped);
per worker, STEM draws b samples an iteration plus the initial batch B = b·I, FedAvg b an iteration;
a round is I iterations. The trade-off curves are eq. (3) (STEM) and eq. (5) (FedAvg) in the
fixed-T form, and their ε-forms on the curve b·I = ε^{-1/2}/K (§2.2, §3; the FedAvg curve's
product is DERIVED in the spec, not stated in the paper).

Symbols → names: ε → ``eps``, b → ``batch`` (mini-batch per local step), I → ``local_updates``,
K → ``workers`` (WNs), T → ``iterations``, ν → ``nu``, ζ² → ``zeta2``, B → ``initial_batch``.
"""
from __future__ import annotations

import numpy as np

from replicate.core.errors import ReplicateError

METHODS = ("stem", "fedavg")


def _check(method: str, nu=None):
    if method not in METHODS:
        raise ReplicateError(f"method must be one of {METHODS}, got {method!r}")
    if nu is not None and not np.all((np.asarray(nu) >= 0) & (np.asarray(nu) <= 1)):
        raise ReplicateError(f"ν must lie in [0, 1], got {nu!r}")


def stationarity_bound(method: str, iterations, batch, local_updates, workers, zeta2: float = 1.0):
    """The reconstructed right side of Theorem A.10 (STEM) or 3.2 (FedAvg), unit constants, L = σ² = 1."""
    _check(method)
    T, b, I, K = (np.asarray(v, dtype=float) for v in (iterations, batch, local_updates, workers))
    if method == "stem":
        return I / T + (b * K * T) ** (-2.0 / 3.0)
    return 1.0 / np.sqrt(b * K * T) + (b * K * I**2 / T) * (1.0 / b + zeta2)


def iterations_to(method: str, eps, batch, local_updates, workers, zeta2: float = 1.0):
    """T(ε): the fewest iterations that bring every term of the bound below ε (unit constants)."""
    _check(method)
    eps, b, I, K = (np.asarray(v, dtype=float) for v in (eps, batch, local_updates, workers))
    if method == "stem":  # I/T ≤ ε and (bKT)^{-2/3} ≤ ε
        return np.maximum(I / eps, eps ** -1.5 / (b * K))
    return np.maximum(1.0 / (b * K * eps**2), b * K * I**2 * (1.0 / b + zeta2) / eps)


def costs(method: str, eps, batch, local_updates, workers, zeta2: float = 1.0) -> dict:
    """Iterations, communication rounds T/I and samples (per worker and in total) to reach ε.

    STEM's per-worker samples are b·T + B with B = b·I (App. A.11, RECONSTRUCTED); FedAvg's b·T.
    """
    T = iterations_to(method, eps, batch, local_updates, workers, zeta2)
    b, I, K = (np.asarray(v, dtype=float) for v in (batch, local_updates, workers))
    per_worker = b * T + (b * I if method == "stem" else 0.0)
    return {"iterations": T, "rounds": T / I, "samples_per_worker": per_worker, "samples": K * per_worker}


def tradeoff(method: str, nu, eps, workers):
    """(b, I) on the optimal trade-off curve b·I = ε^{-1/2}/K, parametrised by ν ∈ [0, 1].

    STEM (§2.2): b = (ε^{-1/2}/K)^{3(1-ν)/(3-ν)}, I = (ε^{-1/2}/K)^{2ν/(3-ν)};
    FedAvg (§3):  b = (ε^{-1/2}/K)^{4(1-ν)/(4-ν)}, I = (ε^{-1/2}/K)^{3ν/(4-ν)}.
    ν = 0: one local update and a large batch (Minibatch STEM); ν = 1: b = O(1), many local updates.
    """
    _check(method, nu)
    nu = np.asarray(nu, dtype=float)
    scale = np.asarray(eps, dtype=float) ** -0.5 / np.asarray(workers, dtype=float)
    if method == "stem":
        return scale ** (3 * (1 - nu) / (3 - nu)), scale ** (2 * nu / (3 - nu))
    return scale ** (4 * (1 - nu) / (4 - nu)), scale ** (3 * nu / (4 - nu))


def tradeoff_at_iterations(method: str, nu, iterations, workers):
    """(b, I) for a budget of T iterations: eq. (3) for STEM, I = (T/K²)^{ν/3}, b = (T/K²)^{(1-ν)/2};
    eq. (5) for FedAvg, I = (T/K³)^{ν/4}, b = (T/K³)^{(1-ν)/3}."""
    _check(method, nu)
    nu = np.asarray(nu, dtype=float)
    T, K = np.asarray(iterations, dtype=float), np.asarray(workers, dtype=float)
    if method == "stem":
        return (T / K**2) ** ((1 - nu) / 2), (T / K**2) ** (nu / 3)
    return (T / K**3) ** ((1 - nu) / 3), (T / K**3) ** (nu / 4)


def exponent(eps, values) -> float:
    """p in values ∝ ε^{-p}: the least-squares slope of log(values) against log(1/ε)."""
    x, y = np.log(1.0 / np.asarray(eps, dtype=float)), np.log(np.asarray(values, dtype=float))
    return float(np.polyfit(x, y, 1)[0])
