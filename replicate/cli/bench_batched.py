"""Runs as a tensor dimension, timed: seconds per run when R = 1, 4 or 16 runs of a tuning grid train
as one batch (``engine.run_batch``), against the same runs one by one, in one bench run.

Workloads (training only, ``eval_every=None``, one intra-op thread as the sweep's workers run; medians
of ``repeats`` after a warm-up, batch sizes interleaved so load changes hit all of them):
- the synthetic logistic grid: synthetic(1,1), 100 clients, softmax regression 60 → 10, Scheme I
  with K = 10, E = 20 steps of b = 24 (the first engine workload), runs over client rates × seeds;
- the same as FedProx's μ grid (uniform K = 10, the same local work), runs over μ × seeds: each row's
  μ rides in the client state and sets its decay, so R = 16 trains four μ slices a step;
- the STEM LeNet tuning grid: Khanduri et al.'s Figure 5 setting (MNIST split over 100 workers,
  5 classes each, LeNet, full participation, b = 8, I = 10), runs over κ̄ × c; skipped without MNIST.
Per-run time at R is the batch's time / R; the gain is one run alone / that. The last column is how
many such runs the sweep runner trains together on this device (``runs/batched.py::piece``: on a CPU at
most 160 stacked clients, so the LeNet grid, which batching slows here, runs one by one).

What bounds the logistic gain (measured: one thread, one other core busy): a batch stacks the
*distinct* clients of its runs' rounds, and Scheme I draws K = 10 with replacement in proportion to n_k,
so a run trains ≈ 8 distinct rows a round (R = 16: 124-128 rows; one run with K = 100: 32-37, not 100).
A stacked row then costs the same in a batch as in one run, ≈ 0.11 ms a round (R = 16: 13.6 ms for
≈ 126 rows; one K = 100 run: 3.9 ms for ≈ 35), so a batched run cannot fall below its ≈ 8 rows' cost,
≈ 0.86 ms, against 1.75-1.95 ms alone: a ceiling near 2.2×, which R = 16 reaches. Of a batched run's
round, its rows' arithmetic (gathers, GEMMs, softmax) is about half and its mini-batch draws (each
from its own stream, so that a batch computes bitwise what its runs compute alone) about a quarter.
"""
from __future__ import annotations

import statistics
import time

import torch

from replicate.cli.bench import _markdown
from replicate.core.errors import ReplicateError
from replicate.core.threads import threads
from replicate.fl import engine
from replicate.fl.algorithms import FedAvg, FedProx, Stem
from replicate.fl.schedules import LRSchedule
from replicate.runs import batched
from replicate.runs.config import RunConfig, build, run_device

SIZES = (1, 4, 16)
WORKLOADS = {
    "synthetic(1,1) logistic, K=10, E=20, b=24 (client rate × seed)": (
        RunConfig(dataset="synthetic(1,1)", algorithm=FedAvg("scheme1", 10), local_steps=20, batch_size=24,
                  client_lr=0.1),
        [{"client_lr": lr, "seed": s} for s in range(4) for lr in (0.01, 0.03, 0.1, 0.3)], 10),
    "FedProx synthetic(1,1) logistic, K=10, E=20, b=24 (μ × seed)": (
        RunConfig(dataset="synthetic(1,1)", algorithm=FedProx(0.01, 10), local_steps=20, batch_size=24,
                  client_lr=0.05),
        [{"algorithm": FedProx(mu, 10), "seed": s} for s in range(4) for mu in (0.001, 0.01, 0.1, 1.0)], 10),
    "STEM LeNet, MNIST 100 workers, b=8, I=10 (κ̄ × c)": (
        RunConfig(dataset="mnist_stem_high", data_seed=0, model="lenet", algorithm=Stem(), local_steps=10,
                  batch_size=8, client_lr=0.1, lr_schedule="epoch_cube_root", lr_decay=80 / 540),
        [{"client_lr": k, "algorithm": Stem(c)} for k in (0.02, 0.05, 0.1, 0.2) for c in (1.0, 5.0, 10.0, 20.0)], 2),
}


def _seconds_per_run(problem, work, objective, configs, rounds, execution) -> float:
    specs = [engine.RunSpec(c.algorithm, LRSchedule(c.lr_schedule, c.client_lr, c.lr_decay), c.seed) for c in configs]
    start = time.perf_counter()
    engine.run_batch(problem, specs, work, objective=objective, rounds=rounds, eval_every=None, execution=execution)
    if problem.device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / len(configs)


def run(repeats: int = 3, device=None, sizes=SIZES) -> list[dict]:
    """One row per workload: seconds per run (and per round) at each batch size R, and the gain over R = 1."""
    device = torch.device(device) if device else run_device()
    with threads(1):  # as a sweep's worker processes run (runs/executors.py)
        rows = [_workload(name, base, grid, rounds, repeats, device, sizes)
                for name, (base, grid, rounds) in WORKLOADS.items()]
    return [row for row in rows if row is not None]


def _workload(name, base, grid, rounds, repeats, device, sizes) -> dict | None:
    """One workload's row (None: its data is not staged)."""
    try:
        problem, _, work, _, objective = build(base, device=device)
    except ReplicateError as exc:
        print(f"skipping {name}: {exc}")
        return None
    # as the runner orders a batch
    configs = sorted((base.replace(**changes) for changes in grid), key=batched.rate_order)
    execution = engine.preferred_execution(problem)
    times = {r: [] for r in sizes}
    for repeat in range(repeats + 1):  # the first repeat warms up and is discarded
        for r in sizes:
            t = _seconds_per_run(problem, work, objective, configs[:r], rounds, execution)
            if repeat:
                times[r].append(t)
    clients = base.clients_per_round or problem.num_clients
    row = {"workload": name, "execution": execution, "rounds": rounds,
           "runner": batched.piece(clients, problem.init(0).numel(), device)}
    for r in sizes:
        row[f"R={r}"] = statistics.median(times[r]) / rounds
    for r in sizes[1:]:
        row[f"gain R={r}"] = row[f"R={sizes[0]}"] / row[f"R={r}"]
    return row


def table(results: list[dict], sizes=SIZES) -> str:
    header = ["workload", "execution", *(f"R = {r}: s/round per run" for r in sizes),
              *(f"R = {r} vs one by one" for r in sizes[1:]), "runs the sweep runner batches here"]
    return _markdown(header, [[row["workload"], row["execution"], *(f"{row[f'R={r}']:.4f}" for r in sizes),
                               *(f"{row[f'gain R={r}']:.2f}×" for r in sizes[1:]), str(row["runner"])]
                              for row in results])
