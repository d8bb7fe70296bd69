"""The reference LocalUpdate: Table 1 special cases, server optimisers, and the
end-to-end rate check of spec §10 (converges at ρ to x̃*, not to x*)."""
import numpy as np
import pytest
import torch

from replicate import theory as th
from replicate.core.errors import ReplicateError
from replicate.theory import classic

MU, L, ZETA = 1.0, 10.0, 1.0


@pytest.fixture(scope="module")
def problem():
    return th.random_problem(d=4, clients=6, mu=MU, L=L, zeta=ZETA, rng=np.random.default_rng(10))


@pytest.fixture(scope="module")
def x0():
    return torch.as_tensor(np.random.default_rng(11).standard_normal(4))


def _one_round(problem, x0, a, gamma, eta, alpha=0.0):
    return th.local_update(problem, x0, a, gamma, th.ServerOpt(eta), rounds=1, alpha=alpha)[1]


def test_fedavg_is_local_update_with_eta_equal_gamma(problem, x0):
    gamma, K = 0.04, 7
    torch.testing.assert_close(_one_round(problem, x0, th.ones(K), gamma, eta=gamma),
                               classic.fedavg_round(problem, x0, gamma, K), rtol=0, atol=1e-14)


def test_fedprox_is_local_update_with_alpha(problem, x0):
    gamma, K, alpha = 0.04, 5, 3.0
    torch.testing.assert_close(_one_round(problem, x0, th.ones(K), gamma, eta=gamma, alpha=alpha),
                               classic.fedprox_round(problem, x0, gamma, K, alpha), rtol=0, atol=1e-14)


def test_lookahead_is_local_update_on_one_client(x0):
    single = th.random_problem(d=4, clients=1, mu=MU, L=L, zeta=ZETA, rng=np.random.default_rng(12))
    gamma, K, slow_lr = 0.05, 6, 0.5
    torch.testing.assert_close(_one_round(single, x0, th.ones(K), gamma, eta=slow_lr * gamma),
                               classic.lookahead_round(single, x0, gamma, K, slow_lr), rtol=0, atol=1e-14)


def test_fedsgd_and_minibatch_sgd_are_e1_or_gamma_zero(problem, x0):
    eta = 0.08
    expected = classic.minibatch_sgd_round(problem, x0, eta)
    torch.testing.assert_close(classic.fedsgd_round(problem, x0, eta), expected, rtol=0, atol=1e-14)
    torch.testing.assert_close(_one_round(problem, x0, th.basis(1), gamma=0.05, eta=eta), expected, rtol=0, atol=1e-14)
    torch.testing.assert_close(_one_round(problem, x0, th.ones(4), gamma=0.0, eta=eta / 4), expected,
                               rtol=0, atol=1e-14)


def test_fomaml_and_maml_coefficients(problem, x0):
    gamma, K, eta = 0.05, 4, 0.3
    torch.testing.assert_close(_one_round(problem, x0, th.basis(K), gamma, eta),
                               classic.fomaml_round(problem, x0, gamma, K, eta), rtol=0, atol=1e-14)
    torch.testing.assert_close(_one_round(problem, x0, th.basis(2 * K - 1), gamma, eta),
                               classic.maml_round(problem, x0, gamma, K, eta), rtol=0, atol=1e-13)


def test_model_delta_convention_differs(problem, x0):
    # Appendix A: the server must receive Σ g_k, not γ Σ g_k; with the latter γ = 0 stalls
    x1 = _one_round(problem, x0, th.ones(3), gamma=0.0, eta=0.1)
    assert (x1 - x0).norm() > 1e-2


def test_nesterov_velocity_form_equals_lessard_form(problem, x0):
    eta, beta, rounds = 0.05, 0.9, 25
    a, gamma = th.ones(3), 0.03
    ours = th.local_update(problem, x0, a, gamma, th.ServerOpt(eta, beta, nesterov=True), rounds)
    x_prev, x = x0.clone(), x0.clone()
    lessard = [x0]
    for _ in range(rounds):
        y = x + beta * (x - x_prev)
        x_prev, x = x, y - eta * (problem.weights @ th.client_update(problem, y, a, gamma))
        lessard.append(x + beta * (x - x_prev))  # the broadcast point y_{t+1} is our stored iterate
    torch.testing.assert_close(ours, torch.stack(lessard), rtol=0, atol=1e-12)
    heavy = th.local_update(problem, x0, a, gamma, th.ServerOpt(eta, beta), 2)
    first = x0 - eta * problem.weights @ th.client_update(problem, x0, a, gamma)
    second = first - eta * problem.weights @ th.client_update(problem, first, a, gamma) + beta * (first - x0)
    torch.testing.assert_close(heavy[2], second, rtol=0, atol=1e-13)


def test_client_sampling_is_seeded_and_unbiased_on_average(problem, x0):
    a, gamma = th.ones(3), 0.03
    runs = [th.local_update(problem, x0, a, gamma, th.ServerOpt(0.1), 1, clients_per_round=2, seed=s)[1]
            for s in range(400)]
    again = th.local_update(problem, x0, a, gamma, th.ServerOpt(0.1), 1, clients_per_round=2, seed=3)[1]
    torch.testing.assert_close(again, runs[3], rtol=0, atol=0)
    full = th.local_update(problem, x0, a, gamma, th.ServerOpt(0.1), 1)[1]
    spread = torch.stack(runs).std(0) / 20
    assert spread.min() > 0 and ((torch.stack(runs).mean(0) - full).abs() / spread).max() < 4.5
    with pytest.raises(ReplicateError):
        th.local_update(problem, x0, a, gamma, th.ServerOpt(0.1), 1, clients_per_round=7)


def test_observed_rate_recovers_a_known_linear_map():
    rng = np.random.default_rng(13)
    basis = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    M = basis @ np.diag([0.7, -0.7, 0.2]) @ basis.T
    xs = [np.ones(3) + 2.0]
    for _ in range(60):
        xs.append(2.0 + M @ (xs[-1] - 2.0))
    assert th.observed_rate(np.array(xs)) == pytest.approx(0.7, rel=1e-9)


@pytest.mark.parametrize("server", ["gd", "nesterov", "heavyball"])
@pytest.mark.parametrize("a,gamma,alpha", [(th.ones(5), 0.5 / L, 0.0), (th.ones(20), 0.9 / (L + 2.0), 2.0),
                                           (th.basis(4), 1.0 / (4 * L), 0.0)])
def test_end_to_end_rate_and_limit_on_worst_case_problem(server, a, gamma, alpha):
    problem = th.worst_case_problem(MU, L, ZETA, a, gamma, alpha)
    mu_s, L_s = th.surrogate_eigenvalue([MU, L], a, gamma, alpha)
    kappa = L_s / mu_s
    eta, beta = th.server_tuning(mu_s, L_s, server)
    xs = th.local_update(problem, np.ones(3), a, gamma, th.ServerOpt(eta, beta, server == "nesterov"), 400,
                         alpha=alpha)
    predicted = float(th.rho_of_kappa(kappa, server))
    assert th.observed_rate(xs, memory=1 if server == "gd" else 2) == pytest.approx(predicted, rel=1e-6)
    Q = th.distortion_matrix(problem.hessians, a, gamma, alpha)
    x_star, x_tilde = th.minimisers(problem.hessians, problem.optima, problem.weights, Q)
    assert float((xs[-1] - x_tilde).norm()) < 1e-10
    assert float((x_tilde - x_star).norm()) > 0.05
    omega = th.distortion_eigenvalue(MU, a, gamma, alpha) / th.distortion_eigenvalue(L, a, gamma, alpha)
    measured_eps = float((xs[-1] - x_star).norm()) / (2 * ZETA)
    assert measured_eps == pytest.approx(float(th.eps_of_omega(omega)), rel=1e-9)
    # both cases are in a guaranteed regime, where eq. (17) gives the same ε (Lemma 6)
    assert measured_eps == pytest.approx(float(th.eps_of_kappa(kappa, L / MU)), rel=1e-9)


def test_end_to_end_random_problem_converges_no_slower_than_predicted(problem, x0):
    a, gamma = th.ones(6), 0.6 / L
    mu_s, L_s = th.surrogate_eigenvalue([MU, L], a, gamma)
    eta, _ = th.server_tuning(mu_s, L_s, "gd")
    xs = th.local_update(problem, x0, a, gamma, th.ServerOpt(eta), 300)
    Q = th.distortion_matrix(problem.hessians, a, gamma)
    H = torch.einsum("c,cij->ij", problem.weights, Q @ problem.hessians)
    exact = float(np.abs(1 - eta * np.linalg.eigvalsh(H.numpy())).max())
    measured = th.observed_rate(xs)
    assert measured == pytest.approx(exact, rel=1e-6)
    assert measured <= float(th.rho_of_kappa(L_s / mu_s)) + 1e-12
    x_star, x_tilde = th.minimisers(problem.hessians, problem.optima, problem.weights, Q)
    assert float((xs[-1] - x_tilde).norm()) < 1e-10 < float((x_tilde - x_star).norm())
