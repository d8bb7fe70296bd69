"""Distortion matrix, surrogate losses and Theorems 1-2 (spec §2, §10 "Theory checks")."""
import numpy as np
import pytest
import torch

from replicate import theory as th
from replicate.core.errors import ReplicateError
from replicate.theory import classic

COEFFICIENTS = {"1_5": th.ones(5), "e_7": th.basis(7), "(0.3,0,2,1)": np.array([0.3, 0.0, 2.0, 1.0])}


@pytest.fixture(scope="module")
def problem():
    return th.random_problem(d=4, clients=5, mu=1.0, L=10.0, zeta=1.0, rng=np.random.default_rng(0))


def test_coefficient_vectors_and_K():
    np.testing.assert_array_equal(th.ones(3), [1, 1, 1])
    np.testing.assert_array_equal(th.basis(3), [0, 0, 1])
    assert th.local_steps([0.3, 0.0, 2.0, 1.0, 0.0]) == 4
    with pytest.raises(ReplicateError):
        th.local_steps([0.0, 0.0])


@pytest.mark.parametrize("a", [th.basis(1), th.ones(6), np.array([0.5, 2.0, 0.0, 1.0])])
def test_no_distortion_when_a_is_e1_or_gamma_is_zero(problem, a):
    # prose after eq. (8): a = e_1 or γ = 0 gives Q_c = ‖a‖₁ I
    eye = torch.eye(problem.dim, dtype=torch.float64).expand_as(problem.hessians)
    Q0 = th.distortion_matrix(problem.hessians, a, gamma=0.0, alpha=0.7)
    torch.testing.assert_close(Q0, np.abs(a).sum() * eye, rtol=0, atol=1e-14)
    Q1 = th.distortion_matrix(problem.hessians, th.basis(1), gamma=0.05)
    torch.testing.assert_close(Q1, eye, rtol=0, atol=0)


def test_distortion_spectrum_is_q_of_lambda(problem):
    # Lemma 9: Q_c has eigenvalues q(λ) and Q_c A_c has p(λ) = λ q(λ), sharing eigenvectors
    a, gamma, alpha = np.array([0.3, 0.0, 2.0, 1.0]), 0.06, 0.4
    Q = th.distortion_matrix(problem.hessians, a, gamma, alpha)
    lam, vec = torch.linalg.eigh(problem.hessians)
    q = th.distortion_eigenvalue(lam.numpy(), a, gamma, alpha)
    expected = vec @ torch.diag_embed(torch.as_tensor(q)) @ vec.transpose(-1, -2)
    torch.testing.assert_close(Q, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(Q @ problem.hessians, problem.hessians @ Q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(th.surrogate_eigenvalue(lam.numpy(), a, gamma, alpha), lam.numpy() * q, rtol=1e-15)


def test_closed_form_q_match_the_polynomial():
    lam = np.linspace(1.0, 10.0, 50)
    for K in (1, 2, 7, 40):
        np.testing.assert_allclose(th.fedavg_q(lam, 0.03, K, 2.0), th.distortion_eigenvalue(lam, th.ones(K), 0.03, 2.0),
                                   rtol=1e-12)
        np.testing.assert_allclose(th.maml_q(lam, 0.03, K, 2.0), th.distortion_eigenvalue(lam, th.basis(K), 0.03, 2.0),
                                   rtol=1e-12)
    np.testing.assert_array_equal(th.fedavg_q(lam, 0.0, 9), np.full_like(lam, 9.0))


@pytest.mark.parametrize("name", COEFFICIENTS)
@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_theorem1_full_batch_message_is_surrogate_gradient(problem, name, alpha):
    a, gamma = COEFFICIENTS[name], 0.05
    x = torch.as_tensor(np.random.default_rng(1).standard_normal(problem.dim))
    message = th.client_update(problem, x, a, gamma, alpha)
    Q = th.distortion_matrix(problem.hessians, a, gamma, alpha)
    expected = th.surrogate_gradient(problem.hessians, problem.optima, Q, x.expand(problem.num_clients, -1))
    torch.testing.assert_close(message, expected, rtol=0, atol=2e-13)
    # and it is the gradient of the surrogate loss (eqs. 7-8), checked by autograd
    z = x.clone().requires_grad_(True)
    weighted = torch.autograd.grad(th.surrogate_loss(problem.hessians, problem.optima, problem.weights, Q, z), z)[0]
    torch.testing.assert_close(problem.weights @ message, weighted, rtol=0, atol=2e-13)


@pytest.mark.parametrize("name", ["1_5", "(0.3,0,2,1)"])
def test_theorem1_sgd_messages_are_unbiased(name):
    # Monte Carlo over 20k independent runs of ClientUpdate with B = 2 (clients replicated in dim 0)
    a, gamma, alpha, copies = COEFFICIENTS[name], 0.05, 0.3, 20_000
    problem = th.random_problem(d=3, clients=3, mu=1.0, L=8.0, zeta=1.0, rng=np.random.default_rng(2), examples=4)
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    generator = torch.Generator().manual_seed(3)
    runs = th.client_update(problem.replicate(copies), x, a, gamma, alpha, batch_size=2, generator=generator)
    runs = runs.reshape(copies, problem.num_clients, problem.dim)
    Q = th.distortion_matrix(problem.hessians, a, gamma, alpha)
    expected = th.surrogate_gradient(problem.hessians, problem.optima, Q, x.expand(problem.num_clients, -1))
    z = (runs.mean(0) - expected) / (runs.std(0) / copies**0.5)
    assert runs.std(0).min() > 1e-3, "mini-batches must make the messages random"
    assert z.abs().max() < 4.5, f"Monte-Carlo mean off by {z.abs().max():.2f} standard errors"


@pytest.mark.parametrize("inner_steps", [0, 1, 2, 5])
def test_theorem2_maml_gradient_is_surrogate_with_e_2j_plus_1(problem, inner_steps):
    gamma = 0.07
    x = torch.as_tensor(np.random.default_rng(4).standard_normal(problem.dim))
    meta = classic.maml_gradient(problem, x, gamma, inner_steps)
    a = th.basis(2 * inner_steps + 1)
    Q = th.distortion_matrix(problem.hessians, a, gamma)
    expected = th.surrogate_gradient(problem.hessians, problem.optima, Q, x.expand(problem.num_clients, -1))
    torch.testing.assert_close(meta, expected, rtol=0, atol=1e-12)
    # FOMAML's e_{j+1} is a different message as soon as there is an inner step
    if inner_steps:
        fomaml = th.client_update(problem, x, th.basis(inner_steps + 1), gamma)
        assert (fomaml - meta).abs().max() > 1e-3


def test_lemma1_distortion_positive_definite(problem):
    rng = np.random.default_rng(5)
    for _ in range(20):
        a = rng.uniform(0, 1, rng.integers(1, 12)) * rng.integers(0, 2, 1)
        a[-1] = 1.0  # non-negative, non-zero, and sometimes a = e_K with a_1 = 0
        alpha = rng.uniform(0, 5)
        gamma = rng.uniform(0, 1) / (10.0 + alpha)
        eig = torch.linalg.eigvalsh(th.distortion_matrix(problem.hessians, a, gamma, alpha))
        assert eig.min() > 0


def test_minimisers_differ_and_are_stationary(problem):
    Q = th.distortion_matrix(problem.hessians, th.ones(10), 0.09)
    x_star, x_tilde = th.minimisers(problem.hessians, problem.optima, problem.weights, Q)
    grad_true = problem.weights @ torch.einsum("cij,cj->ci", problem.hessians, x_star - problem.optima)
    grad_surrogate = problem.weights @ th.surrogate_gradient(problem.hessians, problem.optima, Q,
                                                             x_tilde.expand(problem.num_clients, -1))
    assert grad_true.abs().max() < 1e-12 and grad_surrogate.abs().max() < 1e-12
    assert (x_star - x_tilde).norm() > 1e-2
