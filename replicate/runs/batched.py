"""A sweep's missing runs trained in batches: runs as a tensor dimension at the run layer.

``group`` sorts a sweep's missing jobs into batches of runs that may train as one stack of
clients (``replicate.fl.engine.run_batch``): same data, model, local work, local objective,
execution, extra metrics and algorithm client half (``protocol.client_settings``). Seeds,
client rates and schedules, rounds, targets, the settings an algorithm carries a row each in its
client state (FedProx's μ, LocalUpdate's α, STEM's c) and every plan or server setting (K, η_s, server
momentum, FedAdam's β, ...) may differ. ``compute`` trains one batch and returns every run as
its own cache entry, which the driver stores as ``cache.run`` would: figures cannot tell a batched run
from one computed alone (its numbers agree to float rounding: tests/test_batched_runs.py).

When it batches (``REPLICATE_BATCH_RUNS`` / ``--batch-runs R`` say how many runs at most; unset:
``default_runs``): on a CPU, by default only runs whose batched rows compute bitwise what each run
computes alone in a worker (one thread) — plain-SGD runs of the logistic model (``Model.batch_exact``: its
fused solver keeps each run's own arithmetic, ``fl/models/fused_runs.py``) — so the committed figures are the
same numbers either way (tests/test_batched_runs.py checks bitwise; Li et al. Figure 4 recomputed in
batches matched its committed CSV exactly). Neural models' kernels of another batch shape round
differently (agreement to 1e-5 in float32), and their runs train one by one on a CPU (also faster
there, below); on CUDA every model batches (the point of the GPU hour), and a run's sidecar records
its ``batch``. Before the fused solver kept each run's arithmetic, batching Figure 4 changed 20 of
its 30 runs by up to 10 % (chaotic runs amplify a rounding) and one claim's verdict.

Memory is bounded: a batch holds at most ``MAX_RUNS`` runs, and ``compute`` trains it in pieces
of at most ``MAX_ELEMENTS`` stacked parameters (clients × parameters summed over the runs). On a CPU a
piece also holds at most ``CPU_ROWS`` stacked clients: measured (``bench``, BENCHMARKS.md), 16 runs of
10 logistic clients train 1.6× faster per run than one by one, while STEM's LeNet grid, 100 workers a
run, is slower per run batched (0.62× at 4 runs, 0.60× at 16: a step's activations outgrow the
caches), so on a CPU such runs train one by one.
"""
from __future__ import annotations

import math

import torch

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.fl import batching, models
from replicate.fl.algorithms.protocol import Population, client_settings, fused_update
from replicate.runs import cache
from replicate.runs.checkpoints import FileCheckpoints
from replicate.runs import config as run_config
from replicate.runs.config import RunConfig, build

MAX_RUNS = 16  # runs per batch: the bench's R = 16 (BENCHMARKS.md)
MAX_ELEMENTS = 1 << 26  # stacked parameters per piece (256 MiB a float32 state tensor)
CPU_ROWS = 160  # stacked clients per piece on a CPU (see the module docstring)

# What runs trained together may differ in (everything else of the config must be equal).
PER_RUN = ("seed", "client_lr", "lr_schedule", "lr_decay", "rounds", "algorithm")


def batch_key(config: RunConfig, extra_metrics=None) -> tuple:
    """Runs with equal keys may be one batch."""
    shared = tuple((name, value) for name, value in config.to_dict().items() if name not in PER_RUN)
    return shared + (("client", client_settings(config.algorithm)), ("metrics", cache.metrics_key(extra_metrics)))


def group(jobs: list, workers: int = 1, max_runs: int | None = None) -> list[list]:
    """The jobs (``pool.Job``s) as batches: equal ``batch_key``s together, in pieces of at most
    ``max_runs`` (None: ``REPLICATE_BATCH_RUNS`` capped at ``MAX_RUNS``, else ``default_runs``) and, while
    there are fewer batches than ``workers``, split so every worker has one."""
    asked = max_runs if max_runs is not None else settings.current().batch_runs
    groups: dict[tuple, list] = {}
    for job in jobs:
        alone = job.config.dataset == "given"  # its problem comes from the caller: never cached, never batched
        groups.setdefault(("given", id(job)) if alone else batch_key(job.config, job.extra_metrics), []).append(job)
    batches = []
    share = max(1, math.ceil(len(jobs) / max(workers, 1)))
    for members in groups.values():
        members.sort(key=lambda job: member_order(job.config))
        limit = default_runs(members[0].config) if asked is None else asked
        size = min(limit, MAX_RUNS, share)
        batches += [members[i:i + size] for i in range(0, len(members), size)]
    return batches


def rate_order(config: RunConfig) -> tuple:
    """Sort key putting runs of equal client rates side by side in a batch: the fused solver updates each
    stretch of runs sharing a rate with one GEMM (``fl/models/fused_runs.py``), so seeds of one rate cost
    one call, not one per run; then by the algorithm's settings, so runs of one μ (a row's decay) follow
    each other too. Order never changes a run's numbers."""
    return (config.lr_schedule, config.client_lr, config.lr_decay, repr(config.algorithm))


def member_order(config: RunConfig) -> tuple:
    """Where a group is cut into pieces: ``rate_order`` where the fused solver trains the batch (its GEMMs
    want equal rates side by side), else runs of one seed side by side first. Runs of one seed sample the same
    clients every round (``fl.batching.round_steps``), so a piece of one seed's runs takes as many sequential
    local steps as one of them, while runs of other seeds wait for each other's busiest clients. Counted on the
    paper profile's pieces (≤ 8 runs over 2 workers, `--batch-runs 8 --workers 2` | over 16): Charles & Konečný
    Figure 12 1.15× | 1.22× fewer sequential local steps, Figure 13 1.02× | 1.07×, FedProx's stragglers
    1.00× | 1.19×, the other GPU-scale figures unchanged (their groups hold one seed, or are not cut)."""
    return rate_order(config) if _fused(config) else (config.seed, *rate_order(config))


def _fused(config: RunConfig) -> bool:
    """Whether a batch of runs like ``config`` trains through the fused solver, bitwise as each run alone."""
    return getattr(models.MODELS.get(config.model), "batch_exact", False) and fused_update(config.algorithm) is not None


def round_steps(config: RunConfig) -> torch.Tensor:
    """A run's sequential local steps per round (``fl.batching.round_steps``), from its dataset's client sizes
    and its algorithm's plan: the dataset is loaded, nothing is trained."""
    if config.dataset in ("quadratic", "given"):
        population = build(config, device="cpu")[0].population()  # a given problem: ``build`` says why not
    else:
        ds = run_config.dataset(config.dataset, config.data_seed, config.num_clients)
        population = Population(ds.weights().cpu(), ds.train.sizes.cpu())
    return batching.round_steps(config.algorithm, population, config.work(), config.seed, config.rounds)


def default_runs(config: RunConfig) -> int:
    """How many runs like ``config`` batch when nobody said: ``MAX_RUNS`` where a batch computes bitwise
    what its runs compute alone or on CUDA, else 1 (one by one). Bitwise on a CPU: the logistic model's
    fused solver (``Model.batch_exact``), i.e. plain-SGD algorithms only. The generic step of the others
    (SCAFFOLD, STEM, server momentum, FedAdam) forms one GEMM over the stack, and a BLAS may round a run's
    rows otherwise where they start off its alignment (MKL on an AVX2 CPU: fl/models/fused_runs.py)."""
    if run_config.run_device().type == "cuda":
        return MAX_RUNS
    return MAX_RUNS if _fused(config) else 1


def compute(jobs: list, device: str | None = None, *, progress: bool = False) -> list[tuple[str, dict]]:
    """Train one batch (``group``'s) on ``device`` (None: this process's default) and return each run as
    ``cache.store`` takes it (CSV text, sidecar fields), touching no file: a worker anywhere calls it
    (``executors.compute_task``) and the driver stores what comes back."""
    device = torch.device(device) if device is not None else run_config.run_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ReplicateError("runs are read for CUDA (REPLICATE_DEVICE) but this machine has none: compute them on "
                             "a CUDA machine and `cache import` them, or unset REPLICATE_DEVICE")
    first = jobs[0].config if hasattr(jobs[0], "config") else jobs[0][0]
    problem, _, work, _, objective = build(first, device=device)
    size = piece(first.clients_per_round or problem.num_clients, problem.init(0).numel(), device)
    return [entry for lo in range(0, len(jobs), size)
            for entry in _train(problem, [tuple(job) for job in jobs[lo:lo + size]], work, objective, progress)]


def piece(clients: int, params: int, device) -> int:
    """How many runs of ``clients`` stacked clients of ``params`` parameters train together on ``device``."""
    size = MAX_ELEMENTS // max(clients * params, 1)
    if torch.device(device).type == "cpu":
        size = min(size, CPU_ROWS // max(clients, 1))
    return max(1, size)


def _train(problem, jobs, work, objective, progress) -> list[tuple[str, dict]]:
    try:  # checkpoints are named by the runs' cache entries (an unnamed extra metric fails where it is stored)
        saved = FileCheckpoints([cache.entry(config, target, metrics) for config, target, metrics in jobs])
    except ReplicateError:
        saved = None
    return [(text, meta) for _, text, meta in cache.train(problem, jobs, work, objective, progress=progress,
                                                           saved=saved)]
