"""The quadratic counterexample of Li et al. (2020), §4 and App. C.1.

N devices share w ∈ R^d, d = Np + 1. Device k owns a (p+1)-block of the path
{(k−1)p+1, …, kp+1} (1-based): B_k has 2 on the inner diagonal, 1 on the block's two
end diagonals and −1 next to the diagonal. Neighbouring blocks overlap in one
coordinate, where their end 1s add up to 2, so Σ_k B_k is the tridiagonal
A = tridiag(−1, 2, −1) except for 1 at (1, 1) and (d, d). Hence A_1 = B_1 + E_{1,1},
A_N = B_N + E_{d,d}, the other A_k = B_k, which gives exactly Σ_k A_k = A. With b_1 = e_1
and b_k = 0 otherwise (Σ_k b_k = b = e_1) and

    F_k(w) = ½ wᵀA_k w − b_kᵀw + (μ/2)‖w‖²,
    F(w)   = (1/N) Σ_k F_k(w) = (1/(2N)) (wᵀAw − 2bᵀw) + (μ/2)‖w‖²,

the minimiser solves (1/N)(Aw − b) + μw = 0, i.e. w* = (A + NμI)^{-1} b (spec §4).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from replicate.data.checks import check_nonnegative, check_positive_int


@dataclass(frozen=True)
class QuadraticProblem:
    """Devices' quadratics F_k(w) = ½wᵀA_k w − b_kᵀw + (μ/2)‖w‖², all float64."""

    A: torch.Tensor  # (N, d, d), stacked A_k
    b: torch.Tensor  # (N, d), stacked b_k
    mu: float  # μ

    @property
    def num_clients(self) -> int:
        return self.A.shape[0]

    @property
    def dim(self) -> int:
        return self.A.shape[1]

    def objective(self, w: torch.Tensor) -> torch.Tensor:
        """F(w) = (1/N) Σ_k F_k(w) for w of shape (..., d)."""
        A, b = self.A.sum(0), self.b.sum(0)
        quad = torch.einsum("...i,ij,...j->...", w, A, w)
        return (quad - 2 * (w @ b)) / (2 * self.num_clients) + 0.5 * self.mu * (w * w).sum(-1)

    def grad_clients(self, w: torch.Tensor) -> torch.Tensor:
        """∇F_k(w_k) = A_k w_k − b_k + μ w_k for stacked local models w of shape (N, d)."""
        return torch.einsum("kij,kj->ki", self.A, w) - self.b + self.mu * w

    def optimum(self) -> torch.Tensor:
        """w* = (A + NμI)^{-1} b with A = Σ_k A_k, b = Σ_k b_k."""
        A = self.A.sum(0) + self.num_clients * self.mu * torch.eye(self.dim, dtype=self.A.dtype)
        return torch.linalg.solve(A, self.b.sum(0))

    def optimal_value(self) -> torch.Tensor:
        """F* = F(w*)."""
        return self.objective(self.optimum())


def li2020_counterexample(N: int = 5, p: int = 4, mu: float = 2e-4) -> QuadraticProblem:
    """Li et al. (2020) App. C.1 with their values N = 5, p = 4 (d = 21), μ = 2e-4."""
    check_positive_int("N", N)
    check_positive_int("p", p)
    check_nonnegative("mu", mu)
    d = N * p + 1
    ones = torch.ones(p, dtype=torch.float64)
    path = 2 * torch.eye(p + 1, dtype=torch.float64) - torch.diag(ones, 1) - torch.diag(ones, -1)
    path[0, 0] = path[p, p] = 1
    A = torch.zeros(N, d, d, dtype=torch.float64)
    for k in range(N):
        A[k, k * p:k * p + p + 1, k * p:k * p + p + 1] = path
    A[0, 0, 0] += 1
    A[N - 1, d - 1, d - 1] += 1
    b = torch.zeros(N, d, dtype=torch.float64)
    b[0, 0] = 1
    return QuadraticProblem(A=A, b=b, mu=float(mu))
