"""What the lecture-notes figures share: cached constants, the run probe, Hessian power iteration.

Cheng's lecture notes "Convergence of FL" (seed 003) restate Li et al. (ICLR 2020, seed 000)'s
Assumptions 1-4 and Theorem 1, and add a non-convex Theorem 2 (eq. 14). The constants those
results need (L, μ, κ, Γ, σ_k², G², F*) are estimated by ``replicate.theory.constants``; this
module caches them and measures along a run what the bounds are evaluated with:

* :func:`cached_constants`: ``estimate_constants`` at w* (the expensive part: the float64
  solves for F* and every F_k*), cached as JSON under ``cache_dir()/constants/``, keyed by
  dataset, data seed, N, λ and b (mnist balanced takes minutes; the synthetic sets ~40 s). A record is
  sealed by the sha256 of its fields and records its key: one changed since, of another key, or cut short is
  said so and estimated again, never used.
* :class:`RunProbe`: the ``extra_metrics`` of ``cache.run``. Every logged round it records
  ‖w‖² (so F(w) = training loss + (λ/2)‖w‖², the objective with the weight decay the engine
  adds) and ‖w − w*‖²; optionally ‖∇F(w)‖² (non-convex figure); at a few log-spaced rounds
  the moments of Assumptions 3-4 at the global model (running maxima over those rounds); and
  optionally L by power iteration (:func:`hessian_norms`) there too.
* :func:`hessian_norms`: max_k ‖∇²F_k(w)‖ by power iteration with Hessian-vector products
  (double backward), clients batched by size. Power iteration approaches the top |eigenvalue|
  from below, so the estimate is a lower bound of the true L at that point.

Symbols → names: p_k → ``weights``, σ_k² → ``variances``, G² → ``grad_sq_bound``, L → ``L``,
λ → ``weight_decay``, b → ``batch_size``, w* → ``minimiser``, F* → ``optimal_value``.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import time

import numpy as np
import torch

from replicate.core import fileio, settings
from replicate.core.fileio import atomic_write_text
from replicate.core.threads import threads
from replicate.experiments.li2020.common import LABELS, batch_size  # noqa: F401  (re-exported)
from replicate.runs import config as run_config
from replicate.fl import models
from replicate.fl.problems import SampleProblem
from replicate.theory import constants as C

DATASETS = ("synthetic(0,0)", "synthetic(1,1)", "mnist_balanced")

_ARRAYS = ("weights", "client_smoothness", "client_strong_convexity", "client_optimal_values", "minimiser",
           "variances")


def single_threaded():
    """One intra-op thread while these figures compute: their small products gain nothing from a second
    thread, and on a busy 2-core machine the threads only wait for each other (3-5× slower here)."""
    return threads(1)


def sample_problem(dataset: str, model: str = "logistic", *, num_clients: int | None = None,
                   data_seed: int | None = None) -> SampleProblem:
    """The CPU problem a run config with these fields trains on."""
    ds = run_config.dataset(dataset, data_seed, num_clients)
    return SampleProblem(ds, models.build(model, ds.num_features, ds.num_classes), device="cpu")


def constants_path(dataset: str, *, weight_decay: float,
                   batch_size: int | None,  # noqa: F811 - public keyword; the batch_size() it shadows is a re-export
                   data_seed: int | None = None, num_clients: int | None = None):
    name = f"{dataset}_seed-{data_seed if data_seed is not None else 'default'}_N-{num_clients or 'default'}" \
           f"_lam-{weight_decay:g}_b-{batch_size or 'full'}"
    return settings.current().cache / "constants" / (re.sub(r"[^A-Za-z0-9_.+-]", "_", name) + ".json")


def cached_constants(dataset: str, *, weight_decay: float,
                     batch_size: int | None,  # noqa: F811 - public keyword; the batch_size() it shadows is a re-export
                     data_seed: int | None = None, num_clients: int | None = None) -> tuple[C.Constants, dict]:
    """Li et al.'s constants of the logistic model at w* (σ_k², G² at w* only), and
    ``{"elapsed_s": seconds the estimate took when computed, "from_cache": bool}``."""
    path = constants_path(dataset, weight_decay=weight_decay, batch_size=batch_size, data_seed=data_seed,
                          num_clients=num_clients)
    key = {"dataset": dataset, "data_seed": data_seed, "num_clients": num_clients, "weight_decay": weight_decay,
           "batch_size": batch_size}
    if (record := _read_record(path, key)) is not None:
        return _from_record(record), {"elapsed_s": record["elapsed_s"], "from_cache": True}
    start = time.perf_counter()
    problem = sample_problem(dataset, num_clients=num_clients, data_seed=data_seed)
    constants = C.estimate_constants(problem, weight_decay=weight_decay, batch_size=batch_size)
    elapsed = time.perf_counter() - start
    record = {f: (getattr(constants, f).tolist() if f in _ARRAYS else getattr(constants, f))
              for f in C.Constants.__dataclass_fields__}
    record |= {"elapsed_s": round(elapsed, 1), **key}
    atomic_write_text(path, json.dumps(fileio.sealed(record)) + "\n")
    return constants, {"elapsed_s": round(elapsed, 1), "from_cache": False}


def _read_record(path, key: dict) -> dict | None:
    """The cached constants at ``path`` if they are whole, unchanged since written (their seal) and of ``key``;
    else None, said in one line where a file was there: they are estimated again and the file replaced."""
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or record.get("sha256") != fileio.seal_of(record):
            raise ValueError("it does not match its checksum" if isinstance(record, dict) and "sha256" in record
                             else "it records no checksum")
        if {k: record.get(k) for k in key} != key:
            raise ValueError("it holds another dataset's or setting's constants")
        _from_record(record)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"warning: cached constants {path.name} are not used ({exc}): estimating them again",
              file=sys.stderr, flush=True)
        return None
    return record


def _from_record(record: dict) -> C.Constants:
    fields = {f: (np.asarray(record[f], dtype=float) if f in _ARRAYS else record[f])
              for f in C.Constants.__dataclass_fields__}
    return C.Constants(**fields)


def moments(problem, view, w: torch.Tensor, batch: int | None, weight_decay: float) -> tuple[np.ndarray, np.ndarray]:
    """(σ_k²(w), E‖∇F_k(w, ξ)‖²) per client at one point, for b-sample batches drawn as the engine does."""
    point = w.detach().to("cpu", torch.float64)
    sigma2 = C.gradient_variance(problem, point, batch, view=view)[0]
    sq = C.expected_sq_grad_norm(problem, point, batch, weight_decay, view=view)[0]
    return sigma2, sq


def probe_rounds(rounds: int, eval_every: int, count: int) -> tuple[int, ...]:
    """``count`` logged rounds spread log-uniformly over 0..rounds (always 0 and the last)."""
    logged = np.array(sorted(set(range(0, rounds, eval_every)) | {rounds}))
    targets = np.geomspace(1, rounds, max(count - 1, 1))
    picked = {0, rounds} | {int(logged[np.abs(logged - t).argmin()]) for t in targets}
    return tuple(sorted(picked))


class RunProbe:
    """``extra_metrics`` for ``cache.run``: what the bounds need, measured on the run's global models.

    Columns: ``sq_norm`` ‖w‖² and ``dist_sq`` ‖w − w*‖² (every logged round; ``dist_sq`` NaN
    without w*); ``grad_sq`` ‖∇F(w)‖² with ``full_gradient``; at the probe rounds ``G2_at``
    max_k E‖∇F_k(w,ξ)‖², ``sum_p2_sigma2_at`` Σp_k²σ_k²(w), ``Eg_sq_at`` E‖g‖² = ‖∇F(w)‖² + Σp_k²σ_k²(w)
    (g = Σp_k∇F_k(w, ξ_k), independent batches), ``G2_run`` and ``sum_p2_sigma2_run`` (running
    maxima: max_t G²(w_t), Σ_k p_k² max_t σ_k²(w_t) and Σ_k max_t σ_k²(w_t)); with ``hessian_iters`` also
    ``L_run``, the running maximum of max_k ‖∇²F_k‖ (power iteration) at the probe rounds. The engine
    calls it at rounds 0, e, 2e, ... and at ``rounds`` (e = ``eval_every``).
    """

    def __init__(self, *, rounds: int, eval_every: int,
                 batch_size: int | None,  # noqa: F811 - public keyword; the batch_size() it shadows is a re-export
                 weight_decay: float, minimiser=None, probes: int = 10, full_gradient: bool = False,
                 hessian_iters: int = 0, seed: int = 0):
        self.probed = set(probe_rounds(rounds, eval_every, probes))
        self.batch, self.lam = batch_size, weight_decay
        self.w_star = None if minimiser is None else torch.as_tensor(minimiser, dtype=torch.float64)
        self.full_gradient, self.hessian_iters, self.seed = full_gradient, hessian_iters, seed
        self.view, self.sigma2_max, self.G2_max, self.L_max = None, None, 0.0, 0.0
        star = None if self.w_star is None else hashlib.sha256(self.w_star.numpy().tobytes()).hexdigest()[:12]
        self.key = json.dumps({"probe": 1, "rounds": rounds, "eval_every": eval_every, "batch": batch_size,
                               "lam": weight_decay, "w_star": star, "probes": probes, "full_gradient": full_gradient,
                               "hessian_iters": hessian_iters, "seed": seed}, sort_keys=True)  # the run cache's

    def __call__(self, problem, flat: torch.Tensor, r: int) -> dict:
        w = flat.detach().to("cpu", torch.float64)
        row = {"sq_norm": float(w @ w),
               "dist_sq": math.nan if self.w_star is None else float(((w - self.w_star) ** 2).sum())}
        grad_sq = math.nan
        if self.full_gradient or r in self.probed:
            grad_sq = float((full_gradient(problem, flat, self.lam) ** 2).sum())
        if self.full_gradient:
            row["grad_sq"] = grad_sq
        probe = dict.fromkeys(("G2_at", "sum_p2_sigma2_at", "Eg_sq_at", "G2_run", "sum_p2_sigma2_run",
                               "sum_sigma2_run"), math.nan)
        if r in self.probed:
            if self.view is None:
                self.view = C._view(problem)  # one float64 copy of the data per run, not one per probe
            p2 = self.view.weights ** 2
            sigma2, sq = moments(problem, self.view, flat, self.batch, self.lam)
            self.sigma2_max = sigma2 if self.sigma2_max is None else np.maximum(self.sigma2_max, sigma2)
            self.G2_max = max(self.G2_max, float(sq.max()))
            probe = {"G2_at": float(sq.max()), "sum_p2_sigma2_at": float(p2 @ sigma2),
                     "Eg_sq_at": grad_sq + float(p2 @ sigma2), "G2_run": self.G2_max,
                     "sum_p2_sigma2_run": float(p2 @ self.sigma2_max), "sum_sigma2_run": float(self.sigma2_max.sum())}
        row |= probe
        if self.hessian_iters:
            row["L_run"] = math.nan
            if r in self.probed:
                norms = hessian_norms(problem, flat, iters=self.hessian_iters, weight_decay=self.lam, seed=self.seed)
                self.L_max = max(self.L_max, float(norms.max()))
                row["L_run"] = self.L_max
        return row


def full_gradient(problem, flat: torch.Tensor, weight_decay: float = 0.0) -> torch.Tensor:
    """∇F(w) = Σ_k p_k ∇F_k(w) + λw with p_k = n_k/n: the gradient of the mean loss over all samples."""
    w = flat.detach().clone().requires_grad_(True)
    loss = problem.model.per_sample_loss(w, problem.x, problem.y).mean()
    (grad,) = torch.autograd.grad(loss, w)
    return grad.to(torch.float64) + weight_decay * flat.detach().to(torch.float64)


def hessian_norms(problem, flat: torch.Tensor, *, iters: int = 30, weight_decay: float = 0.0, groups: int = 8,
                  seed: int = 0) -> np.ndarray:
    """‖∇²F_k(w)‖ for every client k by ``iters`` steps of power iteration, clients batched in
    ``groups`` of similar size (padded and masked). Hessian-vector products by double backward
    through the vmapped per-client losses (several times faster on a CPU than ``torch.func``'s
    forward-over-reverse). ∇²F_k includes λI. Returns (N,) lower estimates of the top
    |eigenvalue|, i.e. of the client's smoothness constant at this point."""
    from torch.func import vmap

    model = problem.model
    sizes = problem.sizes.cpu().numpy()
    offsets = problem.train.offsets.cpu().numpy()
    w = flat.detach().to("cpu", torch.float32)
    generator = torch.Generator().manual_seed(seed)
    out = np.zeros(len(sizes))

    def loss(u, xb, yb, mb):
        return (model.per_sample_loss(u, xb, yb) * mb).sum() / mb.sum()

    for group in np.array_split(np.argsort(sizes), min(groups, len(sizes))):
        width = int(sizes[group].max())
        cols = np.arange(width)
        rows = offsets[group][:, None] + np.minimum(cols[None], sizes[group][:, None] - 1)
        mask = torch.as_tensor(cols[None] < sizes[group][:, None], dtype=torch.float32)
        index = torch.as_tensor(rows)
        x, y = problem.x.cpu()[index], problem.y.cpu()[index]
        stacked = w.expand(len(group), -1).clone().requires_grad_(True)
        (g,) = torch.autograd.grad(vmap(loss)(stacked, x, y, mask).sum(), stacked, create_graph=True)
        v = torch.randn(len(group), w.numel(), generator=generator)
        v /= torch.linalg.vector_norm(v, dim=1, keepdim=True)
        norm = torch.zeros(len(group))
        for _ in range(iters):
            (hv,) = torch.autograd.grad(g, stacked, grad_outputs=v, retain_graph=True)
            hv = hv + weight_decay * v
            norm = torch.linalg.vector_norm(hv, dim=1)
            v = hv / norm.clamp_min(1e-30)[:, None]
        out[group] = norm.double().numpy()
    return out


def log_slope(steps, values) -> float:
    """Least-squares slope of log(values) against log(steps) (positive finite points only)."""
    x, y = np.log(np.asarray(steps, dtype=float)), np.asarray(values, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (y > 0)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(x[ok], np.log(y[ok]), 1)[0])


def slope_interval(slopes, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): a t-interval for the mean slope over independent seeds (NaN with one seed)."""
    from scipy import stats

    s = np.asarray([v for v in slopes if np.isfinite(v)], dtype=float)
    if s.size == 0:
        return math.nan, math.nan, math.nan
    if s.size == 1:
        return float(s[0]), math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, s.size - 1) * s.std(ddof=1) / math.sqrt(s.size)
    return float(s.mean()), float(s.mean() - half), float(s.mean() + half)
