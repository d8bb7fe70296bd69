"""Li et al. (2020)'s constants (theory.constants) and bounds (theory.bounds) on problems with known answers."""
import numpy as np
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.data.federated import FederatedDataset, Split
from replicate.fl import batches, models
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem
from replicate.theory import bounds
from replicate.theory import constants as C
from replicate.data.quadratic import QuadraticClients
from replicate.theory.reference import _gradients

from conftest import toy_dataset

F64 = torch.float64


# --- quadratics: every constant in closed form ---------------------------------------------------------------

def test_two_client_quadratic_by_hand():
    """F_1 = ½w², F_2 = (3/2)(w − 2)², p = (½, ½): w* = 1.5, F* = ½(½·1.5² + ½·3·0.5²) = 0.75 = Γ."""
    c = C.estimate_constants(QuadraticClients.from_clients([[[1.0]], [[3.0]]], [[0.0], [2.0]]))
    assert (c.L, c.mu, c.kappa, c.smoothness_is_exact) == (3.0, 1.0, 3.0, True)
    np.testing.assert_allclose(c.client_optimal_values, [0.0, 0.0], atol=1e-15)
    assert c.minimiser == pytest.approx([1.5], abs=1e-14)
    assert c.optimal_value == pytest.approx(0.75, abs=1e-14)
    assert c.heterogeneity == pytest.approx(0.75, abs=1e-14)
    assert c.grad_sq_bound == pytest.approx(1.5**2, abs=1e-13)  # full gradients at w*: max(1.5², (3·0.5)²)


def test_federated_quadratic_gamma_ignores_constant_shifts():
    """The same clients as ½wᵀH_k w − r_kᵀw (r_k = A_k c_k): F_k* = −½c_kᵀA_k c_k moves, Γ does not."""
    clients = QuadraticClients.from_linear([[[1.0]], [[3.0]]], [[0.0], [6.0]])
    c = C.estimate_constants(QuadraticFederatedProblem(clients))
    np.testing.assert_allclose(c.client_optimal_values, [0.0, -6.0], atol=1e-13)
    assert c.optimal_value == pytest.approx(-2.25, abs=1e-13)
    assert c.heterogeneity == pytest.approx(0.75, abs=1e-13)
    assert c.variances.tolist() == [0.0, 0.0]  # deterministic full gradients


def test_random_quadratic_against_closed_form():
    """F_k(w) = ½(w − c_k)ᵀA_k(w − c_k) + (λ/2)‖w‖², unequal p_k: spectra, w*, F*, F_k*, Γ."""
    rng = np.random.default_rng(0)
    N, d, lam = 5, 4, 0.3
    M = rng.standard_normal((N, d, d))
    A = M @ M.transpose(0, 2, 1) + 0.1 * np.eye(d)
    centres = rng.standard_normal((N, d))
    p = rng.uniform(1, 3, N)
    p /= p.sum()
    c = C.estimate_constants(QuadraticClients.from_clients(A, centres, p), weight_decay=lam)
    H = A + lam * np.eye(d)
    eig = np.linalg.eigvalsh(H)
    np.testing.assert_allclose(c.client_smoothness, eig[:, -1], rtol=1e-12)
    np.testing.assert_allclose(c.client_strong_convexity, eig[:, 0], rtol=1e-12)

    def F_k(k, w):
        return 0.5 * (w - centres[k]) @ A[k] @ (w - centres[k]) + 0.5 * lam * w @ w

    client_opt = [F_k(k, np.linalg.solve(H[k], A[k] @ centres[k])) for k in range(N)]
    w_star = np.linalg.solve(np.einsum("k,kij->ij", p, H), np.einsum("k,kij,kj->i", p, A, centres))
    F_star = sum(p[k] * F_k(k, w_star) for k in range(N))
    np.testing.assert_allclose(c.client_optimal_values, client_opt, rtol=1e-10)
    np.testing.assert_allclose(c.minimiser, w_star, rtol=1e-10)
    assert c.optimal_value == pytest.approx(F_star, rel=1e-10)
    assert c.heterogeneity == pytest.approx(F_star - p @ client_opt, rel=1e-9)
    assert c.heterogeneity > 0


def test_unbounded_quadratic_is_refused():
    """Two 1-d examples ½(w − 1)² and −½(w + 1)²: H = 0 but r ≠ 0, so F is linear and has no minimum."""
    problem = _one_dim_examples([1.0, -1.0], [1.0, -1.0])
    with pytest.raises(ReplicateError, match="unbounded"):
        C.optimal_values(problem)


# --- σ_k² and G² ---------------------------------------------------------------------------------------------

def _one_dim_examples(hessians, centres):
    """One client whose examples are 1-d quadratics ½a_z(w − c_z)²."""
    return QuadraticClients.from_examples(torch.tensor(hessians, dtype=F64).view(1, -1, 1, 1),
                                          torch.tensor(centres, dtype=F64).view(1, -1, 1), [1.0])


def test_variance_by_hand():
    """g_z = w − c_z with c = (−1, −1, 1, 1): S² = 1, so σ² = 1/b with replacement, (n − b)/(b(n − 1)) without."""
    problem = _one_dim_examples([1.0] * 4, [-1.0, -1.0, 1.0, 1.0])
    for w in (0.0, 0.7):
        assert C.gradient_variance(problem, [w], 2, replacement=True)[0, 0] == pytest.approx(0.5)
        assert C.gradient_variance(problem, [w], 2)[0, 0] == pytest.approx(1 / 3)
        assert C.gradient_variance(problem, [w], 4)[0, 0] == 0.0  # the whole set
        assert C.gradient_variance(problem, [w], None)[0, 0] == 0.0
        assert C.gradient_variance(QuadraticFederatedProblem(problem), [w], 2)[0, 0] == 0.0  # full gradients only
    # g_z = a_z w with a = (1, 3): ḡ = 2w, S² = w², E‖g‖² = (w² + 9w²)/2 = 5w² at b = 1
    problem = _one_dim_examples([1.0, 3.0], [0.0, 0.0])
    assert C.gradient_variance(problem, [[2.0], [-1.0]], 1, replacement=True)[:, 0] == pytest.approx([4.0, 1.0])
    assert C.expected_sq_grad_norm(problem, [2.0], 1, replacement=True)[0, 0] == pytest.approx(20.0)
    assert C.expected_sq_grad_norm(problem, [2.0], 1, weight_decay=0.5, replacement=True)[0, 0] == \
        pytest.approx((2 * 2 + 0.5 * 2) ** 2 + 4.0)


def test_variance_on_least_squares_matches_formula_and_sampling():
    """ℓ_i = ½(a_iᵀw − y_i)² as the reference quadratic A_i = a_i a_iᵀ, c_i = a_i y_i/‖a_i‖²: the exact σ²
    equals S²/b from the residual gradients, and the variance of the reference's own mini-batches."""
    rng = np.random.default_rng(1)
    n, d, b = 30, 3, 5
    a, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    problem = QuadraticClients.from_examples(np.einsum("ni,nj->nij", a, a)[None], (a * (y / (a * a).sum(1))[:, None])[None],
                                             [1.0])
    w = rng.standard_normal(d)
    g = a * (a @ w - y)[:, None]
    analytic = ((g - g.mean(0)) ** 2).sum(1).mean() / b
    assert C.gradient_variance(problem, w, b, replacement=True)[0, 0] == pytest.approx(analytic, rel=1e-12)
    draws = _gradients(problem.replicate(20000), torch.tensor(w).expand(20000, d), b, torch.Generator().manual_seed(2))
    empirical = float(((draws - torch.tensor(g.mean(0))) ** 2).sum(1).mean())
    assert empirical == pytest.approx(analytic, rel=0.05)


@pytest.fixture(scope="module")
def logistic():
    ds = toy_dataset(num_clients=4, features=4, classes=3, seed=3)
    return SampleProblem(ds, models.build("logistic", ds.num_features, ds.num_classes))


def test_logistic_variance_matches_engine_batches(logistic):
    """Exact σ_k² (without replacement) against the variance of the engine's own mini-batches."""
    b, draws = 8, 4000
    w = torch.randn(logistic.model.num_params, generator=torch.Generator().manual_seed(4), dtype=F64)
    exact = C.gradient_variance(logistic, w, b)[0]
    generator = torch.Generator().manual_seed(5)
    for k in range(logistic.num_clients):
        lo, n = int(logistic.train.offsets[k]), int(logistic.sizes[k])
        pos, _ = batches.draw_batch_positions(torch.tensor([n]), draws, b, generator)
        g = logistic.grad(w.float().expand(draws, -1), None, (pos[0] + lo, None)).double()
        full = logistic.grad(w.float()[None], None, (torch.arange(lo, lo + n)[None], None)).double()
        assert float(((g - full) ** 2).sum(1).mean()) == pytest.approx(exact[k], rel=0.1)


def test_logistic_closed_form_moments_equal_per_sample_gradients(logistic):
    """The float64 closed form ‖x̃‖²‖p − y‖² against per-sample gradients through problem.grad; also G²."""
    rng = np.random.default_rng(6)
    iterates = rng.standard_normal((2, logistic.num_clients, logistic.model.num_params))  # local models w_t^k
    generic = C._Samples(logistic)
    for args in [(8,), (8, True), (None,)]:
        np.testing.assert_allclose(C.gradient_variance(logistic, iterates, *args),
                                   C.gradient_variance(logistic, iterates, *args, view=generic), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(C.expected_sq_grad_norm(logistic, iterates, 8, weight_decay=0.1),
                               C.expected_sq_grad_norm(logistic, iterates, 8, weight_decay=0.1, view=generic),
                               rtol=1e-5)
    with pytest.raises(ReplicateError, match="iterates"):
        C.gradient_variance(logistic, iterates[:, :2], 8)


# --- logistic L, μ and optima ---------------------------------------------------------------------------------

def _client_hessian(problem, k, w, lam):
    lo, hi = int(problem.train.offsets[k]), int(problem.train.offsets[k + 1])
    x, y = problem.x[lo:hi].double(), problem.y[lo:hi]

    def objective(v):
        return problem.model.per_sample_loss(v, x, y).mean() + 0.5 * lam * v @ v

    return torch.autograd.functional.hessian(objective, w)


def test_logistic_smoothness_bound_holds_and_mu_is_exact(logistic):
    lam = 1e-2
    L_k, mu_k, exact = C.smoothness(logistic, lam)
    assert not exact and mu_k.tolist() == [lam] * logistic.num_clients
    generator = torch.Generator().manual_seed(7)
    for scale in (0.0, 0.3, 3.0):
        w = scale * torch.randn(logistic.model.num_params, generator=generator, dtype=F64)
        for k in range(logistic.num_clients):
            eig = torch.linalg.eigvalsh(_client_hessian(logistic, k, w, lam))
            assert float(eig[-1]) <= L_k[k] * (1 + 1e-12)
            assert float(eig[0]) == pytest.approx(lam, rel=1e-8)  # the 1_C direction: μ_k = λ is attained


def test_logistic_smoothness_bound_is_attained_for_two_classes_at_zero():
    """C = 2, w = 0: p = (½, ½), diag p − ppᵀ has eigenvalue ½, so the bound is the largest eigenvalue."""
    ds = toy_dataset(num_clients=2, features=3, classes=2, seed=8)
    problem = SampleProblem(ds, models.build("logistic", ds.num_features, ds.num_classes))
    L_k = C.smoothness(problem)[0]
    for k in range(2):
        top = torch.linalg.eigvalsh(_client_hessian(problem, k, torch.zeros(problem.model.num_params, dtype=F64), 0.0))
        assert float(top[-1]) == pytest.approx(L_k[k], rel=1e-10)


def test_logistic_optima_are_stationary_to_tolerance(logistic):
    lam = 1e-2
    c = C.estimate_constants(logistic, weight_decay=lam, batch_size=8)
    w_star = torch.tensor(c.minimiser)
    p = logistic.weights()

    def F(v):
        losses = logistic.model.per_sample_loss(v, logistic.x.double(), logistic.y)
        sample_weights = torch.repeat_interleave(p / logistic.sizes, logistic.sizes)
        return sample_weights @ losses + 0.5 * lam * v @ v

    grad = torch.autograd.functional.jacobian(F, w_star)
    assert float(torch.linalg.vector_norm(grad)) <= 1e-9
    assert float(F(w_star)) == pytest.approx(c.optimal_value, abs=1e-12)
    assert 0 < c.heterogeneity and c.solver_error < 1e-15
    rng = np.random.default_rng(9)
    for k in range(logistic.num_clients):  # F_k* is a lower bound of F_k, attained near its own minimiser only
        lo, hi = int(logistic.train.offsets[k]), int(logistic.train.offsets[k + 1])
        for v in [w_star, torch.tensor(rng.standard_normal(w_star.numel()))]:
            value = logistic.model.per_sample_loss(v, logistic.x[lo:hi].double(), logistic.y[lo:hi]).mean()
            assert float(value + 0.5 * lam * v @ v) >= c.client_optimal_values[k] - 1e-12
    assert set(c.summary()) >= {"L", "mu", "kappa", "Gamma", "sum_p2_sigma2", "G2"}


def test_identical_clients_have_no_heterogeneity():
    """Γ = 0 when every client holds the same samples (F_k = F for all k)."""
    rs = np.random.RandomState(10)
    x, y = rs.randn(25, 3).astype(np.float32), rs.randint(0, 3, 25)
    ds = FederatedDataset("copies", Split.from_clients([x] * 3, [y] * 3), None, 3)
    problem = SampleProblem(ds, models.build("logistic", 3, 3))
    c = C.estimate_constants(problem, weight_decay=1e-3)
    assert abs(c.heterogeneity) <= 1e-12
    np.testing.assert_allclose(c.client_optimal_values, c.optimal_value, atol=1e-12)
    with pytest.raises(ReplicateError, match="weight_decay"):
        C.optimal_values(problem, weight_decay=0.0)


# --- bounds --------------------------------------------------------------------------------------------------

P, SIGMA2, GAMMA_, G2 = [0.5, 0.5], [1.0, 3.0], 0.5, 1.0  # Σp²σ² = 1


def test_theorem_bounds_by_hand():
    """L = 2, μ = 1 (κ = 2), E = 4: γ = 16, B = 1 + 6·2·0.5 + 8·9·1 = 79."""
    assert bounds.gamma(2.0, 4) == 16.0 and bounds.gamma(2.0, 4, gamma_kappa_factor=5) == 10.0
    assert bounds.gamma(2.0, 40) == 40.0
    assert bounds.step_size(0, mu=1.0, kappa=2.0, local_steps=4) == pytest.approx(1 / 8)  # = 1/(4L)
    B = bounds.B_term(weights=P, variances=SIGMA2, L=2.0, heterogeneity=GAMMA_, grad_sq_bound=G2, local_steps=4)
    assert B == 79.0
    # paper eq. (4): 2κ/(γ+T)·(B/μ + 2L‖w0 − w*‖²) = 4/100·(79 + 4) at T = 84, ‖w0 − w*‖² = 1
    kw = dict(L=2.0, mu=1.0, B=B, local_steps=4, init_dist_sq=1.0)
    assert bounds.fedavg_bound(84, **kw) == pytest.approx(3.32)
    # notes eq. (3): κ/(γ+T−1)·(2B/μ + μγ/2·‖w1 − w*‖²) = 2/99·(158 + 8)
    assert bounds.fedavg_bound(84, form="notes", **kw) == pytest.approx(332 / 99)
    # Scheme I: C = 4E²G²/K = 32 at K = 2; Scheme II with N = 4: C·(N − K)/(N − 1) = 64/3
    C1 = bounds.C_term(local_steps=4, grad_sq_bound=G2, clients_per_round=2)
    C2 = bounds.C_term(local_steps=4, grad_sq_bound=G2, clients_per_round=2, num_clients=4, scheme="II")
    assert (C1, C2) == (32.0, pytest.approx(64 / 3))
    assert bounds.C_term(local_steps=4, grad_sq_bound=G2, clients_per_round=4, num_clients=4, scheme="II") == 0
    assert bounds.fedavg_bound(84, C=C1, **kw) == pytest.approx(0.04 * (111 + 4))
    T = np.array([16, 160, 1600])
    assert np.all(np.diff(bounds.fedavg_bound(T, **kw)) < 0)


def test_bound_from_constants_matches_scalars():
    c = C.estimate_constants(QuadraticClients.from_clients([[[1.0]], [[3.0]]], [[0.0], [2.0]]))
    B = bounds.B_term(weights=c.weights, variances=c.variances, L=3.0, heterogeneity=0.75,
                      grad_sq_bound=c.grad_sq_bound, local_steps=5)
    expected = bounds.fedavg_bound([50, 500], L=3.0, mu=1.0, B=B, C=4 * 25 * c.grad_sq_bound / 1, local_steps=5,
                                   init_dist_sq=2.0)
    got = bounds.fedavg_bound_from(c, [50, 500], local_steps=5, init_dist_sq=2.0, scheme="I", clients_per_round=1)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_notes_five_kappa_breaks_lemma_1():
    """γ = max{8κ, E} gives η_0 = 1/(4L) exactly; the notes' 5κ gives η_0 = 2/(5L) > 1/(4L) (also from t = 1)."""
    ok = bounds.step_size_conditions(L=10.0, mu=0.1, local_steps=20)
    assert ok == {"eta_at_most_1_over_4L": True, "eta_at_most_twice_eta_after_E": True}
    for first in (0, 1):
        notes = bounds.step_size_conditions(L=10.0, mu=0.1, local_steps=20, gamma_kappa_factor=5, first_step=first)
        assert not notes["eta_at_most_1_over_4L"]


def test_optimal_local_steps_of_eq8():
    """A = Σp²σ² + LΓ + κG² = 1 + 1 + 2 = 4: E* = √(4/G²) = 2 (full), √(4/2) with K = 1."""
    kw = dict(weights=P, variances=SIGMA2, L=2.0, mu=1.0, heterogeneity=GAMMA_, grad_sq_bound=G2)
    assert bounds.optimal_local_steps(**kw) == pytest.approx(2.0)
    assert bounds.optimal_local_steps(clients_per_round=1, **kw) == pytest.approx(np.sqrt(2.0))
    E_star = bounds.optimal_local_steps(clients_per_round=10, **kw)
    around = bounds.rounds_proxy(np.array([0.8, 1.0, 1.25]) * E_star, clients_per_round=10, **kw)
    assert around[1] < around[0] and around[1] < around[2]
    assert bounds.rounds_proxy(2.0, **kw) == pytest.approx(2 + 4 / 2)


def test_rounds_to_accuracy_inverts_the_bound():
    """E = 1: B = 1 + 6 + 0 = 7, T_ε = 2κ(B/μ + 2L·1)/ε − γ = 4·11 − 16 = 28 at ε = 1, and the bound there is ε."""
    kw = dict(weights=P, variances=SIGMA2, L=2.0, mu=1.0, heterogeneity=GAMMA_, grad_sq_bound=G2, init_dist_sq=1.0)
    assert bounds.rounds_to_accuracy(1, 1.0, **kw) == pytest.approx(28.0)
    for E in (2, 5):
        rounds = bounds.rounds_to_accuracy(E, 0.5, scheme="I", clients_per_round=3, **kw)
        B = bounds.B_term(weights=P, variances=SIGMA2, L=2.0, heterogeneity=GAMMA_, grad_sq_bound=G2, local_steps=E)
        Cs = bounds.C_term(local_steps=E, grad_sq_bound=G2, clients_per_round=3)
        assert bounds.fedavg_bound(rounds * E, L=2.0, mu=1.0, B=B, C=Cs, local_steps=E, init_dist_sq=1.0) == \
            pytest.approx(0.5)
    assert bounds.rounds_to_accuracy([1, 2], 1.0, **kw).shape == (2,)


def test_scheme2_transform():
    t = bounds.scheme2_transform(L=2.0, mu=1.0, variances=[1.0, 2.0], grad_sq_bound=1.0, weights=[0.25, 0.75])
    assert (t["L"], t["mu"], t["grad_sq_bound"]) == (3.0, 0.5, 2.25)  # ν = 1.5, ς = 0.5
    np.testing.assert_allclose(t["variances"], [2.25, 4.5])


def test_nonconvex_bound_terms():
    """Notes eq. (14), T = 100, η = 0.1, L = 2, F(w̄_0) − F* = 5: 2/(10)·5 = 1, Σp²σ² = 1, (0.2 − 1)·½ = −0.4."""
    kw = dict(weights=P, variances=SIGMA2, grad_sq_bound=G2, initial_gap=5.0)
    terms = bounds.nonconvex_bound(100, lr=0.1, L=2.0, **kw)
    assert (float(terms.optimisation), terms.variance, terms.gradient_norm) == \
        (pytest.approx(1.0), 1.0, pytest.approx(-0.4))
    assert float(terms.total) == pytest.approx(1.6)
    assert bounds.nonconvex_bound(100, lr=1.0, L=2.0, **kw).gradient_norm > 0  # ηL > 1
    assert bounds.nonconvex_bound(100, lr=0.5, L=2.0, **kw).gradient_norm == 0  # ηL = 1
    assert np.all(np.diff(bounds.nonconvex_bound([10, 100, 1000], lr=0.1, L=2.0, **kw).optimisation) < 0)


def test_bad_arguments_are_refused():
    with pytest.raises(ReplicateError):
        bounds.fedavg_bound(10, L=1.0, mu=1.0, B=1.0, local_steps=1, init_dist_sq=1.0, form="arxiv")
    with pytest.raises(ReplicateError):
        bounds.C_term(local_steps=2, grad_sq_bound=1.0, scheme="III")
    with pytest.raises(ReplicateError):
        bounds.C_term(local_steps=2, grad_sq_bound=1.0, clients_per_round=2, scheme="II")
    with pytest.raises(ReplicateError):
        C.estimate_constants(object())
