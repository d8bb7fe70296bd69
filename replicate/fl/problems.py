"""Federated problems: what a client differentiates and how the global model is scored.

A problem couples data with a model and exposes exactly what the engine needs (``Problem``):
per-round mini-batch draws for a set of clients, the stacked gradient for one local step, a
client's full batch, a single-client loss (for the sequential oracle), and global metrics.
A fused local solver is an optional capability: ``fused_sgd`` is the solver or None.
"""
from __future__ import annotations

import itertools
from typing import Callable, Protocol, runtime_checkable

import torch

from replicate.core import counter_rng, cuda_graphs, rng
from replicate.core.errors import ReplicateError
from replicate.data.federated import FederatedDataset
from replicate.data.quadratic import QuadraticClients
from replicate.fl import batches
from replicate.fl.algorithms.protocol import PlainSGD, Population
from replicate.fl.sgd import descend_, proximal_
from replicate.fl.batches import Batches
from replicate.fl.models import Model, clip_may_act


@runtime_checkable
class Problem(Protocol):
    """What the engine and the oracle may ask of a federated problem (SampleProblem, QuadraticFederatedProblem)."""

    device: torch.device
    dtype: torch.dtype
    single_threaded: bool  # tiny per-step ops: run with one intra-op thread (core.threads, in engine.run_batch)
    # (params (P,) or (m, P), clients, steps, lr (m, 1), batches, objective, PlainSGD, runs) -> (m, P)
    fused_sgd: Callable | None

    def population(self) -> Population: ...

    def init(self, seed: int) -> torch.Tensor: ...

    def cpu_execution(self) -> str: ...  # "stacked" or "sequential": the faster on a CPU (measured)

    # (clients, steps, generator) a run; the generator may come as a function that makes it (made when needed)
    def draw_batches(self, requests: list[tuple], work) -> list[Batches | None]: ...

    def full_batch(self, clients: torch.Tensor): ...  # every row of each client, or None (full gradients)

    def dropout_noise(self, batch, key: int) -> torch.Tensor | None: ...

    # static: the engine's ``static`` execution calls with the round's one shape (it may replay a CUDA graph)
    def grad(self, flat: torch.Tensor, clients: torch.Tensor, batch, noise=None, static=False) -> torch.Tensor: ...

    def client_loss(self, flat: torch.Tensor, client: int, rows, noise=None) -> torch.Tensor: ...

    def evaluate(self, flat: torch.Tensor) -> dict: ...


class SampleProblem:
    """Empirical risk of a model on a federated dataset (the model's loss, no regulariser).

    Samples keep their shape (images, token sequences); the model prepares the training
    arrays the way its gradient wants them (``Model.prepare``).
    """

    single_threaded = False

    def __init__(self, dataset: FederatedDataset, model: Model, device=None):
        device = torch.device(device or "cpu")
        self.dataset = dataset.to(device)
        self.model = model
        self.device = device
        self.dtype = torch.float32
        self.train = self.dataset.train
        self.sizes = self.train.sizes
        # every draw is made on the host, from CPU generators, so a run on a GPU trains on the same mini-batches
        # and dropout masks as on the CPU (CUDA's generator is another stream, even by GPU model): the devices
        # then differ only in their kernels' summation order (tests/test_cuda.py measures by how much)
        self._host_sizes, self._host_offsets = self.sizes.cpu(), self.train.offsets.cpu()
        self.x, self.y = self.train.x, self.train.y
        if hasattr(model, "check_fits") and len(self.x):  # a module of one's own: its shapes, before any training
            model.check_fits(self.x, dataset.num_classes)
        self.x_prepared, self.y_prepared = model.prepare(self.x, self.y, dataset.num_classes)
        self.row_norms, self.grad_bound = None, None
        if model.fused and self.x.shape[0]:  # ‖x_i‖ bound the fused solver's clipping
            self.row_norms = torch.linalg.vector_norm(self.x_prepared, dim=1)
            self.grad_bound = model.grad_norm_bound(self.row_norms)
        self.fused_sgd = self.local_sgd if model.fused else None
        # one graph per step shape, kept with the problem so that its rounds and batched runs replay it
        self.graphs = cuda_graphs.GraphCache(model.grad) if device.type == "cuda" and model.graphed else None
        test = self.dataset.test
        self.test = None if test is None else (test.x, test.y)

    @property
    def num_clients(self) -> int:
        return self.train.num_clients

    def weights(self) -> torch.Tensor:
        return self.dataset.weights()

    def population(self) -> Population:
        # on the host with the sampling streams (Population): a GPU tensor would meet a CPU generator
        return Population(self.dataset.weights().cpu(), self.sizes.cpu())

    def cpu_execution(self) -> str:
        return self.model.cpu_execution()

    def init(self, seed: int) -> torch.Tensor:
        return self.model.init(rng.generator(seed, "init")).to(self.device)

    def draw_batches(self, requests: list[tuple], work) -> list[Batches]:
        """A round's mini-batches of several runs, one ``(clients, steps, generator)`` each: each run's what
        it draws alone (``batches.draw_runs``), drawn on the host (CPU generators) and moved to the device."""
        drawn = batches.draw_runs([(self._host_sizes[c.cpu()], self._host_offsets[c.cpu()], steps.cpu(),
                                    g() if callable(g) else g) for c, steps, g in requests], work)
        if self.device.type == "cpu":
            return drawn
        return [batches.Batches(b.index.to(self.device), None if b.mask is None else b.mask.to(self.device))
                for b in drawn]

    def full_batch(self, clients: torch.Tensor):
        """Every training row of each client as one masked batch ``(index (m, max n_k), mask)``."""
        sizes, offsets = self.sizes[clients], self.train.offsets[clients]
        positions = torch.arange(int(sizes.max()), device=sizes.device)
        mask = positions.unsqueeze(0) < sizes.unsqueeze(1)
        index = torch.where(mask, offsets.unsqueeze(1) + positions, offsets.unsqueeze(1))
        return index, None if bool(mask.all()) else mask

    def dropout_noise(self, batch, key: int) -> torch.Tensor | None:
        """Uniform noise (m, b, *dropout_shape) for one step's dropout from the counter stream ``key``, or None
        without dropout. Computed on the problem's device, the same numbers on every device
        (``core.counter_rng``): no host draw and no copy a step."""
        if not self.model.dropout:
            return None
        return counter_rng.uniform(key, (*batch[0].shape, *self.model.dropout_shape), device=self.device)

    def grad(self, flat: torch.Tensor, clients: torch.Tensor, batch, noise=None, static=False):
        """Each client's gradient on its mini-batch; ``static`` (a local step of the round's one shape): a
        model that says ``graphed`` replays it from a CUDA graph on a GPU (``core.cuda_graphs``)."""
        index, mask = batch
        rows = index.reshape(-1)  # index_select on flat rows is several times faster than x[index]
        x = self.x_prepared.index_select(0, rows).view(*index.shape, *self.x_prepared.shape[1:])
        y = self.y_prepared.index_select(0, rows).view(*index.shape, *self.y_prepared.shape[1:])
        if static and self.graphs is not None:
            return self.graphs(flat, x, y, mask, noise)
        return self.model.grad(flat, x, y, mask, noise)

    def local_sgd(self, global_flat: torch.Tensor, clients: torch.Tensor, steps: torch.Tensor, lr: torch.Tensor,
                  batches: Batches, objective, plain_sgd: PlainSGD = PlainSGD(), runs=None):
        """All clients' local (proximal) SGD through the model's fused solver (``fused_sgd``), each row at its
        rate ``lr`` (``RoundContext.lr``).

        ``runs``: each run's ``(rows, masked, plain_sgd)`` in row order (``batching.Round.runs``) — its client
        count, whether its own mini-batches had a mask and its algorithm's declared update (its own μ) — so the
        solver computes every row as that run alone would (``PlainSGD.fused``); None: one run, ``plain_sgd``.

        Clipping is dropped when the model proves it can never act on this data (every
        mini-batch gradient's norm is below ``objective.clip_norm``): a no-op then either way.
        Otherwise the solver gets each sample's ‖x_i‖ to bound the norm step by step.
        """
        clip = objective.clip_norm
        if clip is not None and self.grad_bound is not None and not clip_may_act(self.grad_bound, clip):
            clip = None

        def batch(s, only=None):
            index, mask = batches.step(s)
            if only is not None:  # the rows still working (unequal local work)
                index, mask = index.index_select(0, only), None if mask is None else mask.index_select(0, only)
            rows = index.reshape(-1)
            x = self.x_prepared.index_select(0, rows).view(*index.shape, -1)
            y = self.y_prepared.index_select(0, rows).view(*index.shape, -1)
            norms = None if clip is None else self.row_norms.index_select(0, rows).view(index.shape)
            return x, y, mask, norms

        # each row starts from its run's global model: (m, P) when runs are batched (fl/batching), else (P,)
        start = global_flat if global_flat.dim() == 2 else global_flat.unsqueeze(0).expand(clients.numel(), -1)
        equal = bool((steps == steps[0]).all())
        runs = runs or [(lr.numel(), True, plain_sgd)]
        bounds = itertools.pairwise([0, *itertools.accumulate(size for size, *_ in runs)])
        rows = [plain_sgd.fused(lr[lo:hi], objective.weight_decay, masked)
                for (lo, hi), (_, masked, plain_sgd) in zip(bounds, runs)]
        return self.model.sgd(start, batch, int(steps[0]) if equal else steps, rows, clip)

    def client_loss(self, flat: torch.Tensor, client: int, rows: torch.Tensor, noise=None) -> torch.Tensor:
        """Mean loss of one client on the given rows (the oracle's scalar objective)."""
        return self.model.per_sample_loss(flat, self.x[rows], self.y[rows], noise).mean()

    @torch.no_grad()
    def evaluate(self, flat: torch.Tensor) -> dict:
        """Global loss (sample-weighted over all devices) and accuracy, on train and test.

        Evaluated in chunks of ``model.eval_batch_size`` samples, so memory stays bounded.
        """
        out = {}
        parts = [("train", self.x, self.y)] + ([("test", *self.test)] if self.test is not None else [])
        for name, x, y in parts:
            n, size = x.shape[0], self.model.eval_batch_size
            if n <= size and self.model.loss_kind == "class":  # one chunk: the plain mean, as always
                logits = self.model.predict(flat, x)
                out[f"{name}_loss"] = float(torch.nn.functional.cross_entropy(logits, y))
                out[f"{name}_acc"] = float((logits.argmax(1) == y).to(torch.float64).mean())
                continue
            loss, correct, counted = 0.0, 0.0, 0.0
            for lo in range(0, n, size):
                logits = self.model.predict(flat, x[lo:lo + size])
                loss += float(self.model.loss(logits, y[lo:lo + size]).to(torch.float64).sum())
                hit, count = self.model.hits(logits, y[lo:lo + size])
                correct, counted = correct + float(hit.sum()), counted + float(count.sum())
            # accuracy pools the counted predictions (positions, for token targets), as Reddi et al.'s metric
            out[f"{name}_loss"], out[f"{name}_acc"] = loss / n, correct / max(counted, 1.0)
        return out


class QuadraticFederatedProblem:
    """The engine's view of quadratic clients (:class:`replicate.data.quadratic.QuadraticClients`).

    Full gradients ∇F_k(w) = H_k w − r_k with H_k = ``clients.hessians`` and r_k = ``clients.linear``
    (Li et al.'s counterexample: H_k = A_k + μI, r_k = b_k; Charles & Konečný's quadratics).
    Metrics: the global objective F(w) = Σ_k p_k (½wᵀH_k w − r_kᵀw + s_k), constants s_k
    included, and the distance to its minimiser w*; with ``record_iterates`` also every
    coordinate, so a run's history holds its iterates. The run starts from ``x0`` (default 0).
    """

    # tiny per-step ops: a second thread costs more than it gives (core.threads, in engine.run_batch)
    single_threaded = True

    def __init__(self, clients: QuadraticClients, x0: torch.Tensor | None = None, record_iterates: bool = False,
                 device=None):
        self.clients = clients
        self.device = torch.device(device or "cpu")
        self.H = clients.hessians.to(self.device)
        self.r = clients.linear.to(self.device)
        self.s = clients.constants.to(self.device)
        self.dtype = self.H.dtype
        self.p = clients.weights
        self.x0 = (torch.zeros(clients.dim, dtype=self.dtype) if x0 is None
                   else torch.as_tensor(x0, dtype=self.dtype))
        self.record_iterates = record_iterates
        self.w_star = clients.minimiser.to(self.device)

    @property
    def num_clients(self) -> int:
        return self.r.shape[0]

    def weights(self) -> torch.Tensor:
        return self.p

    def population(self) -> Population:
        return Population(self.p.cpu(), torch.ones(self.num_clients, dtype=torch.int64, device="cpu"))

    def init(self, seed: int) -> torch.Tensor:
        return self.x0.clone().to(self.device)

    def draw_batches(self, requests, work):
        if work.batch_size is not None or work.unit != "steps":
            raise ReplicateError("quadratic clients take full gradients: use local steps and batch_size=None")
        return [None] * len(requests)

    def full_batch(self, clients):
        return None  # every gradient of a quadratic client is already its full gradient

    def dropout_noise(self, batch, key):
        return None

    def cpu_execution(self) -> str:
        return "stacked"

    def grad(self, flat, clients, batch, noise=None, static=False):
        if clients is not getattr(self, "_round_clients", None):  # gather once per round, not per step
            self._round_clients, self._H, self._r = clients, self.H[clients], self.r[clients]
        return torch.bmm(self._H, flat.unsqueeze(-1)).squeeze(-1).sub_(self._r)

    @property
    def fused_sgd(self):
        return self.local_gd

    def local_gd(self, global_flat: torch.Tensor, clients: torch.Tensor, steps: torch.Tensor, lr: torch.Tensor,
                 batches, objective, plain_sgd: PlainSGD = PlainSGD(), runs=None) -> torch.Tensor:
        """All clients' local (proximal) gradient descent in one call, each run's declared update (``runs``, as
        ``SampleProblem.local_sgd``): the generic step's own operations (``PlainSGD.step``: g = H_k w − r_k,
        ``objective.gradient``, ``proximal_``, ``descend_``) on the same numbers, so bitwise what it computes.
        The state is kept as (m, d, 1) columns: a step of this tiny problem costs its kernel calls, not their
        arithmetic, and the generic step's reshapes and calls through the algorithm cost as much again."""
        m = clients.numel()
        start = global_flat if global_flat.dim() == 2 else global_flat.unsqueeze(0).expand(m, -1)
        anchor = start.unsqueeze(-1)  # w_t, each row's
        w = anchor.clone()
        H, r, rate = self.H[clients], self.r[clients].unsqueeze(-1), lr.reshape(m, 1, 1)
        runs = runs or [(m, True, plain_sgd)]
        prox = (torch.cat([w.new_full((size, 1, 1), sgd.prox_mu) for size, _, sgd in runs])
                if any(sgd.prox_mu > 0 for *_, sgd in runs) else None)
        plain = objective.clip_norm is None and not objective.weight_decay
        counts = steps.cpu()
        fewest, most = int(counts.min()), int(counts.max())
        for s in range(most):
            g = torch.bmm(H, w).sub_(r)
            if not plain:
                objective.gradient(g.view(m, -1), w.view(m, -1))
            if prox is not None:
                proximal_(g, w, anchor, prox)
            if s < fewest:
                descend_(w, g, rate)
            else:  # a client past its own steps keeps its model
                w = torch.where((steps > s).view(m, 1, 1), descend_(w.clone(), g, rate), w)
        return w.squeeze(-1)

    local_gd.full_batch = True  # it takes full-gradient rounds (``local_steps.accelerator``)

    def client_loss(self, flat, client, rows, noise=None):
        return 0.5 * flat @ self.H[client] @ flat - self.r[client] @ flat + self.s[client]

    def objective(self, flat: torch.Tensor) -> torch.Tensor:
        """F(w) = Σ_k p_k F_k(w), computed on the problem's device."""
        client_values = 0.5 * torch.einsum("i,kij,j->k", flat, self.H, flat) - self.r @ flat + self.s
        return self.p.to(flat.device, flat.dtype) @ client_values

    @torch.no_grad()
    def evaluate(self, flat):
        out = {"objective": float(self.objective(flat)),
               "distance": float(torch.linalg.vector_norm(flat - self.w_star))}
        if self.record_iterates:
            out |= {f"x{i}": float(v) for i, v in enumerate(flat)}
        return out
