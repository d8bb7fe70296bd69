"""Executors: where a sweep's missing runs are computed, on this machine or on a Ray cluster.

A sweep (``pool.compute``) hands an executor its missing runs as tasks, a task being a list of jobs
(``pool.Job``s that ``batched.group`` put together: one worker trains them as one batch). A
worker computes a task with ``compute_task`` and touches no file: it hands back each run's CSV text and
sidecar fields, and the driver, the process that plans the sweep, writes them into its cache
(``cache.store``, atomically) as they arrive. So workers need neither this machine's filesystem nor
write access to the checkout, an interrupted sweep keeps every run that came back, and the cached
CSVs are the same bytes whichever executor computed them (``tests/test_executors.py``).

Two executors, one contract:

- ``local`` (the default): a pool of spawned single-threaded processes on this machine, one per usable
  core (``REPLICATE_WORKERS`` to choose); on a shared 2-core CPU two single-threaded runs beat one
  two-threaded run.
- ``ray`` (``--executor ray`` or ``REPLICATE_EXECUTOR=ray``): a Ray task per task of runs on the cluster
  at ``RAY_ADDRESS`` (``runs/ray_executor.py``; Ray is imported only then).

Both retry a task that raises once (a ``ReplicateError``, a mistake in the input, is not retried), let
the other tasks go on, and return what failed with its config and error; the sweep then raises one
``ReplicateError`` naming them. Ctrl-C cancels the tasks not started and keeps every run finished; the local
executor's workers save the runs under way at their next round boundary (``runs.checkpoints``), to resume. A
stop asked through the stop file (a spent time budget, SIGINT or SIGTERM to ``figures``: ``cli.runner``) does
the same, and a task that begins once it is asked (its worker was still starting) ends at once, untouched.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from dataclasses import dataclass
from typing import Callable

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.runs import checkpoints

ATTEMPTS = 2  # a task that raises is tried once more, then reported


def compute_task(jobs: list, device: str | None = None,
                 given: settings.Settings | dict | None = None) -> list[tuple[str, dict]]:
    """A worker's whole job: compute each run of the task (``(config, target, extra_metrics)``) on
    ``device`` (None: this process's default; one intra-op thread, as every run: ``cache.train``) under the
    settings its driver gives (``given``: the driver's own, or a dict of those that replace the worker's; None:
    the worker's) and return its cache CSV text and sidecar fields; nothing is written here but the
    checkpoints of runs cut off. Once its stop file exists (``settings.stop_file``) it starts nothing:
    ``Checkpointed``, as a task stopped at its first round boundary."""
    from replicate.runs import batched

    with settings.use(worker_settings(given)):
        stop = settings.current().stop_file
        if stop is not None and os.path.exists(stop):  # asked to stop before it began: its runs stay as they are
            from replicate.fl.resume import Checkpointed  # (a checkpoint of theirs from before is kept)

            raise Checkpointed("asked to stop before the task began")
        return batched.compute([tuple(job) for job in jobs], device)  # one batch of runs (batched.group's)


def worker_settings(given: settings.Settings | dict | None) -> settings.Settings:
    """The settings a task computes under: its driver's (``given``), the worker's own with ``given``'s
    replacing some of them (a dict), or the worker's own (None)."""
    if isinstance(given, dict):
        return settings.current().replace(**given)
    return given or settings.current()


@dataclass
class Failure:
    """A task that failed on its last attempt."""

    task: list
    error: str

    def describe(self) -> str:
        configs = "; ".join(f"{job[0]!r}" + (f" to loss {job[1]:g}" if job[1] is not None else "") for job in self.task)
        return f"{configs}: {self.error}"


def failed(failures: list[Failure], total: int) -> ReplicateError:
    """The one error a sweep ends with when some of its tasks failed (the others are cached)."""
    runs = sum(len(f.task) for f in failures)
    return ReplicateError(f"{runs} of {total} runs failed after {ATTEMPTS} attempts (the others are cached; rerun "
                          "to retry only these):\n" + "\n".join(f"  {f.describe()}" for f in failures))


def describe_error(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


def retried(exc: BaseException, attempt: int) -> bool:
    """Whether a task that raised ``exc`` on its ``attempt``-th try is tried again."""
    return attempt < ATTEMPTS and not isinstance(exc, ReplicateError)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class LocalExecutor:
    """Spawned single-threaded worker processes on this machine (``REPLICATE_WORKERS``, default one per
    usable core). A worker that dies breaks the pool: a new pool takes the tasks it left."""

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = workers or settings.current().workers or usable_cores()

    def run(self, tasks: list[list], done: Callable[[list, list], None], device: str | None = None) -> list[Failure]:
        """Compute ``tasks``, calling ``done(task, results)`` in this process as each one comes back."""
        failures, todo = [], [(task, 1) for task in tasks]
        context = multiprocessing.get_context("spawn")
        # A stop file asks the workers to save their runs at the next round boundary and stop: the one the
        # batch runner set for this notebook (a spent time budget touches it), else this driver's own
        inherited = settings.current().stop_file
        stop = inherited or checkpoints.stop_file()
        given = settings.current().replace(stop_file=stop)  # handed to each worker as it starts
        try:
            return self._run(todo, failures, context, done, device, stop, given)
        finally:
            if not inherited:
                stop.unlink(missing_ok=True)

    def _run(self, todo, failures, context, done, device, stop, given) -> list[Failure]:
        while todo:
            with concurrent.futures.ProcessPoolExecutor(min(self.workers, len(todo)), mp_context=context,
                                                        initializer=_worker_init, initargs=(given,)) as pool:
                futures = {pool.submit(compute_task, task, device): (task, attempt) for task, attempt in todo}
                todo = []
                try:
                    while futures:
                        ready, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_COMPLETED)
                        for future in ready:
                            task, attempt = futures.pop(future)
                            try:
                                results = future.result()
                            except concurrent.futures.process.BrokenProcessPool:  # a worker died
                                todo.append((task, attempt + 1))
                                continue
                            except Exception as exc:
                                if retried(exc, attempt):
                                    futures[pool.submit(compute_task, task, device)] = (task, attempt + 1)
                                else:
                                    failures.append(Failure(task, describe_error(exc)))
                                continue
                            done(task, results)
                        if todo:  # the pool is broken: its unfinished tasks go to a new one, as another attempt
                            todo += [(task, attempt + 1) for task, attempt in futures.values()]
                            failures += [Failure(task, "its worker process died") for task, a in todo if a > ATTEMPTS]
                            todo = [(task, a) for task, a in todo if a <= ATTEMPTS]
                            break
                except BaseException:  # Ctrl-C or a spent time budget: the runs under way are saved as they stand
                    checkpoints.request_stop(stop)  # (runs.checkpoints) and resume from there next time
                    pool.shutdown(wait=True, cancel_futures=True)
                    for future, (task, _) in futures.items():
                        if future.done() and not future.cancelled() and future.exception() is None:
                            done(task, future.result())
                    raise
        return failures


def _worker_init(given: settings.Settings) -> None:
    """A worker computes under its driver's settings, handed to it here (it reads no environment of its own).
    Workers leave Ctrl-C to the parent, which shuts the pool down: one message, not one
    traceback per worker. And a worker whose parent is gone (killed, not interrupted: its result has
    nowhere to go) exits within ``ORPHAN_POLL_S``, instead of computing on for nothing; seen when a
    figure job was stopped with SIGTERM (its kernel died, a worker ran on at full CPU)."""
    import signal
    import threading
    import time

    settings.install(given)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


ORPHAN_POLL_S = 2.0


def current(name: str | None = None):
    """The executor ``name``, else this process's setting (``REPLICATE_EXECUTOR``): ``LocalExecutor``
    or a connected ``ray_executor.RayExecutor``."""
    name = name or settings.current().executor
    if name == "ray":
        from replicate.runs import ray_executor

        return ray_executor.RayExecutor(settings.current().ray_address)
    if name != "local":
        raise ReplicateError(f"unknown executor {name!r}: local or ray")
    return LocalExecutor()
