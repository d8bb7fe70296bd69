"""Federated quadratics (``QuadraticClients``): Li et al. (2020) App. C.1's counterexample and
Charles & Konečný (2021)'s per-example form, checked against their closed forms, and the engine
adapter against the reference LocalUpdate oracle."""
import numpy as np
import pytest
import torch

from replicate import theory as th
from replicate.core.errors import ReplicateError
from replicate.data.quadratic import QuadraticClients, li2020_counterexample, li2020_matrices
from replicate.fl.algorithms import LocalWork
from replicate.fl.algorithms.local_update import LocalUpdate
from replicate.fl.engine import run
from replicate.fl.problems import QuadraticFederatedProblem
from replicate.fl.schedules import LRSchedule

F64 = torch.float64
MU = 2e-4


@pytest.fixture
def problem():
    return li2020_counterexample()


@pytest.fixture
def paper():
    """The paper's A_k (5, 21, 21) and b_k (5, 21), without μ."""
    return li2020_matrices()


def test_shapes_and_paper_values(problem, paper):
    A, b = paper
    assert A.shape == (5, 21, 21) and b.shape == (5, 21) and A.dtype == F64
    assert problem.example_hessians.shape == (5, 1, 21, 21) and problem.example_linear.shape == (5, 1, 21)
    assert (problem.num_clients, problem.num_examples, problem.dim) == (5, 1, 21)
    assert torch.equal(problem.hessians, A + MU * torch.eye(21, dtype=F64))  # A_k + μI
    assert torch.equal(problem.linear, b) and not problem.constants.any()  # r_k = b_k, s_k = 0
    assert torch.equal(problem.weights, torch.full((5,), 0.2, dtype=F64))


def test_sum_of_A_k_is_the_tridiagonal_A(paper):
    A_k, b_k = paper
    d = 21
    A = 2 * torch.eye(d, dtype=F64) - torch.diag(torch.ones(d - 1, dtype=F64), 1) \
        - torch.diag(torch.ones(d - 1, dtype=F64), -1)
    assert torch.equal(A_k.sum(0), A)
    b = torch.zeros(d, dtype=F64)
    b[0] = 1
    assert torch.equal(b_k.sum(0), b) and torch.equal(b_k[0], b)


def test_blocks_and_end_corrections(paper):
    A = paper[0]
    block = torch.tensor([[1., -1, 0, 0, 0], [-1, 2, -1, 0, 0], [0, -1, 2, -1, 0],
                          [0, 0, -1, 2, -1], [0, 0, 0, -1, 1]], dtype=F64)
    for k in range(5):
        lo = 4 * k
        B_k = A[k, lo:lo + 5, lo:lo + 5].clone()
        if k == 0:
            assert B_k[0, 0] == 2  # B_1 + E_{1,1}
            B_k[0, 0] -= 1
        if k == 4:
            assert B_k[4, 4] == 2  # B_N + E_{d,d}
            B_k[4, 4] -= 1
        assert torch.equal(B_k, block)
        outside = A[k].clone()
        outside[lo:lo + 5, lo:lo + 5] = 0
        assert not outside.any()


def test_each_A_k_is_psd(paper):
    A = paper[0]
    assert float(torch.linalg.eigvalsh(A).min()) > -1e-12
    # on its own block, a device with an end correction is positive definite, the others singular
    block_min = [float(torch.linalg.eigvalsh(A[k, 4 * k:4 * k + 5, 4 * k:4 * k + 5]).min()) for k in range(5)]
    assert block_min[0] > 1e-3 and block_min[4] > 1e-3
    assert all(abs(v) < 1e-12 for v in block_min[1:4])


def test_li2020_through_clients_matches_the_closed_form(problem, paper):
    """Module docstring: F(w) = (1/(2N))(wᵀAw − 2bᵀw) + (μ/2)‖w‖², w* = (A + NμI)^{-1} b,
    ∇F_k(w) = A_k w − b_k + μw."""
    A_k, b_k = paper
    A, b = A_k.sum(0), b_k.sum(0)
    w_star = torch.linalg.solve(A + 5 * MU * torch.eye(21, dtype=F64), b)
    torch.testing.assert_close(problem.minimiser, w_star, rtol=1e-13, atol=1e-13)
    w = torch.randn(3, 21, dtype=F64, generator=torch.Generator().manual_seed(0))
    closed = torch.stack([(v @ A @ v - 2 * b @ v) / 10 + 0.5 * MU * v @ v for v in w])
    torch.testing.assert_close(problem.objective(w), closed, rtol=1e-13, atol=1e-15)  # (..., d) batches
    torch.testing.assert_close(problem.objective(w[0]), closed[0], rtol=1e-13, atol=1e-15)
    local = torch.stack([0.5 * w[0] @ A_k[k] @ w[0] - b_k[k] @ w[0] + 0.5 * MU * w[0] @ w[0] for k in range(5)])
    torch.testing.assert_close(problem.client_objectives(w[0]), local, rtol=1e-13, atol=1e-15)
    points = torch.arange(5 * 21, dtype=F64).view(5, 21) / 100
    by_hand = torch.stack([A_k[k] @ points[k] - b_k[k] + MU * points[k] for k in range(5)])
    torch.testing.assert_close(problem.grad_clients(points), by_hand, rtol=1e-14, atol=1e-14)
    assert float(problem.optimal_value()) < float(problem.objective(w[0]))


def test_gradient_vanishes_at_the_minimiser_and_clients_average_to_it(problem):
    w_star = problem.minimiser.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(problem.objective(w_star), w_star)
    assert float(grad.abs().max()) < 1e-14
    assert float((problem.weights @ problem.grad_clients(w_star.detach().expand(5, 21))).abs().max()) < 1e-14
    w = torch.randn(21, dtype=F64, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    (grad,) = torch.autograd.grad(problem.objective(w), w)
    torch.testing.assert_close(problem.weights @ problem.grad_clients(w.detach().expand(5, 21)), grad)


def test_hand_computed_smallest_case():
    # N = 1, p = 1: A = [[2, -1], [-1, 2]], b = e1, w* = (A + muI)^-1 e1
    mu = 0.5
    problem = li2020_counterexample(N=1, p=1, mu=mu)
    det = (2 + mu) ** 2 - 1
    torch.testing.assert_close(problem.minimiser, torch.tensor([(2 + mu) / det, 1 / det], dtype=F64))
    torch.testing.assert_close(problem.optimal_value(), torch.tensor(-0.5 * (2 + mu) / det, dtype=F64))


@pytest.mark.parametrize("kwargs", [dict(N=0), dict(p=0), dict(mu=-1.0), dict(N=2.0)])
def test_bad_arguments(kwargs):
    with pytest.raises(ReplicateError):
        li2020_counterexample(**kwargs)


def _charles_examples(seed=0, C=3, n=4, d=3):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((C, n, d, d))
    A = M @ np.swapaxes(M, -1, -2) + 0.1 * np.eye(d)
    centres = rng.standard_normal((C, n, d))
    p = rng.uniform(1, 2, C)
    return A, centres, p / p.sum()


def test_from_examples_objective_is_eq1_by_hand():
    """F(x) = Σ_c p_c mean_z ½(x − c_z)ᵀA_z(x − c_z), Charles & Konečný eq. (1), constants included."""
    A, centres, p = _charles_examples()
    clients = QuadraticClients.from_examples(A, centres, p)
    x = np.array([0.3, -1.2, 0.7])
    client_values = [np.mean([0.5 * (x - c) @ Az @ (x - c) for Az, c in zip(A[k], centres[k])]) for k in range(3)]
    np.testing.assert_allclose(clients.client_objectives(torch.tensor(x)).numpy(), client_values, rtol=1e-13)
    assert float(clients.objective(torch.tensor(x))) == pytest.approx(p @ client_values, rel=1e-13)
    # eq. (3): A_c = E_z A_z and c_c = A_c^{-1} E_z[A_z c_z]; at c_c the client's gradient vanishes
    A_c = A.mean(1)
    c_c = np.linalg.solve(A_c, np.einsum("knij,knj->ki", A, centres)[..., None] / 4)[..., 0]
    np.testing.assert_allclose(clients.optima.numpy(), c_c, rtol=1e-12)
    assert float(clients.grad_clients(clients.optima).abs().max()) < 1e-12
    w_star = np.linalg.solve(np.einsum("k,kij->ij", p, A_c), np.einsum("k,kij,kj->i", p, A_c, c_c))
    np.testing.assert_allclose(clients.minimiser.numpy(), w_star, rtol=1e-12)
    # one example per client: from_clients is from_examples with n = 1
    single = QuadraticClients.from_clients(A[:, 0], centres[:, 0], 2 * p)
    alone = QuadraticClients.from_examples(A[:, :1], centres[:, :1], p)
    assert float(single.objective(torch.tensor(x))) == pytest.approx(float(alone.objective(torch.tensor(x))), rel=1e-14)
    merged = clients.client_level()  # what full gradients see: one example (A_c, r_c, s_c) per client
    assert merged.num_examples == 1 and torch.equal(merged.hessians, clients.hessians)
    assert float(merged.objective(torch.tensor(x))) == pytest.approx(p @ client_values, rel=1e-13)
    copies = clients.replicate(4)
    assert copies.num_clients == 12 and float(copies.weights.sum()) == pytest.approx(1.0)
    x = torch.tensor(x)
    assert float(copies.objective(x)) == pytest.approx(float(clients.objective(x)), rel=1e-13)


def test_inconsistent_clients_are_refused():
    A, centres, p = _charles_examples()
    with pytest.raises(ReplicateError, match="summing to 1"):
        QuadraticClients.from_examples(A, centres, 2 * p)
    with pytest.raises(ReplicateError, match="centres"):
        QuadraticClients.from_examples(A, centres[:, :2], p)
    with pytest.raises(ReplicateError, match="needs A"):
        QuadraticClients(torch.tensor(A), torch.tensor(centres), torch.zeros(3, 2, dtype=F64), torch.tensor(p))
    with pytest.raises(ReplicateError, match="float64"):
        QuadraticClients(*(t.float() for t in (torch.tensor(A), torch.tensor(centres), torch.zeros(3, 4))),
                         torch.tensor(p))


@pytest.mark.parametrize("a,alpha,server", [
    (th.ones(3), 0.0, th.ServerOpt(0.05)),
    ((0.3, 0.0, 2.0, 1.0), 0.5, th.ServerOpt(0.02, 0.9, nesterov=True)),
])
def test_engine_adapter_and_reference_oracle_agree(a, alpha, server):
    """Deterministic LocalUpdate on the same QuadraticClients: the engine's iterates, objective and
    distance equal the reference oracle's iterates, ``clients.objective`` and ‖x − w*‖."""
    A, centres, p = _charles_examples(seed=1)
    clients = QuadraticClients.from_examples(A, centres, p)
    x0 = torch.ones(3, dtype=F64)
    rounds, gamma = 6, 0.05
    reference = th.local_update(clients, x0, np.asarray(a), gamma, server, rounds, alpha=alpha)
    engine_problem = QuadraticFederatedProblem(clients, x0=x0, record_iterates=True)
    algorithm = LocalUpdate(server_lr=server.lr, a=tuple(a), momentum=server.momentum, nesterov=server.nesterov,
                            alpha=alpha)
    history = run(engine_problem, algorithm, LocalWork(len(a)), LRSchedule("constant", gamma), rounds=rounds)
    iterates = torch.tensor(history[["x0", "x1", "x2"]].to_numpy())
    torch.testing.assert_close(iterates, reference, rtol=0, atol=1e-13)
    assert (reference[-1] - reference[0]).norm() > 0.05
    torch.testing.assert_close(torch.tensor(history["objective"].to_numpy()), clients.objective(reference),
                               rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(torch.tensor(history["distance"].to_numpy()),
                               torch.linalg.vector_norm(reference - clients.minimiser, dim=1), rtol=1e-12, atol=1e-13)


def test_engine_fedavg_on_li2020_equals_the_oracle():
    """FedAvg is LocalUpdate with a = 1_E and η = γ: the engine on Li's clients against the oracle."""
    clients = li2020_counterexample()
    reference = th.local_update(clients, torch.zeros(21, dtype=F64), th.ones(5), 0.4, th.ServerOpt(0.4), 4)
    history = run(QuadraticFederatedProblem(clients, record_iterates=True), LocalUpdate(server_lr=0.4),
                  LocalWork(5), LRSchedule("constant", 0.4), rounds=4)
    torch.testing.assert_close(torch.tensor(history[[f"x{i}" for i in range(21)]].to_numpy()), reference,
                               rtol=0, atol=1e-13)
    torch.testing.assert_close(torch.tensor(history["objective"].to_numpy()), clients.objective(reference),
                               rtol=1e-12, atol=1e-15)
