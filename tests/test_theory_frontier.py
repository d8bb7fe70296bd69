"""Pareto-frontier facts of spec §5 ("key structural fact"), §6 and §10 "Frontier checks"."""
import numpy as np
import pytest

from replicate import theory as th

CONDITION = 100.0


def test_heavyball_frontier_is_symmetric_and_the_others_are_not():
    kappa = th.kappa_grid(1.0, CONDITION, 2001)
    defects = {}
    for server in th.SERVERS:
        rho, eps = th.operating_point(kappa, CONDITION, server)
        defects[server] = th.mirror_defect(rho, eps, CONDITION, server).max()
    assert defects["heavyball"] < 1e-12
    assert defects["gd"] > 0.05 and defects["nesterov"] > 0.02


def test_mirror_defect_detects_a_perturbed_curve():
    kappa = th.kappa_grid(1.0, CONDITION, 101)
    rho, eps = th.operating_point(kappa, CONDITION, "heavyball")
    assert th.mirror_defect(rho, eps + 1e-3 * np.sin(np.pi * eps), CONDITION, "heavyball").max() > 1e-4


def test_frontiers_meet_at_one_shot_averaging_and_start_at_the_true_optimum():
    for server in th.SERVERS:
        rho, eps = th.operating_point(np.array([1.0, CONDITION]), CONDITION, server)
        assert rho[0] == 0.0 and eps[0] == pytest.approx((np.sqrt(CONDITION) - 1) / (np.sqrt(CONDITION) + 1))
        assert eps[1] == 0.0 and rho[1] > 0.8


def test_fedavg_sweeps_lie_on_the_universal_curve():
    # (ρ, ε) depends on (γ, K, α) only through κ, so every sweep traces the same curve
    mu, L = 1.0, CONDITION
    kappa = th.kappa_grid(1.0, CONDITION, 4001)
    ref_rho, ref_eps = th.operating_point(kappa, CONDITION)
    for alpha in (0.0, 10.0):
        gammas = th.gamma_grid(th.gamma_max_fedavg(L, alpha), 50)
        for K in (3, 30, 300):
            rho, eps = th.operating_point(th.kappa_fedavg(mu, L, gammas, K, alpha), CONDITION)
            assert np.nanmax(th.gap_to_curve(rho, eps, ref_rho, ref_eps)) < 1e-5


def test_pareto_mask_keeps_only_non_dominated_points():
    rho = np.array([0.1, 0.2, 0.3, 0.25, 0.5])
    eps = np.array([0.9, 0.5, 0.6, 0.5, 0.1])
    np.testing.assert_array_equal(th.pareto_mask(rho, eps), [True, True, False, False, True])


def test_gap_to_curve_is_nan_outside_and_exact_on_the_reference():
    ref_rho, ref_eps = np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.4, 0.0])
    gap = th.gap_to_curve(np.array([0.25, 0.5, 1.2]), np.array([0.7, 0.5, 0.0]), ref_rho, ref_eps)
    assert gap[0] == pytest.approx(0.0) and gap[1] == pytest.approx(0.1) and np.isnan(gap[2])


def test_simulated_maml_cusp_sits_at_the_one_shot_averaging_suboptimality():
    # spec §6.5: the minimum-ρ point of the simulated MAML curve has ε = ε(κ = 1) (0.8182 at L/μ = 100)
    mu, L, K = 1.0, CONDITION, 10
    eig = th.random_spectrum(200, mu, L, np.random.default_rng(0))
    gammas = th.gamma_grid(th.gamma_max_fedavg(L), 4000)
    kappa, omega = th.family_condition(eig, "maml", gammas, K)
    rho, eps = th.operating_point(kappa, CONDITION, "gd", omega=omega)
    cusp = eps[np.argmin(rho)]
    assert cusp == pytest.approx(0.8182, abs=2e-3)
    # identical to the guaranteed (eq. 13) curve up to γ = 1/(KL), beyond it further from the origin
    guaranteed = gammas <= th.gamma_max_maml(L, K)
    np.testing.assert_allclose(kappa[guaranteed], th.kappa_maml(mu, L, gammas[guaranteed], K), rtol=1e-12)
    beyond = ~guaranteed & (eps < cusp)
    ref_rho, ref_eps = th.operating_point(th.kappa_grid(1.0, CONDITION, 4001), CONDITION)
    assert np.all(rho[beyond] > np.interp(eps[beyond], ref_eps[::-1], ref_rho[::-1]))
