"""FedAvg's convergence bounds (Li et al. 2020) and the lecture notes' non-convex bound, as functions of T.

Li, Huang, Yang, Wang & Zhang, "On the Convergence of FedAvg on Non-IID Data", ICLR 2020 (seed 000):
Theorem 1 (eqs. 4-5, full participation), Theorem 2 (eq. 6, partial participation, Scheme I,
C = 4E²G²/K), Theorem 3 (Scheme II: C = (N−K)/(N−1) · 4E²G²/K, balanced p_k = 1/N, or the
transformed scheme with ν, ς), §3.4 eqs. (7)-(8) and App. D.2 (the choice of E).
Cheng's lecture notes (seed 003): Theorem 1 / eq. (3) prints Theorem 1 as
κ/(γ+T−1)·(2B/μ + μγ/2·E‖w_1 − w*‖²) with γ = max{5κ, E}; Theorem 2 / eqs. (5), (14) is a
non-convex bound of the notes' own, for a constant step size η.

Symbols → names: T → ``steps`` (local SGD steps in all, a multiple of E), E → ``local_steps``,
K → ``clients_per_round``, N → ``num_clients``, L → ``L``, μ → ``mu``, κ = L/μ → ``kappa``,
γ → ``gamma``, p_k → ``weights``, σ_k² → ``variances``, G² → ``grad_sq_bound``,
Γ → ``heterogeneity``, ‖w_0 − w*‖² → ``init_dist_sq``, η → ``lr``, F(w̄_0) − F* → ``initial_gap``.
RECONSTRUCTED (not printed in either source) is marked as such below.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from replicate.core.errors import ReplicateError

FORMS = ("paper", "notes")
SCHEMES = ("full", "I", "II")


def gamma(kappa: float, local_steps: int, gamma_kappa_factor: float = 8.0) -> float:
    """γ = max{8κ, E} (Li et al. Theorem 1); the notes print max{5κ, E} (``gamma_kappa_factor=5``)."""
    return max(gamma_kappa_factor * kappa, float(local_steps))


def step_size(t, *, mu: float, kappa: float, local_steps: int, gamma_kappa_factor: float = 8.0):
    """η_t = 2/(μ(γ + t)) of Theorem 1, for step index t (an array or a number)."""
    return 2.0 / (mu * (gamma(kappa, local_steps, gamma_kappa_factor) + np.asarray(t, dtype=float)))


def step_size_conditions(*, L: float, mu: float, local_steps: int, gamma_kappa_factor: float = 8.0,
                         first_step: int = 0) -> dict:
    """Whether η_t meets what the proof (Li et al. App. A.3, notes §6) assumes of it for t ≥ ``first_step``:
    Lemma 1's η_t ≤ 1/(4L), and Lemma 3's non-increasing η_t ≤ 2η_{t+E}. η_t decreases, so the
    first step decides the first; the second is E ≤ γ + t."""
    kappa = L / mu
    eta = float(step_size(first_step, mu=mu, kappa=kappa, local_steps=local_steps,
                          gamma_kappa_factor=gamma_kappa_factor))
    g = gamma(kappa, local_steps, gamma_kappa_factor)
    return {"eta_at_most_1_over_4L": eta <= 1.0 / (4.0 * L) * (1 + 1e-12),
            "eta_at_most_twice_eta_after_E": local_steps <= g + first_step}


def weighted_variance(weights, variances) -> float:
    """Σ_k p_k² σ_k² (Lemma 2)."""
    w = np.asarray(weights, dtype=float)
    return float(w**2 @ np.asarray(variances, dtype=float))


def B_term(*, weights, variances, L: float, heterogeneity: float, grad_sq_bound: float, local_steps: int) -> float:
    """B = Σ_k p_k²σ_k² + 6LΓ + 8(E−1)²G² (Li et al. eq. 5; notes eq. 4)."""
    return (weighted_variance(weights, variances) + 6.0 * L * heterogeneity
            + 8.0 * (local_steps - 1) ** 2 * grad_sq_bound)


def C_term(*, local_steps: int, grad_sq_bound: float, clients_per_round: int | None = None,
           num_clients: int | None = None, scheme: str = "I") -> float:
    """C of Theorem 2 (Scheme I: 4E²G²/K) or Theorem 3 (Scheme II: (N−K)/(N−1)·4E²G²/K); 0 for "full"."""
    if scheme not in SCHEMES:
        raise ReplicateError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if scheme == "full":
        return 0.0
    if not clients_per_round:
        raise ReplicateError(f"scheme {scheme} needs clients_per_round (K)")
    C = 4.0 * local_steps**2 * grad_sq_bound / clients_per_round
    if scheme == "II":
        if not num_clients or num_clients < 2:
            raise ReplicateError("scheme II needs num_clients (N) >= 2")
        C *= (num_clients - clients_per_round) / (num_clients - 1)
    return C


def scheme2_transform(*, L: float, mu: float, variances, grad_sq_bound: float, weights) -> dict:
    """Li et al. §3.3, after Theorem 3: unbalanced p_k under Scheme II by F̃_k = p_k N F_k.

    Theorem 3 then holds with L̃ = νL, μ̃ = ςμ, σ̃_k = νσ_k, G̃ = νG, ν = N max p_k, ς = N min p_k
    (the paper writes σ̃_k = νσ; squared here, since we carry σ_k² and G²).
    """
    p = np.asarray(weights, dtype=float)
    nu, varsigma = len(p) * p.max(), len(p) * p.min()
    return {"L": nu * L, "mu": varsigma * mu, "variances": nu**2 * np.asarray(variances, dtype=float),
            "grad_sq_bound": nu**2 * grad_sq_bound, "weights": np.full(len(p), 1.0 / len(p))}


def fedavg_bound(steps, *, L: float, mu: float, B: float, local_steps: int, init_dist_sq: float, C: float = 0.0,
                 gamma_kappa_factor: float = 8.0, form: str = "paper"):
    """Bound on E[F(w_T)] − F* after T = ``steps`` SGD steps (Theorems 1-3).

    ``form="paper"``: Li et al. eqs. (4)/(6), 2κ/(γ+T)·((B+C)/μ + 2L‖w_0 − w*‖²).
    ``form="notes"``: notes eq. (3), κ/(γ+T−1)·(2(B+C)/μ + μγ/2·‖w_1 − w*‖²), which is what the
    proof gives (with max{a, b} ≤ a + b) before the paper replaces μγ/2 by 2L, a step that
    needs γ ≤ 8κ: the two agree (up to T vs T − 1) when γ = 8κ, and for E > 8κ the paper's
    form is smaller than what its proof supports. The notes state only full
    participation; adding C there is RECONSTRUCTED by the same B → B + C step as Theorem 2.
    """
    if form not in FORMS:
        raise ReplicateError(f"form must be one of {FORMS}, got {form!r}")
    T = np.asarray(steps, dtype=float)
    kappa = L / mu
    g = gamma(kappa, local_steps, gamma_kappa_factor)
    if form == "paper":
        return 2.0 * kappa / (g + T) * ((B + C) / mu + 2.0 * L * init_dist_sq)
    return kappa / (g + T - 1.0) * (2.0 * (B + C) / mu + mu * g / 2.0 * init_dist_sq)


def fedavg_bound_from(constants, steps, *, local_steps: int, init_dist_sq: float, scheme: str = "full",
                      clients_per_round: int | None = None, gamma_kappa_factor: float = 8.0, form: str = "paper"):
    """:func:`fedavg_bound` with L, μ, B, C taken from a ``theory.constants.Constants``."""
    c = constants
    B = B_term(weights=c.weights, variances=c.variances, L=c.L, heterogeneity=c.heterogeneity,
               grad_sq_bound=c.grad_sq_bound, local_steps=local_steps)
    C = C_term(local_steps=local_steps, grad_sq_bound=c.grad_sq_bound, clients_per_round=clients_per_round,
               num_clients=c.num_clients, scheme=scheme)
    return fedavg_bound(steps, L=c.L, mu=c.mu, B=B, C=C, local_steps=local_steps, init_dist_sq=init_dist_sq,
                        gamma_kappa_factor=gamma_kappa_factor, form=form)


def rounds_proxy(local_steps, *, weights, variances, L: float, mu: float, heterogeneity: float,
                 grad_sq_bound: float, clients_per_round: int | None = None):
    """Li et al. eq. (8): T_ε/E ∝ (1 + 1/K)·E·G² + (Σp_k²σ_k² + LΓ + κG²)/E.

    The paper gives it only up to constants, all of them taken as 1 here (as App. D.2
    writes it). ``clients_per_round=None`` (full participation) drops the 1/K.
    """
    E = np.asarray(local_steps, dtype=float)
    a, s = _eq8_coefficients(weights, variances, L, mu, heterogeneity, grad_sq_bound, clients_per_round)
    return s * E + a / E


def optimal_local_steps(*, weights, variances, L: float, mu: float, heterogeneity: float, grad_sq_bound: float,
                        clients_per_round: int | None = None) -> float:
    """E* = √((Σp_k²σ_k² + LΓ + κG²) / ((1 + 1/K)G²)), the minimiser of eq. (8).

    RECONSTRUCTED: the paper says only that E* exists (§3.4) and that T_ε/E at E* is
    O(G·√(Σp_k²σ_k² + LΓ + κG²)) (App. D.2); this is eq. (8)'s minimiser with unit constants.
    """
    a, s = _eq8_coefficients(weights, variances, L, mu, heterogeneity, grad_sq_bound, clients_per_round)
    return float(np.sqrt(a / s))


def _eq8_coefficients(weights, variances, L, mu, heterogeneity, grad_sq_bound, clients_per_round):
    share = 0.0 if clients_per_round is None else 1.0 / clients_per_round
    a = weighted_variance(weights, variances) + L * heterogeneity + (L / mu) * grad_sq_bound
    return a, (1.0 + share) * grad_sq_bound


def rounds_to_accuracy(local_steps, eps: float, *, weights, variances, L: float, mu: float, heterogeneity: float,
                       grad_sq_bound: float, scheme: str = "full", clients_per_round: int | None = None,
                       num_clients: int | None = None, init_dist_sq: float | None = None,
                       gamma_kappa_factor: float = 8.0):
    """T_ε/E with every constant kept: eq. (4)/(6) set equal to ε and solved for T, divided by E.

    RECONSTRUCTED: the step from eq. (6) to eq. (8), without dropping constants. ``init_dist_sq``
    defaults to §3.4's ‖w_0 − w*‖² ≤ 4G²/μ². Returns 0 where γ alone already meets ε.
    """
    dist = 4.0 * grad_sq_bound / mu**2 if init_dist_sq is None else init_dist_sq
    kappa = L / mu
    out = []
    for E in np.atleast_1d(np.asarray(local_steps, dtype=float)):
        B = B_term(weights=weights, variances=variances, L=L, heterogeneity=heterogeneity,
                   grad_sq_bound=grad_sq_bound, local_steps=E)
        C = C_term(local_steps=E, grad_sq_bound=grad_sq_bound, clients_per_round=clients_per_round,
                   num_clients=num_clients, scheme=scheme)
        T = 2.0 * kappa * ((B + C) / mu + 2.0 * L * dist) / eps - gamma(kappa, E, gamma_kappa_factor)
        out.append(max(T, 0.0) / E)
    return np.array(out) if np.ndim(local_steps) else out[0]


@dataclass(frozen=True)
class NonconvexBound:
    """The three terms of the notes' eq. (14); ``total`` bounds min_t E‖∇F(w̄_t)‖² as the notes claim."""

    optimisation: np.ndarray  # 2/(ηT)·E[F(w̄_0) − F*], per T
    variance: float  # Σ_k p_k² σ_k²
    gradient_norm: float  # (ηL − 1)·Σ_k p_k² G², negative when ηL < 1

    @property
    def total(self) -> np.ndarray:
        return self.optimisation + self.variance + self.gradient_norm


def nonconvex_bound(steps, *, lr: float, L: float, weights, variances, grad_sq_bound: float,
                    initial_gap: float) -> NonconvexBound:
    """Notes Theorem 2, eq. (14) (= eq. 5): for a constant step size η,

        min_t E‖∇F(w̄_t)‖² ≤ 2/(ηT)·E[F(w̄_0) − F*] + Σ_k p_k²σ_k² + (ηL − 1)·Σ_k p_k²G².

    Implemented as printed. Caveats in the notes' proof (§7): it uses Lemma 4, ∇F(w̄_t) = ḡ_t, which
    holds only where all local models equal w̄_t (E = 1 or a synchronisation step); Lemma 5,
    E‖g_t‖² ≤ Σp_k²G², which fails in general (Jensen gives G²; equality of all g_k shows
    Σp_k²G² can be exceeded); and it replaces ‖g_t‖² by that upper bound inside (ηL − 1)‖g_t‖²,
    an invalid step when ηL < 1, where the coefficient is negative.
    """
    T = np.asarray(steps, dtype=float)
    p2 = float(np.sum(np.asarray(weights, dtype=float) ** 2))
    return NonconvexBound(optimisation=2.0 / (lr * T) * initial_gap,
                          variance=weighted_variance(weights, variances),
                          gradient_norm=(lr * L - 1.0) * p2 * grad_sq_bound)
