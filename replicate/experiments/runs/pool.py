"""Runs computed side by side in worker processes, and runs stopped at a target loss.

``compute`` takes the ``(config, target)`` jobs a figure is missing from the result cache
and computes them in ``workers`` single-threaded processes first (on a shared 2-core CPU two
single-threaded runs beat one two-threaded run); the figure functions then read every run
from the cache. Used by the Li et al. 2020 training figures (1a, 1c/1d, 3 and 4).
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing

import pandas as pd

from replicate.experiments.runs import cache
from replicate.experiments.runs.config import RunConfig


def run_to_target(config: RunConfig, target: float, *, progress: bool = False,
                  log: cache.RunLog | None = None) -> pd.DataFrame:
    """Metrics per round until the global training loss first is ≤ ``target`` (or ``config.rounds``)."""
    return cache.run(config, stop_loss=target, progress=progress, log=log)


def _compute(job: tuple[RunConfig, float | None]) -> None:
    import torch

    torch.set_num_threads(1)
    config, target = job
    if target is None:
        cache.run(config, progress=False)
    else:
        run_to_target(config, target)


_NEURAL = ("cnn", "lenet", "conv_dropout", "char_lstm", "char_lstm_tff", "sent_lstm")


def _cost(job: tuple[RunConfig, float | None]) -> float:
    """Rough work of a run in synthetic client-steps (an MNIST client-step costs about 10, a CNN's or an
    LSTM's 50 times a logistic one's); full participation (K = None) counts the builders' default 100 clients."""
    config = job[0]
    steps = config.local_steps or config.local_epochs * 10  # an epoch: ~10 batches of a typical client
    clients = config.clients_per_round or config.num_clients or 100
    model = 50 if config.model in _NEURAL else 1
    return config.rounds * steps * clients * model * (10 if config.dataset.startswith("mnist") else 1)


PARALLEL_ABOVE = 2e6  # below this much work (~1 min) starting worker processes costs more than it saves


def compute(jobs: list[tuple[RunConfig, float | None]], workers: int = 2, progress: bool = True,
            log: cache.RunLog | None = None) -> None:
    """Compute the missing ``(config, target)`` jobs (target None = a full ``cache.run``) in parallel.

    ``workers`` single-threaded processes take the missing runs longest first and leave
    them in the cache, where the figure functions then read them. With one worker, or
    too little work to pay for starting processes, nothing happens here and each run is
    computed in this process when it is first read.
    """
    missing = cache.plan(jobs, log)  # the log's runs done / total counts them whoever computes them
    if workers <= 1 or sum(map(_cost, missing)) < PARALLEL_ABOVE:
        return
    from tqdm.auto import tqdm

    missing.sort(key=_cost, reverse=True)
    context = multiprocessing.get_context("spawn")
    with (concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_ignore_interrupt) as pool,
          tqdm(total=len(missing), desc="runs", disable=not progress or log is not None, leave=False) as bar):
        futures = {pool.submit(_compute, job): job for job in missing}
        for future in concurrent.futures.as_completed(futures):
            future.result()
            if log is not None:
                log.mark_computed(*futures[future])
                log.finished(by_worker=True)
            bar.update()


def _ignore_interrupt() -> None:
    """Workers leave Ctrl-C to the parent, which shuts the pool down: one message, not one
    traceback per worker. Finished runs are already in the cache."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
