"""Sweep executors, timed: one smoke sweep (``EXECUTOR_SWEEP``, 8 quadratic runs of about half a
second each) through the local pool and through a private Ray instance of this machine, as many
workers each, each into an empty cache; wall times exclude starting Ray (shown apart) and
include the local pool's process start. Ray's per-task overhead is its wall time, times the workers,
less the runs' own compute, per run; the second Ray sweep reuses warm workers.
"""
from __future__ import annotations

import time

from replicate.cli.bench import _markdown
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import FedAvg
from replicate.runs.config import RunConfig

EXECUTOR_SWEEP = [RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=e, batch_size=None,
                           client_lr=0.4, lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=1500,
                           seed=seed) for e in (1, 2, 5, 10) for seed in (0, 1)]


def run(configs=None) -> dict:
    """Wall seconds of one sweep through the local pool and through a private Ray instance of this
    machine (cold: its workers start; warm: they are reused), each into an empty cache, and the runs'
    own compute seconds; ``{"skipped": reason}`` without Ray."""
    import os
    import tempfile
    from pathlib import Path

    from replicate.core import settings
    from replicate.runs import cache, executors

    # A private instance for these seconds: without this, Ray 2.60 writes a token to ~/.ray/auth_token
    # that turns token authentication on for every later `ray start` of this user.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        import ray
    except ImportError:
        return {"skipped": "Ray is not installed (pip install -r requirements-ray.txt)"}
    from replicate.runs import ray_executor

    tasks = [[(config, None, None)] for config in configs or EXECUTOR_SWEEP]
    workers = executors.usable_cores()
    result = {"runs": len(tasks), "workers": workers}

    def sweep(executor) -> tuple[float, float]:
        compute = []
        with tempfile.TemporaryDirectory() as folder, settings.use(settings.current().replace(cache=Path(folder))):

            def done(task, results):
                for job, (text, meta) in zip(task, results):
                    cache.store(job[0], job[1], job[2], text, meta)
                    compute.append(meta["elapsed_s"])

            start = time.perf_counter()
            if executor.run(tasks, done, "cpu"):
                raise ReplicateError("a benchmark run failed")
            return time.perf_counter() - start, sum(compute)

    try:
        result["local"] = sweep(executors.LocalExecutor(workers))
        start = time.perf_counter()
        ray_executor.connect(None)
        result["ray_start_s"] = time.perf_counter() - start
        result["ray_cold"] = sweep(ray_executor.RayExecutor(None))
        result["ray_warm"] = sweep(ray_executor.RayExecutor(None))
    finally:
        ray.shutdown()
    return result


def table(result: dict) -> str:
    if "skipped" in result:
        return f"(sweep executors skipped: {result['skipped']})"
    runs, workers, (local, _) = result["runs"], result["workers"], result["local"]
    rows = []
    for name, key in (("local pool", "local"), ("Ray, cold workers", "ray_cold"), ("Ray, warm workers", "ray_warm")):
        wall, compute = result[key]
        rows.append([name, f"{wall:.1f}", f"{compute:.1f}", f"{(wall * workers - compute) / runs:.2f}",
                     f"{wall / local:.2f}×"])
    return (f"A smoke sweep of {runs} quadratic runs, {workers} workers; starting the private Ray instance "
            f"took {result['ray_start_s']:.1f} s (not in the wall times).\n\n"
            + _markdown(["executor", "wall s", "runs' compute s",
                         "overhead s per run (wall × workers − compute) / runs",
                         "wall vs local pool"], rows))
