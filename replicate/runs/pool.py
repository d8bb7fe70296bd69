"""A figure's sweep of runs: the missing ones computed side by side by an executor, every one read
back from the cache into one tidy frame, and runs stopped at a target loss.

``compute`` takes the jobs (``Job``: config, optional target loss, optional extra metrics) a
figure is missing from the result cache and has an executor compute them first (``executors``: a
pool of single-threaded processes on this machine, the default, or a Ray cluster), writing each
into the cache as it comes back; ``frame`` then reads every run from the cache with its labels.
Every paper's figures use them.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import pandas as pd

from replicate.runs import batched, cache, executors
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
    """Compute the missing jobs (``Job`` or its fields as a tuple; target None = a full run) through the
    executor of this process's settings (``executors.current``) and leave them in the cache, where the
    figure functions then read them.

    Runs that may train together (``batched.group``: same data, model, local work and client half) form
    one task, trained as one stack of clients (runs as a tensor dimension). Locally, ``workers > 1`` lets
    single-threaded processes take the tasks longest first (as many as ``REPLICATE_WORKERS`` or the
    machine's cores); with one worker, or too little work to pay for starting processes, the tasks of
    several runs are trained here and a run alone is computed in this process when it is first read. On
    a Ray cluster every task is a Ray task. A run that fails twice is reported at the end (one
    ``ReplicateError``) after the others are cached.
    """
    # the log's runs done / total counts them whoever computes them
    missing = cache.plan([Job(*job) for job in jobs], log)
    if not missing:
        return
    executor = executors.current()
    if executor.name == "local" and _no_cuda():
        return  # each run is read as it is needed, and cache.run says why a CUDA run cannot be computed here
    from tqdm.auto import tqdm

    with tqdm(total=len(missing), desc=f"runs ({executor.name})", unit="run",
              disable=None if progress and log is None else True, leave=False) as bar:  # None: as the engine's
        def done(task: list[Job], results: list[tuple[str, dict]]) -> None:
            for job, (text, meta) in zip(task, results):
                cache.store(job.config, job.target, job.extra_metrics, text, meta)
                if log is not None:
                    log.mark_computed(*job)
                    log.finished(by_worker=True)
                bar.update()

        if executor.name == "local" and (workers <= 1 or sum(map(_cost, missing)) < PARALLEL_ABOVE):
            for task in batched.group(missing):
                if len(task) > 1:  # a run alone is computed when it is read
                    done(task, executors.compute_task(task))  # one thread, as a worker computes it
            return
        tasks = batched.group(missing, getattr(executor, "workers", 1))
        tasks.sort(key=lambda task: sum(map(_cost, task)), reverse=True)
        failures = executor.run(tasks, done)
    if failures:
        raise executors.failed(failures, len(missing))


def _no_cuda() -> bool:
    """Runs are for CUDA (``REPLICATE_DEVICE``) and this machine has none: local workers cannot compute them."""
    import torch

    from replicate.runs.config import run_device

    return run_device().type == "cuda" and not torch.cuda.is_available()


def frame(labelled: list[tuple[dict, RunConfig]], *, columns=None, extra_metrics=None, workers: int = 1,
          progress: bool = True, log: cache.RunLog | None = None) -> pd.DataFrame:
    """Tidy per-round metrics of every ``(labels, config)``: the label columns, then ``columns`` of the
    history (None = all of them). Missing runs are computed first (``compute``, ``workers`` processes);
    what is left is computed here (with one intra-op thread, as every run: ``cache.train``)."""
    compute([Job(c, None, extra_metrics) for _, c in labelled], workers, progress, log)
    return tidy([(labels, cache.run(config, progress=False, log=log, extra_metrics=extra_metrics))
                 for labels, config in labelled], columns)


def tidy(labelled: list[tuple[dict, pd.DataFrame]], columns=None) -> pd.DataFrame:
    """One frame of ``(labels, history)`` pairs: the label columns first, then ``columns`` of each history
    (None = all of them), the histories one after another in the order given; none: an empty frame."""
    if not labelled:
        return pd.DataFrame(columns=list(columns or ()))
    data = pd.concat([(history if columns is None else history[list(columns)]).assign(**labels)
                      for labels, history in labelled], ignore_index=True)
    return data[[*labelled[0][0], *(c for c in data.columns if c not in labelled[0][0])]]

