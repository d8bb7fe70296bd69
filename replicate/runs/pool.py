"""A figure's sweep of runs: the missing ones computed side by side in worker processes, every
one read back from the cache into one tidy frame, and runs stopped at a target loss.

``compute`` takes the jobs (``Job``: config, optional target loss, optional extra metrics) a
figure is missing from the result cache and computes them in ``workers`` single-threaded
processes first (on a shared 2-core CPU two single-threaded runs beat one two-threaded run);
``frame`` then reads every run from the cache with its labels. Every paper's figures use them.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
from typing import Callable, NamedTuple

import pandas as pd

from replicate.runs import cache
from replicate.runs.config import RunConfig


class Job(NamedTuple):
    """One run of a sweep, as the cache keys it."""

    config: RunConfig
    target: float | None = None  # stop at the first evaluation whose training loss is at most this
    extra_metrics: Callable | None = None  # a keyed hook (``cache.metrics_key``), e.g. FedProx's dissimilarity


def run_to_target(config: RunConfig, target: float, *, progress: bool = False,
                  log: cache.RunLog | None = None) -> pd.DataFrame:
    """Metrics per round until the global training loss first is ≤ ``target`` (or ``config.rounds``)."""
    return cache.run(config, stop_loss=target, progress=progress, log=log)


def _compute(job: Job) -> None:
    import torch

    torch.set_num_threads(1)
    cache.run(job.config, stop_loss=job.target, progress=False, extra_metrics=job.extra_metrics)


_NEURAL = ("cnn", "lenet", "lenet5", "conv_dropout", "char_lstm", "char_lstm_tff", "sent_lstm")


def _cost(job: Job) -> float:
    """Rough work of a run in synthetic client-steps (an MNIST client-step costs about 10, a CNN's or an
    LSTM's 50 times a logistic one's); full participation (K = None) counts the builders' default 100 clients."""
    config = job[0]
    steps = config.local_steps or config.local_epochs * 10  # an epoch: ~10 batches of a typical client
    clients = config.clients_per_round or config.num_clients or 100
    model = 50 if config.model in _NEURAL else 1
    return config.rounds * steps * clients * model * (10 if config.dataset.startswith("mnist") else 1)


PARALLEL_ABOVE = 2e6  # below this much work (~1 min) starting worker processes costs more than it saves


def compute(jobs: list[Job | tuple], workers: int = 2, progress: bool = True,
            log: cache.RunLog | None = None) -> None:
    """Compute the missing jobs (``Job`` or its fields as a tuple; target None = a full run) in parallel.

    ``workers`` single-threaded processes take the missing runs longest first and leave
    them in the cache, where the figure functions then read them. With one worker, or
    too little work to pay for starting processes, nothing happens here and each run is
    computed in this process when it is first read.
    """
    missing = cache.plan([Job(*job) for job in jobs], log)  # the log's runs done / total counts them whoever computes them
    if workers <= 1 or sum(map(_cost, missing)) < PARALLEL_ABOVE:
        return
    from tqdm.auto import tqdm

    missing.sort(key=_cost, reverse=True)
    context = multiprocessing.get_context("spawn")
    with (concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_ignore_interrupt) as pool,
          tqdm(total=len(missing), desc="runs", disable=not progress or log is not None, leave=False) as bar):
        futures = {pool.submit(_compute, job): job for job in missing}
        try:
            for future in concurrent.futures.as_completed(futures):
                future.result()
                if log is not None:
                    log.mark_computed(*futures[future])
                    log.finished(by_worker=True)
                bar.update()
        except BaseException:  # a failed run, Ctrl-C or a spent time budget: do not wait for the queued runs
            pool.shutdown(wait=True, cancel_futures=True)  # the runs under way finish and stay cached
            raise


def frame(labelled: list[tuple[dict, RunConfig]], *, columns=None, extra_metrics=None, workers: int = 1,
          progress: bool = True, log: cache.RunLog | None = None, single_threaded: bool = False) -> pd.DataFrame:
    """Tidy per-round metrics of every ``(labels, config)``: the label columns, then ``columns`` of the
    history (None = all of them). Missing runs are computed first (``compute``, ``workers`` processes);
    what is left is computed here, with one intra-op thread if ``single_threaded`` (as the workers do)."""
    import torch

    compute([Job(c, None, extra_metrics) for _, c in labelled], workers, progress, log)
    frames, threads = [], torch.get_num_threads()
    try:
        if single_threaded:
            torch.set_num_threads(1)
        for labels, config in labelled:
            history = cache.run(config, progress=False, log=log, extra_metrics=extra_metrics)
            frames.append((history if columns is None else history[list(columns)]).assign(**labels))
    finally:
        torch.set_num_threads(threads)
    data = pd.concat(frames, ignore_index=True)
    return data[[*labelled[0][0], *(c for c in data.columns if c not in labelled[0][0])]]


def _ignore_interrupt() -> None:
    """Workers leave Ctrl-C to the parent, which shuts the pool down: one message, not one
    traceback per worker. Finished runs are already in the cache."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
