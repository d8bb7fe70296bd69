"""Local-update theory of Charles & Konečný 2021 (AISTATS, arXiv 2103.05032) on quadratics.

* :mod:`.surrogate` — coefficient vectors a (eqs. 4-5), distortion matrix Q_c (eq. 6),
  surrogate losses (eqs. 7-8), their spectra q(λ), p(λ) (Lemma 9), minimisers (Lemma 11).
* :mod:`.conditioning` — κ of eqs. (9), (11), (13), attainable ranges, random spectra (App. D.1).
* :mod:`.rates` — Table 2 rates ρ(κ) and tunings, iteration radii, ε of eq. (17).
* :mod:`.frontier` — (ρ, ε) operating points, grids, Pareto masks, curve comparisons.
* :mod:`.reference` — a reference LocalUpdate over stacked client tensors (Algorithms 1-2).
* :mod:`.classic` — textbook forms of the Table 1 algorithms, for equivalence checks.

Numbers that the paper lost and the spec reconstructs are marked DERIVED in the
docstrings; see ``/work/shared/specs/charles2021-local-update-tradeoffs.md``.
"""
from replicate.theory.conditioning import (family_condition, gamma_max_fedavg, gamma_max_maml, kappa_fedavg, kappa_maml,
                           kappa_min_fedavg, kappa_min_fedavg_fixed_K, kappa_min_maml, random_hessian,
                           random_spectrum, spectral_condition)
from replicate.theory.frontier import gamma_grid, gap_to_curve, kappa_grid, mirror_defect, operating_point, pareto_mask, steps_grid
from replicate.theory.rates import (SERVERS, eps_of_kappa, eps_of_omega, iteration_radius, kappa_of_rho, rho_of_kappa,
                    server_tuning)
from replicate.theory.reference import (QuadraticProblem, ServerOpt, client_update, local_update, observed_rate,
                        random_problem, worst_case_problem)
from replicate.theory.surrogate import (basis, distortion_eigenvalue, distortion_matrix, fedavg_q, local_steps, maml_q,
                        minimisers, ones, surrogate_eigenvalue, surrogate_gradient, surrogate_loss)

__all__ = [
    "SERVERS", "QuadraticProblem", "ServerOpt", "basis", "client_update", "distortion_eigenvalue",
    "distortion_matrix", "eps_of_kappa", "eps_of_omega", "family_condition", "fedavg_q", "gamma_grid",
    "gamma_max_fedavg", "gamma_max_maml", "gap_to_curve", "iteration_radius", "kappa_fedavg", "kappa_grid",
    "kappa_maml", "kappa_min_fedavg", "kappa_min_fedavg_fixed_K", "kappa_min_maml", "kappa_of_rho",
    "local_steps", "local_update", "maml_q", "minimisers", "mirror_defect", "observed_rate", "ones",
    "operating_point", "pareto_mask", "random_hessian", "random_problem", "random_spectrum", "rho_of_kappa",
    "server_tuning", "spectral_condition", "steps_grid", "surrogate_eigenvalue", "surrogate_gradient",
    "surrogate_loss", "worst_case_problem",
]
