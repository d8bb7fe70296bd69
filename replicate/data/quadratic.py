"""Federated quadratics: the one data type behind Li et al. (2020)'s counterexample and
Charles & Konečný (2021)'s quadratic clients.

C clients; client c holds n examples i, each with a quadratic loss, all float64:

    ℓ_i(w) = ½ wᵀA_i w − r_iᵀw + s_i,
    F_c(w) = mean_i ℓ_i(w) = ½ wᵀA_c w − r_cᵀw + s_c,   A_c = mean_i A_i, r_c = mean_i r_i, s_c = mean_i s_i,
    F(w)   = Σ_c p_c F_c(w),   w* = (Σ_c p_c A_c)^{-1} Σ_c p_c r_c.

Symbols → names: A_i → ``example_hessians`` (C, n, d, d), r_i → ``example_linear`` (C, n, d),
s_i → ``example_constants`` (C, n), p_c → ``weights`` (C,); A_c → ``hessians``, r_c → ``linear``,
s_c → ``constants``, argmin F_c → ``optima``, w* → ``minimiser``.

Charles & Konečný 2021, §2.1 eq. (1): ℓ(x; z) = ½‖A_z^{1/2}(x − c_z)‖² = ½xᵀA_z x − (A_z c_z)ᵀx
+ ½c_zᵀA_z c_z, so :meth:`QuadraticClients.from_examples` stores r_z = A_z c_z and
s_z = ½c_zᵀA_z c_z, and ℓ is eq. (1) exactly; by eq. (3) client c has Hessian A_c = E_z A_z and
optimum c_c = A_c^{-1} E_z[A_z c_z] (``optima``); P is the client distribution p.

Li et al. 2020, §4 and App. C.1 (:func:`li2020_counterexample`): N devices share w ∈ R^d,
d = Np + 1. Device k owns a (p+1)-block of the path {(k−1)p+1, …, kp+1} (1-based): B_k has 2 on
the inner diagonal, 1 on the block's two end diagonals and −1 next to the diagonal. Neighbouring
blocks overlap in one coordinate, where their end 1s add up to 2, so Σ_k B_k is the tridiagonal
A = tridiag(−1, 2, −1) except for 1 at (1, 1) and (d, d). Hence A_1 = B_1 + E_{1,1},
A_N = B_N + E_{d,d}, the other A_k = B_k, which gives exactly Σ_k A_k = A. With b_1 = e_1 and
b_k = 0 otherwise (Σ_k b_k = b = e_1) and

    F_k(w) = ½ wᵀA_k w − b_kᵀw + (μ/2)‖w‖²,
    F(w)   = (1/N) Σ_k F_k(w) = (1/(2N)) (wᵀAw − 2bᵀw) + (μ/2)‖w‖²,

the minimiser solves (1/N)(Aw − b) + μw = 0, i.e. w* = (A + NμI)^{-1} b (spec §4). As
``QuadraticClients``: one example per device (n = 1), A_i = A_k + μI, r_i = b_k, s_i = 0, p_k = 1/N.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from replicate.core.errors import ReplicateError
from replicate.core.checks import check_nonnegative, check_positive_int

F64 = torch.float64


def _f64(values) -> torch.Tensor:
    return torch.as_tensor(values, dtype=F64)


@dataclass(frozen=True)
class QuadraticClients:
    """C clients' quadratic examples ℓ_i(w) = ½wᵀA_i w − r_iᵀw + s_i and client weights p (module docstring)."""

    example_hessians: torch.Tensor  # A_i, (C, n, d, d)
    example_linear: torch.Tensor  # r_i, (C, n, d)
    example_constants: torch.Tensor  # s_i, (C, n)
    weights: torch.Tensor  # p_c, (C,), summing to 1

    def __post_init__(self):
        A, r, s, p = self.example_hessians, self.example_linear, self.example_constants, self.weights
        if any(t.dtype != F64 for t in (A, r, s, p)):
            raise ReplicateError("QuadraticClients holds float64 tensors; build it with a from_* constructor")
        C, n, d = A.shape[0], A.shape[1], A.shape[-1]
        if A.shape != (C, n, d, d) or r.shape != (C, n, d) or s.shape != (C, n) or p.shape != (C,):
            raise ReplicateError(f"QuadraticClients needs A (C, n, d, d), r (C, n, d), s (C, n), p (C,); got "
                                 f"{tuple(A.shape)}, {tuple(r.shape)}, {tuple(s.shape)}, {tuple(p.shape)}")
        if C == 0 or n == 0 or bool((p < 0).any()) or abs(float(p.sum()) - 1.0) > 1e-9:
            raise ReplicateError("QuadraticClients needs at least one client and example, and weights p ≥ 0 "
                                 f"summing to 1 (got sum {float(p.sum()):.6g})")

    @classmethod
    def from_examples(cls, hessians, centres, weights) -> "QuadraticClients":
        """Charles & Konečný eq. (1): ℓ(x; z) = ½(x − c_z)ᵀA_z(x − c_z) for A_z (C, n, d, d), c_z (C, n, d)."""
        A, c = _f64(hessians), _f64(centres)
        if A.dim() != 4 or c.shape != A.shape[:3]:
            raise ReplicateError(f"from_examples needs hessians (C, n, d, d) and centres (C, n, d); got "
                                 f"{tuple(A.shape)} and {tuple(c.shape)}")
        r = torch.einsum("cnij,cnj->cni", A, c)
        s = 0.5 * torch.einsum("cni,cnij,cnj->cn", c, A, c)
        return cls(A, r, s, _f64(weights))

    @classmethod
    def from_clients(cls, hessians, optima, weights=None) -> "QuadraticClients":
        """One example per client, so A_c = A_z and c_c = c_z (eq. 3); ``weights`` are normalised (default 1/C)."""
        A, c = _f64(hessians), _f64(optima)
        p = torch.full((A.shape[0],), 1.0 / A.shape[0], dtype=F64) if weights is None else _f64(weights)
        return cls.from_examples(A[:, None], c[:, None], p / p.sum())

    @classmethod
    def from_linear(cls, hessians, linear, weights=None) -> "QuadraticClients":
        """One example per client with F_c(w) = ½wᵀH_c w − r_cᵀw (s_c = 0); p defaults to 1/C."""
        H, r = _f64(hessians), _f64(linear)
        C = H.shape[0]
        p = torch.full((C,), 1.0 / C, dtype=F64) if weights is None else _f64(weights)
        return cls(H[:, None], r[:, None], torch.zeros(C, 1, dtype=F64), p)

    @property
    def num_clients(self) -> int:
        return self.example_hessians.shape[0]

    @property
    def num_examples(self) -> int:
        """n, the examples per client."""
        return self.example_hessians.shape[1]

    @property
    def dim(self) -> int:
        return self.example_hessians.shape[-1]

    @cached_property
    def hessians(self) -> torch.Tensor:
        """A_c = mean_i A_i, (C, d, d)."""
        return self.example_hessians.mean(1)

    @cached_property
    def linear(self) -> torch.Tensor:
        """r_c = mean_i r_i, (C, d), so that ∇F_c(w) = A_c w − r_c."""
        return self.example_linear.mean(1)

    @cached_property
    def constants(self) -> torch.Tensor:
        """s_c = mean_i s_i, (C,)."""
        return self.example_constants.mean(1)

    @cached_property
    def optima(self) -> torch.Tensor:
        """argmin F_c = A_c^{-1} r_c, (C, d) (Charles & Konečný eq. 3: c_c = A_c^{-1} E_z[A_z c_z])."""
        return torch.linalg.solve(self.hessians, self.linear)

    @cached_property
    def minimiser(self) -> torch.Tensor:
        """w* = (Σ_c p_c A_c)^{-1} Σ_c p_c r_c, (d,)."""
        p = self.weights
        return torch.linalg.solve(torch.einsum("k,kij->ij", p, self.hessians), p @ self.linear)

    def client_objectives(self, w: torch.Tensor) -> torch.Tensor:
        """F_c(w) for every client c at one w of shape (..., d); returns (..., C)."""
        quad = torch.einsum("...i,kij,...j->...k", w, self.hessians, w)
        return 0.5 * quad - torch.einsum("kj,...j->...k", self.linear, w) + self.constants

    def objective(self, w: torch.Tensor) -> torch.Tensor:
        """F(w) = Σ_c p_c F_c(w) for w of shape (..., d)."""
        return self.client_objectives(w) @ self.weights

    def optimal_value(self) -> torch.Tensor:
        """F* = F(w*)."""
        return self.objective(self.minimiser)

    def grad_clients(self, w: torch.Tensor) -> torch.Tensor:
        """∇F_c(w_c) = A_c w_c − r_c for stacked client points w of shape (C, d)."""
        return torch.einsum("cij,cj->ci", self.hessians, w) - self.linear

    def client_level(self) -> "QuadraticClients":
        """The same F_c with each client's examples merged into one (A_c, r_c, s_c): what full gradients see."""
        if self.num_examples == 1:
            return self
        return QuadraticClients(self.hessians[:, None], self.linear[:, None], self.constants[:, None], self.weights)

    def replicate(self, copies: int) -> "QuadraticClients":
        """The same clients repeated ``copies`` times in dim 0 (Monte-Carlo replicates), weights p/copies."""
        return QuadraticClients(self.example_hessians.repeat(copies, 1, 1, 1), self.example_linear.repeat(copies, 1, 1),
                                self.example_constants.repeat(copies, 1), self.weights.repeat(copies) / copies)


def li2020_matrices(N: int = 5, p: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's A_k (N, d, d) and b_k (N, d) of App. C.1, d = Np + 1, without the μ term."""
    check_positive_int("N", N)
    check_positive_int("p", p)
    d = N * p + 1
    ones = torch.ones(p, dtype=F64)
    path = 2 * torch.eye(p + 1, dtype=F64) - torch.diag(ones, 1) - torch.diag(ones, -1)
    path[0, 0] = path[p, p] = 1
    A = torch.zeros(N, d, d, dtype=F64)
    for k in range(N):
        A[k, k * p:k * p + p + 1, k * p:k * p + p + 1] = path
    A[0, 0, 0] += 1
    A[N - 1, d - 1, d - 1] += 1
    b = torch.zeros(N, d, dtype=F64)
    b[0, 0] = 1
    return A, b


def li2020_counterexample(N: int = 5, p: int = 4, mu: float = 2e-4) -> QuadraticClients:
    """Li et al. (2020) App. C.1 with their values N = 5, p = 4 (d = 21), μ = 2e-4: A_k + μI, b_k, p_k = 1/N."""
    check_positive_int("N", N)
    check_positive_int("p", p)
    check_nonnegative("mu", mu)
    A, b = li2020_matrices(N, p)
    return QuadraticClients.from_linear(A + float(mu) * torch.eye(A.shape[-1], dtype=F64), b)
