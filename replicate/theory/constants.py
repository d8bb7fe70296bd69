"""The constants of Li et al. (2020)'s assumptions, estimated on a federated problem.

Li, Huang, Yang, Wang & Zhang, "On the Convergence of FedAvg on Non-IID Data" (ICLR 2020),
§3.1, restated unchanged in Cheng's lecture notes §2: Assumption 1 (every F_k is L-smooth),
Assumption 2 (μ-strongly convex), Assumption 3 (E‖∇F_k(w, ξ) − ∇F_k(w)‖² ≤ σ_k²),
Assumption 4 (E‖∇F_k(w, ξ)‖² ≤ G²) and the heterogeneity Γ = F* − Σ_k p_k F_k*.

Every objective includes the weight decay that the engine adds to the gradient as λw:
F_k(w) = f_k(w) + (λ/2)‖w‖², with f_k the mean sample loss of client k. Problems handled:

* ``SampleProblem`` with ``LogisticRegression``: all constants; L_k is an upper bound (below).
  Other models: σ_k² and G² only (per-sample gradients through ``problem.grad``).
* ``data.quadratic.QuadraticClients`` (per-example ½wᵀA_i w − r_iᵀw + s_i, e.g. Charles & Konečný's
  ½(w − c_z)ᵀA_z(w − c_z)) and the engine's ``QuadraticFederatedProblem`` over it (full gradients,
  so σ_k = 0 there): all exact.

Logistic smoothness. With x̃ = (x, 1) and W ∈ R^{(d+1)×C}, the Hessian of one sample's
cross-entropy is (diag p − ppᵀ) ⊗ x̃x̃ᵀ, p = softmax(Wᵀx̃). For a unit v ∈ R^C,
vᵀ(diag p − ppᵀ)v is the variance of v_i under i ~ p, at most (max v − min v)²/4 ≤ ½
(Popoviciu), so ∇²F_k ≼ ½ I_C ⊗ (X̃_kᵀX̃_k/n_k) + λI and we use the bound
L_k = ½ λ_max(X̃_kᵀX̃_k/n_k) + λ. It is loose wherever predictions are confident.
Strong convexity μ_k = λ is exact: (diag p − ppᵀ)1 = 0, so every data Hessian is singular.

Optima. F* and F_k* are found in float64 by trust-region Newton-CG (exact Hessian-vector
products), then full Newton steps accepted on a smaller ‖∇F‖ (near w* the values stop
resolving progress), until ‖∇F‖ ≤ ``tol`` (default 1e-10); quadratics are solved directly. Strong
convexity certifies F(ŵ) − F* ≤ ‖∇F(ŵ)‖²/(2μ); ``Constants.solver_error`` sums these bounds
into a bound on the error of Γ.

Symbols → names: p_k → ``weights``, L → ``smoothness``, μ → ``strong_convexity``,
σ_k² → ``variances``, G² → ``grad_sq_bound``, F* → ``optimal_value``, F_k* →
``client_optimal_values``, Γ → ``heterogeneity``, b → ``batch_size``, λ → ``weight_decay``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.sparse.linalg
import torch

from replicate.core.errors import ReplicateError
from replicate.data.quadratic import QuadraticClients
from replicate.fl.models.linear import LogisticRegression
from replicate.fl.problems import QuadraticFederatedProblem, SampleProblem

F64 = torch.float64


@dataclass(frozen=True)
class Constants:
    """Li et al. §3.1's constants on one problem; ``L``, ``mu``, ``kappa`` follow Assumptions 1-2."""

    weights: np.ndarray  # p_k
    client_smoothness: np.ndarray  # L_k (an upper bound unless smoothness_is_exact)
    client_strong_convexity: np.ndarray  # μ_k
    smoothness_is_exact: bool
    optimal_value: float  # F*
    client_optimal_values: np.ndarray  # F_k*
    minimiser: np.ndarray  # w*
    solver_error: float  # certified bound on the error of Γ from the solvers' final gradients
    weight_decay: float  # λ
    batch_size: int | None  # b (None: full local gradients)
    variances: np.ndarray  # σ_k², the largest over the iterates given
    grad_sq_bound: float  # G², the largest E‖∇F_k(w, ξ)‖² over clients and iterates

    @property
    def num_clients(self) -> int:
        return len(self.weights)

    @property
    def L(self) -> float:
        return float(self.client_smoothness.max())

    @property
    def mu(self) -> float:
        return float(self.client_strong_convexity.min())

    @property
    def kappa(self) -> float:
        return self.L / self.mu if self.mu > 0 else float("inf")

    @property
    def heterogeneity(self) -> float:
        """Γ = F* − Σ_k p_k F_k* (Li et al. §3.1)."""
        return float(self.optimal_value - self.weights @ self.client_optimal_values)

    @property
    def weighted_variance(self) -> float:
        """Σ_k p_k² σ_k², the first term of B (Li et al. eq. 5)."""
        return float(self.weights**2 @ self.variances)

    def summary(self) -> dict:
        """The scalars a table or a bound needs, as one flat dict."""
        return {"N": self.num_clients, "L": self.L, "L_is_bound": not self.smoothness_is_exact, "mu": self.mu,
                "kappa": self.kappa, "F*": self.optimal_value, "Gamma": self.heterogeneity,
                "Gamma_error_bound": self.solver_error, "sum_p2_sigma2": self.weighted_variance,
                "max_sigma2": float(self.variances.max()), "G2": self.grad_sq_bound,
                "batch_size": self.batch_size, "weight_decay": self.weight_decay}


def estimate_constants(problem, *, weight_decay: float = 0.0, batch_size: int | None = None, iterates=None,
                       replacement: bool = False, tol: float = 1e-10) -> Constants:
    """All constants of ``problem``; σ_k² and G² are maximised over ``iterates`` (default: w* alone).

    ``iterates``: (P,), (T, P) shared by all clients, or (T, N, P) local models w_t^k (what
    Assumptions 3-4 are about). ``replacement``: how a mini-batch of b samples is drawn (the
    engine draws without replacement; ``reference`` with).
    """
    view = _view(problem)
    client_L, client_mu, exact = view.curvature(weight_decay)
    F_star, client_F_star, w_star, error = view.solve(weight_decay, tol)
    points = w_star if iterates is None else iterates
    variances = gradient_variance(problem, points, batch_size, replacement, view=view)
    sq_norms = expected_sq_grad_norm(problem, points, batch_size, weight_decay, replacement, view=view)
    return Constants(view.weights, client_L, client_mu, exact, F_star, client_F_star, w_star, error,
                     weight_decay, batch_size, variances.max(0), float(sq_norms.max()))


def smoothness(problem, weight_decay: float = 0.0) -> tuple[np.ndarray, np.ndarray, bool]:
    """(L_k, μ_k, exact) per client: exact spectra for quadratics, the stated bound for logistic."""
    return _view(problem).curvature(weight_decay)


def optimal_values(problem, weight_decay: float = 0.0, tol: float = 1e-10):
    """(F*, F_k* (N,), w*, certified error bound on Γ), solved in float64 to ‖∇F‖ ≤ ``tol``."""
    return _view(problem).solve(weight_decay, tol)


def gradient_variance(problem, iterates, batch_size: int | None, replacement: bool = False, *, view=None):
    """σ_k²(w) = E‖∇F_k(w, ξ) − ∇F_k(w)‖² for a b-sample mini-batch ξ, shape (T, N).

    Exact, from the per-sample gradients g_i: with S² = (1/n_k) Σ_i ‖g_i − ḡ‖², it is S²/b
    with replacement and S²(n_k − b)/(b(n_k − 1)) without (0 for b ≥ n_k or full batches).
    """
    view = view or _view(problem)
    return np.stack([_batch_factor(view.sizes, batch_size, replacement) * view.moments(w)[1]
                     for w in _per_client(iterates, view)])


def expected_sq_grad_norm(problem, iterates, batch_size: int | None, weight_decay: float = 0.0,
                          replacement: bool = False, *, view=None):
    """E‖∇F_k(w, ξ)‖² = ‖∇F_k(w)‖² + σ_k²(w), shape (T, N); G² is its largest entry."""
    view = view or _view(problem)
    out = []
    for w in _per_client(iterates, view):
        mean, spread = view.moments(w)
        full = torch.linalg.vector_norm(mean + weight_decay * w, dim=1) ** 2
        out.append(full.numpy() + _batch_factor(view.sizes, batch_size, replacement) * spread)
    return np.stack(out)


def _batch_factor(sizes: np.ndarray, b: int | None, replacement: bool) -> np.ndarray:
    if b is None:
        return np.zeros(len(sizes))
    if replacement:
        return np.full(len(sizes), 1.0 / b)
    n = sizes.astype(float)
    return np.where(n > b, (n - b) / (b * np.maximum(n - 1, 1)), 0.0)


def _per_client(iterates, view):
    """Iterates as a list of (N, P) float64 tensors, one point per client."""
    w = torch.as_tensor(np.asarray(iterates) if not torch.is_tensor(iterates) else iterates).to("cpu", F64)
    if w.dim() == 1:
        w = w[None]
    if w.dim() == 2:
        w = w[:, None].expand(-1, len(view.weights), -1)
    if w.dim() != 3 or w.shape[1:] != (len(view.weights), view.num_params):
        raise ReplicateError(f"iterates must be (P,), (T, P) or (T, N, P) with N={len(view.weights)}, "
                             f"P={view.num_params}; got {tuple(w.shape)}")
    return list(w)


def _view(problem):
    if isinstance(problem, QuadraticClients):
        return _Quadratic(problem)
    if isinstance(problem, QuadraticFederatedProblem):  # the engine takes full gradients, so σ_k = 0
        return _Quadratic(problem.clients.client_level())
    if isinstance(problem, SampleProblem):
        return _Logistic(problem) if isinstance(problem.model, LogisticRegression) else _Samples(problem)
    raise ReplicateError(f"no constants for {type(problem).__name__}: use a SampleProblem or a quadratic problem")


class _Quadratic:
    """F_k(w) = mean_i (½wᵀA_i w − r_iᵀw + s_i) + (λ/2)‖w‖² over client k's examples i (``QuadraticClients``)."""

    def __init__(self, clients: QuadraticClients):
        self.clients = clients
        self.A, self.r = clients.example_hessians, clients.example_linear  # (N, n, d, d), (N, n, d)
        self.weights = clients.weights.numpy()
        self.sizes = np.full(clients.num_clients, clients.num_examples)
        self.num_params = clients.dim

    def curvature(self, lam):
        eig = torch.linalg.eigvalsh(self.clients.hessians) + lam
        return eig[:, -1].numpy(), eig[:, 0].numpy(), True

    def solve(self, lam, tol):
        eye = lam * torch.eye(self.num_params, dtype=F64)
        H, r, s = self.clients.hessians + eye, self.clients.linear, self.clients.constants
        p = torch.as_tensor(self.weights)
        values, points = [], []
        for Hk, rk, sk in [*zip(H, r, s), (torch.einsum("k,kij->ij", p, H), p @ r, p @ s)]:
            w = torch.linalg.lstsq(Hk, rk[:, None], rcond=None).solution[:, 0]
            if torch.linalg.vector_norm(Hk @ w - rk) > max(tol, 1e-9 * float(torch.linalg.vector_norm(rk))):
                raise ReplicateError("a quadratic objective is unbounded below (singular Hessian): no F*")
            values.append(float(0.5 * w @ Hk @ w - rk @ w + sk))
            points.append(w)
        return values[-1], np.array(values[:-1]), points[-1].numpy(), 0.0

    def moments(self, w):
        g = torch.einsum("knij,kj->kni", self.A, w) - self.r
        mean = g.mean(1)
        return mean, ((g - mean[:, None]) ** 2).sum(-1).mean(1).numpy()


class _Samples:
    """Per-sample gradients of any model through ``problem.grad`` (no regulariser: it is λw, not random)."""

    chunk = 256

    def __init__(self, problem: SampleProblem):
        self.problem = problem
        self.weights = np.asarray(problem.weights().cpu(), dtype=float)
        self.offsets = problem.train.offsets.cpu()
        self.sizes = np.asarray(self.offsets[1:] - self.offsets[:-1])
        self.num_params = problem.model.num_params

    def curvature(self, lam):
        name = type(self.problem.model).__name__
        raise ReplicateError(f"L, μ and F* are only available for the logistic model, not {name}")

    solve = curvature

    def moments(self, w):
        """(ḡ_k (N, P), S²_k (N,)), merging chunks with Chan et al.'s pairwise update, in float64."""
        means, spreads = torch.zeros(len(self.sizes), self.num_params, dtype=F64), np.zeros(len(self.sizes))
        device, dtype = self.problem.device, self.problem.dtype
        for k in range(len(self.sizes)):
            count, mean, m2 = 0, torch.zeros(self.num_params, dtype=F64), 0.0
            point = w[k].to(device, dtype)
            for lo in range(int(self.offsets[k]), int(self.offsets[k + 1]), self.chunk):
                rows = torch.arange(lo, min(lo + self.chunk, int(self.offsets[k + 1])), device=device)
                g = self.problem.grad(point.expand(rows.numel(), -1), None, (rows[:, None], None)).to("cpu", F64)
                m, c = g.mean(0), rows.numel()
                delta = m - mean
                m2 += float(((g - m) ** 2).sum()) + float(delta @ delta) * count * c / (count + c)
                mean, count = mean + delta * c / (count + c), count + c
            means[k], spreads[k] = mean, m2 / max(count, 1)
        return means, spreads


class _Logistic(_Samples):
    """Multinomial logistic regression in float64: per-sample g_i = x̃_i (p_i − y_i)ᵀ in closed form."""

    def __init__(self, problem: SampleProblem):
        super().__init__(problem)
        self.x = problem.x_prepared.to("cpu", F64)  # (n, d+1), a ones column for the bias
        self.y = problem.y_prepared.to("cpu", F64)  # (n, C) one-hot
        self.classes = self.y.shape[1]
        self.bounds = list(zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))

    def curvature(self, lam):
        top = [float(torch.linalg.eigvalsh(self.x[lo:hi].T @ self.x[lo:hi] / (hi - lo))[-1]) for lo, hi in self.bounds]
        return 0.5 * np.array(top) + lam, np.full(len(top), float(lam)), False

    def moments(self, w):
        means, spreads = [], []
        for (lo, hi), wk in zip(self.bounds, w):
            x = self.x[lo:hi]
            e = torch.softmax(x @ wk.view(-1, self.classes), 1) - self.y[lo:hi]
            mean = (e.T @ x).T.reshape(-1) / (hi - lo)
            sq = ((x * x).sum(1) * (e * e).sum(1)).mean()  # ‖x̃ eᵀ‖² = ‖x̃‖²‖e‖²
            means.append(mean)
            spreads.append(max(float(sq - mean @ mean), 0.0))
        return torch.stack(means), np.array(spreads)

    def solve(self, lam, tol):
        if lam <= 0:
            raise ReplicateError("F_k* needs weight_decay > 0 for the logistic model (separable data has no minimiser)")
        sample_weights = torch.cat([torch.full((hi - lo,), p / (hi - lo), dtype=F64)
                                    for (lo, hi), p in zip(self.bounds, self.weights)])
        client_values, error = [], 0.0
        for (lo, hi), p in zip(self.bounds, self.weights):
            uniform = torch.full((hi - lo,), 1.0 / (hi - lo), dtype=F64)
            _, value, gnorm = self._minimise(slice(lo, hi), uniform, lam, tol)
            client_values.append(value)
            error += p * gnorm**2 / (2 * lam)
        w_star, F_star, gnorm = self._minimise(slice(None), sample_weights, lam, tol)
        return F_star, np.array(client_values), w_star, float(error + gnorm**2 / (2 * lam))

    def _minimise(self, rows, omega, lam, tol):
        """argmin Σ_i ω_i ℓ_i(w) + (λ/2)‖w‖² by trust-region Newton-CG, then Newton polish; (w, value, ‖∇‖)."""
        x, y, c = self.x[rows], self.y[rows], self.classes
        cache = {}

        def log_probs(w):  # CG calls hessp many times at one w
            key = w.tobytes()
            if cache.get("key") != key:
                cache.update(key=key, logp=torch.log_softmax(x @ torch.from_numpy(w).view(-1, c), 1))
            return cache["logp"]

        def back(m):  # xᵀm as (mᵀx)ᵀ: several times faster than a transposed tall left operand
            return (m.T @ x).T.reshape(-1).numpy()

        def fun(w):
            logp = log_probs(w)
            value = -(omega * (logp * y).sum(1)).sum() + 0.5 * lam * float(w @ w)
            return float(value), back(omega[:, None] * (logp.exp() - y)) + lam * w

        def hessp(w, v):
            p = log_probs(w).exp()
            z = x @ torch.from_numpy(np.asarray(v, dtype=np.float64)).view(-1, c)
            return back(omega[:, None] * p * (z - (p * z).sum(1, keepdim=True))) + lam * v  # (diag p − ppᵀ)z

        w = scipy.optimize.minimize(fun, np.zeros(x.shape[1] * c), jac=True, hessp=hessp, method="trust-ncg",
                                    options={"gtol": tol, "maxiter": 500}).x
        value, grad = fun(w)
        for _ in range(20):  # polish by full Newton steps judged on ‖∇F‖: near w* values no longer resolve progress
            if np.linalg.norm(grad) <= tol:
                break
            hessian = scipy.sparse.linalg.LinearOperator((w.size, w.size), matvec=lambda v, w=w: hessp(w, v),
                                                        dtype=np.float64)
            rtol = min(0.5, max(1e-12, 0.1 * tol / np.linalg.norm(grad)))  # just enough to reach tol
            step = scipy.sparse.linalg.cg(hessian, -grad, rtol=rtol, maxiter=20 * w.size)[0]
            trial = fun(w + step)
            if np.linalg.norm(trial[1]) >= np.linalg.norm(grad):
                break
            w, (value, grad) = w + step, trial
        gnorm = float(np.linalg.norm(grad))
        if gnorm > 10 * tol:
            raise ReplicateError(f"logistic solve stopped at ‖∇F‖ = {gnorm:.2e} > tol = {tol:.0e}")
        return w, value, gnorm
