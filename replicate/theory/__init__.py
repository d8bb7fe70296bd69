"""Local-update theory of Charles & Konečný 2021 (AISTATS, arXiv 2103.05032) on quadratics.

* :mod:`.surrogate` — coefficient vectors a (eqs. 4-5), distortion matrix Q_c (eq. 6),
  surrogate losses (eqs. 7-8), their spectra q(λ), p(λ) (Lemma 9), minimisers (Lemma 11).
* :mod:`.conditioning` — κ of eqs. (9), (11), (13), attainable ranges, random spectra (App. D.1).
* :mod:`.rates` — Table 2 rates ρ(κ) and tunings, iteration radii, ε of eq. (17).
* :mod:`.frontier` — (ρ, ε) operating points, grids, Pareto masks, curve comparisons.
* :mod:`.reference` — a reference LocalUpdate over stacked client tensors (Algorithms 1-2), on the
  quadratic clients of :class:`replicate.data.quadratic.QuadraticClients`.
* :mod:`.classic` — textbook forms of the Table 1 algorithms, for equivalence checks.

Li et al. 2020 (ICLR) and the lecture notes (seed 003):

* :mod:`.constants` — L, μ, κ, Γ, σ_k², G², F* of Assumptions 1-4, estimated on a federated problem.
* :mod:`.bounds` — Theorems 1-3 (eqs. 4-6), eq. (8)'s optimal E, the notes' eq. (3) and non-convex eq. (14).

Khanduri et al. 2021 (STEM):

* :mod:`.stem` — the reconstructed bounds of Theorems 3.1 / A.10 and 3.2, iterations, samples and
  rounds to reach ε, the (b, I) trade-off curves of eqs. (3) and (5) (imported as ``theory.stem``).

Numbers that the paper lost and the spec reconstructs are marked DERIVED in the
docstrings; see ``docs/specs/charles2021-local-update-tradeoffs.md``.
"""
from replicate.theory.bounds import (B_term, C_term, NonconvexBound, fedavg_bound, fedavg_bound_from, nonconvex_bound,
                                     optimal_local_steps, rounds_proxy, rounds_to_accuracy, scheme2_transform,
                                     step_size, step_size_conditions)
from replicate.theory.conditioning import (family_condition, gamma_max_fedavg, gamma_max_maml, kappa_fedavg, kappa_maml,
                           kappa_min_fedavg, kappa_min_fedavg_fixed_K, kappa_min_maml, random_hessian,
                           random_spectrum, spectral_condition)
from replicate.theory.frontier import (gamma_grid, gap_to_curve, kappa_grid, mirror_defect, operating_point,
                                       pareto_mask, steps_grid)
from replicate.theory.rates import (SERVERS, eps_of_kappa, eps_of_omega, iteration_radius, kappa_of_rho, rho_of_kappa,
                    server_tuning)
from replicate.theory.reference import (ServerOpt, client_update, local_update, observed_rate,
                        random_problem, worst_case_problem)
from replicate.theory.constants import Constants, estimate_constants
from replicate.theory.surrogate import (basis, distortion_eigenvalue, distortion_matrix, fedavg_q, local_steps, maml_q,
                        minimisers, ones, surrogate_eigenvalue, surrogate_gradient, surrogate_loss)

__all__ = [
    "B_term", "C_term", "Constants", "NonconvexBound", "estimate_constants", "fedavg_bound", "fedavg_bound_from",
    "nonconvex_bound", "optimal_local_steps", "rounds_proxy", "rounds_to_accuracy", "scheme2_transform",
    "step_size", "step_size_conditions",
    "SERVERS", "ServerOpt", "basis", "client_update", "distortion_eigenvalue",
    "distortion_matrix", "eps_of_kappa", "eps_of_omega", "family_condition", "fedavg_q", "gamma_grid",
    "gamma_max_fedavg", "gamma_max_maml", "gap_to_curve", "iteration_radius", "kappa_fedavg", "kappa_grid",
    "kappa_maml", "kappa_min_fedavg", "kappa_min_fedavg_fixed_K", "kappa_min_maml", "kappa_of_rho",
    "local_steps", "local_update", "maml_q", "minimisers", "mirror_defect", "observed_rate", "ones",
    "operating_point", "pareto_mask", "random_hessian", "random_problem", "random_spectrum", "rho_of_kappa",
    "server_tuning", "spectral_condition", "steps_grid", "surrogate_eigenvalue", "surrogate_gradient",
    "surrogate_loss", "worst_case_problem",
]
