"""Federated problems: what a client differentiates and how the global model is scored.

A problem couples data with a model and exposes exactly what the engine needs:
per-round mini-batch draws for a set of clients, the stacked gradient for one
local step, a single-client loss (for the sequential oracle), and global metrics.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from replicate.core import rng
from replicate.data.federated import FederatedDataset
from replicate.core.errors import ReplicateError
from replicate.fl.models import Model, clip_may_act


@dataclass(frozen=True)
class Batches:
    """A round's mini-batches: ``index[s, j]`` are the rows client j uses at step s.

    Steps lead so that each step's (m, b) index is one contiguous block.
    """

    index: torch.Tensor  # (S, m, b) rows into the flat training split
    mask: torch.Tensor | None  # (m, b) True for real samples; None when every client has >= b

    def step(self, s: int):
        return self.index[s % self.index.shape[0]], self.mask


KEYED_BELOW = 4  # clients with n_k <= KEYED_BELOW * b draw subsets by random keys


def _uniform_subsets(limits: torch.Tensor, b: int, generator: torch.Generator) -> torch.Tensor:
    """One uniform b-subset of range(n) per row: the b smallest of n random keys (for small n)."""
    keys = torch.rand((limits.numel(), int(limits.max())), generator=generator, device=limits.device)
    keys.masked_fill_(torch.arange(keys.shape[1], device=limits.device) >= limits.unsqueeze(1), 2.0)
    return keys.topk(b, dim=1, largest=False).indices


def _redraw_repeats(rows, active, limits, generator):
    """Redraw every repeated position of the active rows once; returns the rows still repeating."""
    sub = rows[active].sort(dim=1).values
    dup = torch.zeros_like(sub, dtype=torch.bool)
    dup[:, 1:] = sub[:, 1:] == sub[:, :-1]
    has_dup = dup.any(dim=1)
    active, sub, dup = active[has_dup], sub[has_dup], dup[has_dup]
    fresh = (torch.rand(sub.shape, generator=generator, dtype=torch.float64, device=rows.device)
             * limits[active].unsqueeze(1)).long()
    rows[active] = torch.where(dup, fresh, sub)
    return active


def draw_batch_positions(sizes: torch.Tensor, steps: int, batch_size: int,
                         generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
    """For each client, ``steps`` independent uniform subsets of ``min(n_k, b)`` distinct positions.

    This is what ``next(iter(DataLoader(shuffle=True, batch_size=b)))`` gives per step in
    the authors' code. Clients with n_k > 4b draw b positions with replacement and redraw
    repeated ones until none repeat (each redraw repeats with probability below 1/4, so a
    few passes over ever fewer rows suffice); clients with b ≤ n_k ≤ 4b take the b
    smallest of n_k random keys. Both procedures commute with relabelling the positions,
    so each subset is uniform. Clients with n_k < b use their whole local set (masked).
    """
    m, b, device = sizes.numel(), batch_size, sizes.device
    pos = torch.empty((m, steps, b), dtype=torch.long, device=device)
    small = sizes < b
    keyed = ~small & (sizes <= KEYED_BELOW * b)
    redrawn = sizes > KEYED_BELOW * b
    if bool(redrawn.any()):
        limits = sizes[redrawn].repeat_interleave(steps)
        rows = (torch.rand((limits.numel(), b), generator=generator, dtype=torch.float64, device=device)
                * limits.unsqueeze(1)).long()
        active = torch.arange(rows.shape[0], device=device)
        while active.numel():
            active = _redraw_repeats(rows, active, limits, generator)
        pos[redrawn] = rows.view(-1, steps, b)
    if bool(keyed.any()):
        pos[keyed] = _uniform_subsets(sizes[keyed].repeat_interleave(steps), b, generator).view(-1, steps, b)
    if not bool(small.any()):
        return pos, None
    ar = torch.arange(b, device=device)
    mask = (ar.unsqueeze(0) < sizes.unsqueeze(1)) | ~small.unsqueeze(1)
    pos[small] = torch.where(mask[small], ar, 0).unsqueeze(1).expand(-1, steps, -1)
    return pos, mask


class SampleProblem:
    """Empirical risk of a model on a federated dataset (cross-entropy, no regulariser)."""

    def __init__(self, dataset: FederatedDataset, model: Model, device=None):
        device = torch.device(device or "cpu")
        self.dataset = dataset.to(device)
        self.model = model
        self.device = device
        self.dtype = torch.float32
        self.train = self.dataset.train
        self.sizes = self.train.sizes
        self.x = self.train.x.reshape(self.train.x.shape[0], -1)
        self.y = self.train.y
        self.x_prepared, self.y_prepared = model.prepare(self.x, self.y, dataset.num_classes)
        self.row_norms = torch.linalg.vector_norm(self.x_prepared, dim=1)  # ‖x_i‖, for clipping bounds
        bound = getattr(model, "grad_norm_bound", None)
        self.grad_bound = bound(self.row_norms) if bound is not None and self.x.shape[0] else None
        test = self.dataset.test
        self.test = None if test is None else (test.x.reshape(test.x.shape[0], -1), test.y)

    @property
    def num_clients(self) -> int:
        return self.train.num_clients

    def weights(self) -> torch.Tensor:
        return self.dataset.weights()

    def init(self, seed: int) -> torch.Tensor:
        return self.model.init(rng.generator(seed, "init")).to(self.device)

    def draw_batches(self, clients: torch.Tensor, steps: int, batch_size: int | None,
                     generator: torch.Generator) -> Batches:
        sizes = self.sizes[clients]
        if batch_size is None:  # full local batch every step
            b = int(sizes.max())
            ar = torch.arange(b, device=self.device)
            mask = ar.unsqueeze(0) < sizes.unsqueeze(1)
            pos = torch.where(mask, ar, 0).unsqueeze(1)
            mask = None if bool(mask.all()) else mask
        else:
            pos, mask = draw_batch_positions(sizes, steps, batch_size, generator)
        rows = pos + self.train.offsets[clients].view(-1, 1, 1)
        return Batches(rows.transpose(0, 1).contiguous(), mask)

    def grad(self, flat: torch.Tensor, clients: torch.Tensor, batch):
        index, mask = batch
        rows = index.reshape(-1)  # index_select on flat rows is several times faster than x[index]
        x = self.x_prepared.index_select(0, rows).view(*index.shape, *self.x_prepared.shape[1:])
        y = self.y_prepared.index_select(0, rows).view(*index.shape, *self.y_prepared.shape[1:])
        return self.model.grad(flat, x, y, mask)

    def local_sgd(self, global_flat: torch.Tensor, clients: torch.Tensor, update, lr, batches):
        """All clients' local SGD through the model's fused solver, or None if it has none.

        Clipping is dropped when the model proves it can never act on this data (every
        mini-batch gradient's norm is below ``update.clip_norm``): a no-op then either way.
        Otherwise the solver gets each sample's ‖x_i‖ to bound the norm step by step.
        """
        sgd = getattr(self.model, "sgd", None)
        if sgd is None or batches is None:
            return None
        clip = update.clip_norm
        if clip is not None and self.grad_bound is not None and not clip_may_act(self.grad_bound, clip):
            clip = None

        def batch(s):
            index, mask = batches.step(s)
            rows = index.reshape(-1)
            x = self.x_prepared.index_select(0, rows).view(*index.shape, -1)
            y = self.y_prepared.index_select(0, rows).view(*index.shape, -1)
            norms = None if clip is None else self.row_norms.index_select(0, rows).view(index.shape)
            return x, y, mask, norms

        start = global_flat.unsqueeze(0).expand(clients.numel(), -1)
        return sgd(start, batch, update.steps, lr, update.weight_decay, clip, update.prox_mu)

    def client_loss(self, flat: torch.Tensor, client: int, rows: torch.Tensor) -> torch.Tensor:
        """Mean loss of one client on the given rows (the oracle's scalar objective)."""
        return self.model.per_sample_loss(flat, self.x[rows], self.y[rows]).mean()

    @torch.no_grad()
    def evaluate(self, flat: torch.Tensor) -> dict:
        """Global training loss (sample-weighted over all devices) and accuracies."""
        out = {}
        parts = [("train", self.x, self.y)] + ([("test", *self.test)] if self.test is not None else [])
        for name, x, y in parts:
            logits = self.model.predict(flat, x)
            out[f"{name}_loss"] = float(torch.nn.functional.cross_entropy(logits, y))
            out[f"{name}_acc"] = float((logits.argmax(1) == y).to(torch.float64).mean())
        return out


class QuadraticFederatedProblem:
    """Deterministic quadratic clients with full gradients ∇F_k(w) = H_k w − r_k.

    Serves Li et al.'s counterexample (H_k = A_k + μI, r_k = b_k, see ``li2020``) and the
    quadratic models of Charles & Konečný. Metrics: the global objective
    F(w) = Σ_k p_k (½wᵀH_k w − r_kᵀw) and the distance to its minimiser w*; with
    ``record_iterates`` also every coordinate, so a run's history holds its iterates.
    """

    def __init__(self, hessians: torch.Tensor, linear: torch.Tensor, weights: torch.Tensor | None = None,
                 x0: torch.Tensor | None = None, record_iterates: bool = False, device=None):
        self.device = torch.device(device or "cpu")
        self.H = torch.as_tensor(hessians).to(self.device)
        self.r = torch.as_tensor(linear).to(self.device, self.H.dtype)
        self.dtype = self.H.dtype
        n, d = self.r.shape
        self.p = (torch.full((n,), 1.0 / n, dtype=torch.float64) if weights is None
                  else torch.as_tensor(weights, dtype=torch.float64))
        self.x0 = torch.zeros(d, dtype=self.dtype) if x0 is None else torch.as_tensor(x0, dtype=self.dtype)
        self.record_iterates = record_iterates
        p = self.p.to(self.device, self.dtype)
        self.w_star = torch.linalg.solve(torch.einsum("k,kij->ij", p, self.H), p @ self.r)

    @classmethod
    def li2020(cls, problem, device=None) -> "QuadraticFederatedProblem":
        """Li et al. App. C: F_k(w) = ½wᵀA_k w − b_kᵀw + (μ/2)‖w‖², p_k = 1/N, w0 = 0."""
        eye = torch.eye(problem.A.shape[-1], dtype=problem.A.dtype)
        return cls(problem.A + problem.mu * eye, problem.b, device=device)

    @property
    def num_clients(self) -> int:
        return self.r.shape[0]

    def weights(self) -> torch.Tensor:
        return self.p

    def init(self, seed: int) -> torch.Tensor:
        return self.x0.clone().to(self.device)

    def draw_batches(self, clients, steps, batch_size, generator):
        if batch_size is not None:
            raise ReplicateError("quadratic clients take full gradients: use batch_size=None")
        return None

    def grad(self, flat, clients, batch):
        if clients is not getattr(self, "_clients", None):  # gather once per round, not per step
            self._clients, self._H, self._r = clients, self.H[clients], self.r[clients]
        return torch.bmm(self._H, flat.unsqueeze(-1)).squeeze(-1).sub_(self._r)

    def client_loss(self, flat, client, rows):
        return 0.5 * flat @ self.H[client] @ flat - self.r[client] @ flat

    def objective(self, flat: torch.Tensor) -> torch.Tensor:
        return self.p.to(flat.dtype) @ (0.5 * torch.einsum("i,kij,j->k", flat, self.H, flat) - self.r @ flat)

    @torch.no_grad()
    def evaluate(self, flat):
        out = {"objective": float(self.objective(flat)),
               "distance": float(torch.linalg.vector_norm(flat - self.w_star))}
        if self.record_iterates:
            out |= {f"x{i}": float(v) for i, v in enumerate(flat)}
        return out
