"""Condition numbers (Lemmas 2-4, 6), Table 2 rates and eq. (17) (spec §3-5, §10)."""
import numpy as np
import pytest
import torch

from replicate import theory as th
from replicate.core.errors import ReplicateError


def _random_settings(rng, n):
    mu = rng.uniform(0.1, 2.0, n)
    L = mu * np.exp(rng.uniform(np.log(1.5), np.log(1e3), n))
    K = rng.integers(1, 60, n)
    alpha = rng.choice([0.0, 1.0], n) * rng.uniform(0.0, 3.0, n) * L
    return mu, L, K, alpha


def test_lemma3_eq11_matches_grid_extremes_and_monotone_p():
    rng = np.random.default_rng(0)
    for mu, L, K, alpha in zip(*_random_settings(rng, 300)):
        gamma = rng.uniform(0.0, 1.0) / (L + alpha)
        lam = np.linspace(mu, L, 400)
        p = th.surrogate_eigenvalue(lam, th.ones(K), gamma, alpha)
        assert np.all(np.diff(p) >= -1e-12 * p.max()), "p must be non-decreasing for a = 1_K"
        # eq. (11) typed as printed in the spec, against the grid max/min of p (eq. 9)
        eq11 = (L * (alpha + mu) * (1 - (1 - gamma * (alpha + L)) ** K)
                / (mu * (alpha + L) * (1 - (1 - gamma * (alpha + mu)) ** K)))
        np.testing.assert_allclose(th.kappa_fedavg(mu, L, gamma, K, alpha), p.max() / p.min(), rtol=1e-12)
        np.testing.assert_allclose(eq11, p.max() / p.min(), rtol=1e-10)


def test_lemma4_eq13_matches_grid_extremes_and_interior_peak_beyond():
    rng = np.random.default_rng(1)
    for mu, L, K, alpha in zip(*_random_settings(rng, 300)):
        K = max(K, 2)
        gamma = rng.uniform(0.0, 1.0) * th.gamma_max_maml(L, K, alpha)
        lam = np.linspace(mu, L, 400)
        p = th.surrogate_eigenvalue(lam, th.basis(K), gamma, alpha)
        assert np.all(np.diff(p) >= -1e-12 * p.max()), "p must be non-decreasing for γ ≤ 1/(KL+α)"
        eq13 = (L / mu) * ((1 - gamma * (alpha + L)) / (1 - gamma * (alpha + mu))) ** (K - 1)
        np.testing.assert_allclose(th.kappa_maml(mu, L, gamma, K, alpha), p.max() / p.min(), rtol=1e-12)
        np.testing.assert_allclose(eq13, p.max() / p.min(), rtol=1e-10)
    # beyond the guaranteed regime the maximum of p is interior, at λ* = (1 - γα)/(γK)
    mu, L, K, alpha = 1.0, 100.0, 10, 0.0
    gamma = 3.0 / (K * L)
    lam = np.linspace(mu, L, 200_001)
    peak = lam[np.argmax(th.surrogate_eigenvalue(lam, th.basis(K), gamma, alpha))]
    assert mu < peak < L and abs(peak - (1 - gamma * alpha) / (gamma * K)) < 1e-3
    with pytest.raises(ReplicateError):
        th.kappa_maml(mu, L, gamma, K, alpha)


def test_kappa_limits():
    mu, L, alpha = 1.0, 50.0, 4.0
    assert th.kappa_fedavg(mu, L, 0.0, 30, alpha) == pytest.approx(L / mu, rel=1e-14)
    assert th.kappa_fedavg(mu, L, 0.01, 1, alpha) == pytest.approx(L / mu, rel=1e-12)
    assert th.kappa_fedavg(mu, L, 0.01, 10**6, alpha) == pytest.approx(L * (alpha + mu) / (mu * (alpha + L)), rel=1e-12)
    at_edge = th.kappa_min_fedavg_fixed_K(mu, L, 10, alpha)
    assert at_edge == pytest.approx(L * (alpha + mu) / (mu * (alpha + L) * (1 - ((L - mu) / (L + alpha)) ** 10)))
    assert at_edge > th.kappa_min_fedavg(mu, L, alpha)


def test_fedprox_kappa_min_values_from_spec():
    # spec §10: α = 1, 10, 100 at L/μ = 100 give κ_min = 1.98, 10, 50.5
    np.testing.assert_allclose(th.kappa_min_fedavg(1.0, 100.0, np.array([1.0, 10.0, 100.0])), [1.9802, 10.0, 50.5],
                               atol=1e-4)
    assert th.kappa_min_fedavg(1.0, 100.0, 0.0) == pytest.approx(1.0)


def test_guaranteed_maml_kappa_range_from_spec():
    # spec §10: κ_min / (L/μ) = 0.50 / 0.39 / 0.37 for K = 2 / 10 / 100, independent of α
    ratio = th.kappa_min_maml(1.0, 100.0, np.array([2, 10, 100])) / 100.0
    np.testing.assert_allclose(ratio, [0.50, 0.39, 0.37], atol=6e-3)
    for alpha in (0.0, 5.0):
        edge = th.kappa_maml(1.0, 100.0, th.gamma_max_maml(100.0, 10, alpha), 10, alpha)
        assert edge == pytest.approx(th.kappa_min_maml(1.0, 100.0, 10), rel=1e-12)
    assert th.kappa_min_maml(1.0, 1e4, 10**4) / 1e4 == pytest.approx(np.exp(-1), rel=1e-3)


@pytest.mark.parametrize("kappa", [1.5, 10.0, 100.0])
@pytest.mark.parametrize("server,nesterov", [("gd", "optimal"), ("heavyball", "optimal"), ("nesterov", "optimal"),
                                             ("nesterov", "standard")])
def test_table2_rate_is_worst_case_iteration_radius(kappa, server, nesterov):
    mu_s = 0.7
    L_s = kappa * mu_s
    eta, beta = th.server_tuning(mu_s, L_s, server, nesterov)
    h = np.linspace(mu_s, L_s, 100_001)
    worst = th.iteration_radius(h, eta, beta, server).max()
    assert worst == pytest.approx(float(th.rho_of_kappa(kappa, server, nesterov)), rel=1e-6)
    assert th.kappa_of_rho(th.rho_of_kappa(kappa, server, nesterov), server, nesterov) == pytest.approx(kappa)


def test_table2_strict_ordering():
    kappa = np.geomspace(1.001, 1e4, 200)
    gd, nesterov, hb = (th.rho_of_kappa(kappa, s) for s in ("gd", "nesterov", "heavyball"))
    assert np.all(hb < nesterov) and np.all(nesterov < gd)
    assert np.all(th.rho_of_kappa(kappa, "nesterov", "standard") < gd)


@pytest.mark.parametrize("family", ["fedavg", "maml"])
def test_lemma6_omega_times_kappa_is_condition(family):
    mu, L, alpha = 1.0, 40.0, 2.0
    lam = np.linspace(mu, L, 301)
    for K in (2, 5, 30):
        gamma_max = th.gamma_max_fedavg(L, alpha) if family == "fedavg" else th.gamma_max_maml(L, K, alpha)
        gammas = gamma_max * np.array([1e-3, 0.3, 0.9, 1.0 - 1e-9])
        kappa, omega = th.family_condition(lam, family, gammas, K, alpha)
        np.testing.assert_allclose(kappa * omega, L / mu, rtol=1e-10)
        a = th.ones(K) if family == "fedavg" else th.basis(K)
        assert th.spectral_condition(lam, a, gammas[1], alpha)[0] == pytest.approx(kappa[1], rel=1e-12)


def test_eq17_range_and_endpoints():
    condition = 100.0
    assert th.eps_of_kappa(condition, condition) == 0.0
    assert th.eps_of_kappa(1.0, condition) == pytest.approx((10 - 1) / (10 + 1))
    eps = th.eps_of_kappa(np.geomspace(1, condition, 50), condition)
    assert np.all(np.diff(eps) < 0) and eps.min() >= 0 and eps.max() < 1


def test_lemma12_one_dimensional_bound_and_tightness():
    rng = np.random.default_rng(2)
    mu, L, zeta = 1.0, 30.0, 1.0
    worst = 0.0
    for _ in range(400):
        clients = rng.integers(2, 6)
        lam = rng.uniform(mu, L, clients)
        centres = rng.uniform(-zeta, zeta, clients)
        weights = rng.dirichlet(np.ones(clients))
        a, gamma = th.ones(rng.integers(2, 30)), rng.uniform(0, 1) / L
        q = th.distortion_eigenvalue(lam, a, gamma)
        x_star = np.sum(weights * lam * centres) / np.sum(weights * lam)
        x_tilde = np.sum(weights * lam * q * centres) / np.sum(weights * lam * q)
        omega = q.max() / q.min()
        worst = max(worst, abs(x_tilde - x_star) / (zeta * th.eps_of_omega(omega)))
    assert worst <= 2.0
    # Appendix C.2: the worst-case construction attains the constant 2 exactly
    a, gamma = th.ones(8), 0.6 / L
    problem = th.worst_case_problem(mu, L, zeta, a, gamma)
    Q = th.distortion_matrix(problem.hessians, a, gamma)
    x_star, x_tilde = th.minimisers(problem.hessians, problem.optima, problem.weights, Q)
    omega = th.fedavg_q(mu, gamma, 8) / th.fedavg_q(L, gamma, 8)
    assert float((x_tilde - x_star).norm()) / (zeta * th.eps_of_omega(omega)) == pytest.approx(2.0, rel=1e-12)


def test_random_spectrum_appendix_d1():
    rng = np.random.default_rng(3)
    eig = th.random_spectrum(200, 1.0, 100.0, rng)
    assert eig[0] == pytest.approx(1.0, abs=1e-12) and eig[-1] == 100.0 and np.all(np.diff(eig) >= 0)
    # the semicircle law puts most of the spectrum well inside [μ, L]
    assert 0.3 < np.mean((eig > 25.0) & (eig < 75.0)) < 0.9
    # the eigenvalue route (Lemma 9) equals conditioning the matrices Q and QA themselves
    A = th.random_hessian(12, 1.0, 20.0, rng)
    a, gamma = th.basis(6), 0.9 / 20.0
    Q = th.distortion_matrix(torch.as_tensor(A)[None], a, gamma)[0].numpy()
    kappa, omega = th.spectral_condition(np.linalg.eigvalsh(A), a, gamma)
    assert kappa == pytest.approx(np.linalg.cond(Q @ A), rel=1e-9)
    assert omega == pytest.approx(np.linalg.cond(Q), rel=1e-9)
