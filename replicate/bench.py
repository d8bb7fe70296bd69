"""Time the vectorized engine against the sequential oracle on one workload, same run.

Workload (issue #2): 100 clients of synthetic(1,1), softmax regression 60 → 10,
E = 20 local SGD steps, b = 24, Scheme I with K = 10 and K = 100 clients per round.
Both solvers get the identical round plans and mini-batch draws; metrics evaluation
is excluded (``eval_every`` beyond the run) so only training is timed.
"""
from __future__ import annotations

import platform
import statistics
import time

import torch

from . import engine, oracle
from .experiments.config import RunConfig, build

WORKLOAD = RunConfig(dataset="synthetic(1,1)", scheme="scheme1", local_steps=20, batch_size=24,
                     lr=0.1, lr_schedule="li2020", weight_decay=1e-4, clip_norm=60.0)


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


def run(clients_per_round=(10, 100), rounds: int = 5, repeats: int = 3, device=None) -> list[dict]:
    device = torch.device(device) if device else engine.default_device()
    results = []
    for k in clients_per_round:
        config = WORKLOAD.replace(clients_per_round=k)
        fast = _seconds_per_round(engine.local_update, config, rounds * 4, repeats, device)
        slow = _seconds_per_round(oracle.sequential_local_update, config, rounds, repeats, device)
        results.append({"K": k, "engine_s_per_round": fast, "oracle_s_per_round": slow, "speedup": slow / fast})
    return results


def describe_machine(device=None) -> str:
    device = torch.device(device) if device else engine.default_device()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or platform.machine()
    return (f"{device.type} ({name}), torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"python {platform.python_version()}")


def table(results: list[dict]) -> str:
    rows = ["| K | engine s/round | oracle s/round | speed-up |", "|---|---|---|---|"]
    rows += [f"| {r['K']} | {r['engine_s_per_round']:.4f} | {r['oracle_s_per_round']:.4f} | "
             f"{r['speedup']:.1f}× |" for r in results]
    return "\n".join(rows)
