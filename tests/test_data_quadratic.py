"""Li et al. (2020) App. C.1 quadratic counterexample."""
import pytest
import torch

from replicate.data.quadratic import li2020_counterexample
from replicate.core.errors import ReplicateError


@pytest.fixture
def problem():
    return li2020_counterexample()


def test_shapes_and_paper_values(problem):
    assert problem.A.shape == (5, 21, 21) and problem.b.shape == (5, 21)
    assert problem.A.dtype == torch.float64 and problem.mu == 2e-4


def test_sum_of_A_k_is_the_tridiagonal_A(problem):
    d = 21
    A = 2 * torch.eye(d, dtype=torch.float64) - torch.diag(torch.ones(d - 1, dtype=torch.float64), 1) \
        - torch.diag(torch.ones(d - 1, dtype=torch.float64), -1)
    assert torch.equal(problem.A.sum(0), A)
    b = torch.zeros(d, dtype=torch.float64)
    b[0] = 1
    assert torch.equal(problem.b.sum(0), b) and torch.equal(problem.b[0], b)


def test_blocks_and_end_corrections(problem):
    block = torch.tensor([[1., -1, 0, 0, 0], [-1, 2, -1, 0, 0], [0, -1, 2, -1, 0],
                          [0, 0, -1, 2, -1], [0, 0, 0, -1, 1]], dtype=torch.float64)
    for k in range(5):
        lo = 4 * k
        B_k = problem.A[k, lo:lo + 5, lo:lo + 5].clone()
        if k == 0:
            assert B_k[0, 0] == 2  # B_1 + E_{1,1}
            B_k[0, 0] -= 1
        if k == 4:
            assert B_k[4, 4] == 2  # B_N + E_{d,d}
            B_k[4, 4] -= 1
        assert torch.equal(B_k, block)
        outside = problem.A[k].clone()
        outside[lo:lo + 5, lo:lo + 5] = 0
        assert not outside.any()


def test_each_A_k_is_psd(problem):
    eig = torch.linalg.eigvalsh(problem.A)
    assert float(eig.min()) > -1e-12
    # on its own block, a device with an end correction is positive definite, the others singular
    block_min = [float(torch.linalg.eigvalsh(problem.A[k, 4 * k:4 * k + 5, 4 * k:4 * k + 5]).min())
                 for k in range(5)]
    assert block_min[0] > 1e-3 and block_min[4] > 1e-3
    assert all(abs(v) < 1e-12 for v in block_min[1:4])


def test_objective_normalisation_matches_mean_of_local_objectives(problem):
    w = torch.randn(21, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    local = [0.5 * w @ A_k @ w - b_k @ w + 0.5 * problem.mu * w @ w for A_k, b_k in zip(problem.A, problem.b)]
    assert torch.allclose(problem.objective(w), torch.stack(local).mean())
    A = problem.A.sum(0)
    expected = (w @ A @ w - 2 * w[0]) / 10 + 0.5 * problem.mu * w @ w
    assert torch.allclose(problem.objective(w), expected)


def test_gradient_vanishes_at_optimum_and_clients_average_to_it(problem):
    w_star = problem.optimum().requires_grad_(True)
    (grad,) = torch.autograd.grad(problem.objective(w_star), w_star)
    assert float(grad.abs().max()) < 1e-14
    assert float(problem.grad_clients(w_star.detach().expand(5, 21)).mean(0).abs().max()) < 1e-14
    w = torch.randn(21, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    (grad,) = torch.autograd.grad(problem.objective(w), w)
    assert torch.allclose(problem.grad_clients(w.detach().expand(5, 21)).mean(0), grad)
    assert float(problem.optimal_value()) < float(problem.objective(w.detach()))


def test_grad_clients_per_device():
    problem = li2020_counterexample()
    w = torch.arange(5 * 21, dtype=torch.float64).view(5, 21) / 100
    g = problem.grad_clients(w)
    for k in range(5):
        assert torch.allclose(g[k], problem.A[k] @ w[k] - problem.b[k] + problem.mu * w[k])


def test_hand_computed_smallest_case():
    # N = 1, p = 1: A = [[2, -1], [-1, 2]], b = e1, w* = (A + muI)^-1 e1
    mu = 0.5
    problem = li2020_counterexample(N=1, p=1, mu=mu)
    det = (2 + mu) ** 2 - 1
    assert torch.allclose(problem.optimum(), torch.tensor([(2 + mu) / det, 1 / det], dtype=torch.float64))
    assert torch.allclose(problem.optimal_value(), torch.tensor(-0.5 * (2 + mu) / det, dtype=torch.float64))


@pytest.mark.parametrize("kwargs", [dict(N=0), dict(p=0), dict(mu=-1.0), dict(N=2.0)])
def test_bad_arguments(kwargs):
    with pytest.raises(ReplicateError):
        li2020_counterexample(**kwargs)
