"""Time the vectorized engine against the sequential oracle on fixed workloads, same run.

Workloads:
- synthetic(1,1): 100 clients, softmax regression 60 → 10, E = 20 local SGD steps,
  b = 24, Scheme I with K = 10 and K = 100 clients per round (issue #2).
- mnist unbalanced: 100 clients, softmax regression 784 → 10, E = 100 steps, b = 64,
  Scheme I with K = 30, the setting of Li et al.'s Figure 1a whose large-E runs dominate
  the paper profile (issue #3); skipped when MNIST is not staged.

Three solvers get identical round plans and mini-batch draws: the engine with the linear
model's fused solver (its default), the engine's generic per-step gradient path (what
non-linear models use), and the sequential autograd oracle. Metrics evaluation is
excluded (``eval_every`` beyond the run) so only training is timed.
"""
from __future__ import annotations

import functools
import platform
import statistics
import time

import torch

from . import engine, oracle
from .errors import ReplicateError
from .experiments.config import RunConfig, build

WORKLOADS = {
    "synthetic(1,1), E=20, b=24": (
        RunConfig(dataset="synthetic(1,1)", scheme="scheme1", local_steps=20, batch_size=24, lr=0.1,
                  lr_schedule="li2020", weight_decay=1e-4, clip_norm=60.0), (10, 100)),
    "mnist unbalanced, E=100, b=64": (
        RunConfig(dataset="mnist_unbalanced", scheme="scheme1", local_steps=100, batch_size=64, lr=0.1,
                  lr_schedule="li2020", weight_decay=1e-4, clip_norm=60.0), (30,)),
}
SOLVERS = {
    "fused": engine.local_update,
    "generic": functools.partial(engine.local_update, fused=False),
    "oracle": oracle.sequential_local_update,
}


def _seconds_per_round(solver, config: RunConfig, rounds: int, repeats: int, device) -> float:
    problem, algorithm, update, schedule = build(config, device=device)
    times = []
    for repeat in range(repeats + 1):  # the first repeat warms up and is discarded
        start = time.perf_counter()
        engine.run(problem, algorithm, update, schedule, rounds=rounds, seed=repeat,
                   eval_every=rounds + 1, local=solver)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / rounds)
    return statistics.median(times[1:])


def run(rounds: int = 5, repeats: int = 3, device=None, workloads=None) -> list[dict]:
    """One row per (workload, K): seconds per round of each solver and the ratios.

    The solvers alternate within each (workload, K), so a change in machine load between
    them shows up in all of them. The oracle runs a quarter of the engine's rounds.
    """
    device = torch.device(device) if device else engine.default_device()
    results = []
    for name, (base, ks) in (workloads or WORKLOADS).items():
        try:
            build(base, device=device)
        except ReplicateError as exc:
            print(f"skipping {name}: {exc}")
            continue
        for k in ks:
            config = base.replace(clients_per_round=k)
            row = {"workload": name, "K": k}
            for solver, fn in SOLVERS.items():
                n = max(1, rounds // 4) if solver == "oracle" else rounds
                row[f"{solver}_s_per_round"] = _seconds_per_round(fn, config, n, repeats, device)
            row["speedup"] = row["oracle_s_per_round"] / row["fused_s_per_round"]
            row["fused_gain"] = row["generic_s_per_round"] / row["fused_s_per_round"]
            results.append(row)
    return results


def describe_machine(device=None) -> str:
    device = torch.device(device) if device else engine.default_device()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return (f"{device.type} ({name}), torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"python {platform.python_version()}")


def table(results: list[dict]) -> str:
    rows = ["| workload | K | engine (fused) s/round | engine (generic step) s/round | oracle s/round | "
            "engine vs oracle | fused vs generic |", "|---|---|---|---|---|---|---|"]
    rows += [f"| {r['workload']} | {r['K']} | {r['fused_s_per_round']:.4f} | {r['generic_s_per_round']:.4f} | "
             f"{r['oracle_s_per_round']:.4f} | {r['speedup']:.1f}× | {r['fused_gain']:.2f}× |" for r in results]
    return "\n".join(rows)
