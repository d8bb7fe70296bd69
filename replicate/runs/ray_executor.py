"""The ray executor: a sweep's missing runs as Ray tasks on a cluster, results written here.

Imported only when a sweep runs with ``REPLICATE_EXECUTOR=ray`` (``--executor ray``), so Ray stays an
optional extra (``requirements-ray.txt``). The driver joins the cluster at ``RAY_ADDRESS`` (none: a
private cluster of this machine) and ships its own ``replicate`` package with the tasks (Ray's
``py_modules``), so the workers compute with the driver's code whatever their checkout holds; they
need the same Python, Ray and torch (checked before any compute) and, for runs on real datasets, the
datasets staged at the driver's ``REPLICATE_DATA`` path. A task (``executors.compute_task``) asks for
one CPU, and for CUDA runs ``REPLICATE_RAY_GPUS`` GPUs (default 1; a fraction packs several runs on one
GPU). It returns each run's CSV text and sidecar to the driver, which writes its own cache.

Failures: Ray reschedules a task whose worker or node dies (``max_retries``); a task that raises is
resubmitted here once, then reported with its config while the others go on; Ctrl-C cancels the
outstanding tasks and keeps every run already written. A bad address, a cluster without the GPUs the
runs want, or another Ray, Python or torch version is one ``ReplicateError`` line before any compute.
"""
from __future__ import annotations

import logging
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

from replicate.core import settings
from replicate.core.errors import ReplicateError

WORKER_DEATHS = 3  # reschedules of a task whose worker process or node died (Ray's max_retries)
PACKAGE = Path(__file__).resolve().parents[1]  # the replicate package shipped to the workers


def _versions() -> dict:
    """What a run's numbers and Ray's wire protocol depend on, on a worker and here."""
    import ray
    import torch

    return {"python": platform.python_version(), "ray": ray.__version__, "torch": torch.__version__}


def local_versions() -> dict:
    return _versions()


def _reachable(address: str) -> None:
    """One line at once for a host:port that nothing listens on (Ray itself retries for a minute)."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ReplicateError(f"RAY_ADDRESS (--ray-address) must be host:port, ray://host:port or auto, got {address!r}")
    try:
        speaks = _speaks_grpc(host, int(port))
    except OSError as exc:
        raise ReplicateError(f"no Ray cluster at {address}: {exc.strerror or exc} (start one with `ray start --head`, "
                             "or give its head node's address with --ray-address / RAY_ADDRESS)") from None
    if not speaks:
        raise ReplicateError(f"something listens at {address}, but not a Ray head node (it does not answer as a gRPC "
                             "server does); check the address (`ray status` on the head node shows it)")
    _probe(address)


# the client connection preface of HTTP/2 (RFC 9113 §3.4) and an empty SETTINGS frame: a gRPC server, as Ray's
# head node (its GCS, or Ray Client's server for ray://) is, answers with a SETTINGS frame of its own at once
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _speaks_grpc(host: str, port: int, timeout: float = 5.0) -> bool:
    """Whether the server at host:port answers an HTTP/2 preface with a SETTINGS frame (a gRPC server) within
    ``timeout`` seconds: a web server, a database or a stale port does not, and then no Ray join is tried (it would
    retry for minutes). An ``OSError``: nothing listens there."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(_PREFACE)
        head = b""
        try:
            while len(head) < 9:
                piece = sock.recv(9 - len(head))
                if not piece:
                    break
                head += piece
        except (socket.timeout, ConnectionResetError):
            return False
    return len(head) == 9 and head[3] == 0x04  # a frame header whose type is SETTINGS


# seconds a cluster has to answer a first connection (Ray itself retries for minutes): the probe process imports
# Ray and joins, 10-30 s on a busy 2-core machine (a live local cluster once took over 30 s under CI load)
PROBE_S = 90


def _probe(address: str) -> None:
    """Join the cluster once in a separate process, bounded by ``PROBE_S`` and with Ray's own log lines kept
    there: something that listens at ``address`` but is not Ray (a web server, a stale port) would make
    ``ray.init`` here retry for minutes, printing a warning at every try."""
    code = ("import logging, ray; ray.init(address=%r, logging_level=logging.ERROR, log_to_driver=False); "
            "ray.shutdown()" % address)
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PROBE_S)
    except subprocess.TimeoutExpired:
        raise ReplicateError(f"no Ray cluster answered at {address} within {PROBE_S} s (something listens there, "
                             "but not a Ray head node?); check the address (`ray status` on the head node shows "
                             "it)") from None
    if out.returncode:
        last = [line for line in out.stderr.strip().splitlines() if line.strip()][-1:] or ["no message"]
        raise ReplicateError(f"cannot use the Ray cluster at {address}: {' '.join(last[0].split())}")


def connect(address: str | None) -> None:
    """Join the cluster (once per process) and check it can compute this driver's runs. A malformed address, a
    port where nothing listens or where no gRPC server answers is refused before Ray (or torch) is imported."""
    if address and not _joined():
        _reachable(address)
    from replicate.runs import executors  # here: it imports torch, which a refused address never needs
    try:
        import ray
    except ImportError:
        raise ReplicateError("the ray executor needs Ray: pip install -r requirements-ray.txt "
                             "(or pip install -e '.[ray]')") from None
    if ray.is_initialized():
        return
    # no address: a new private instance ("local"), not a cluster some `ray start` left on this machine
    options = {} if address else {"include_dashboard": False, "num_cpus": executors.usable_cores()}
    try:
        ray.init(address=address or "local", logging_level=logging.ERROR, log_to_driver=False, configure_logging=True,
                 runtime_env={"py_modules": [str(PACKAGE)], "excludes": ["__pycache__", "*.pyc"]}, **options)
    except Exception as exc:  # a version mismatch, a refused connection: Ray says it in several lines
        raise ReplicateError(f"cannot use the Ray cluster at {address or 'this machine'}: "
                             + " ".join(str(exc).split())) from None
    try:
        theirs = ray.get(ray.remote(_versions).options(num_cpus=0).remote(), timeout=120)
    except Exception as exc:
        ray.shutdown()
        raise ReplicateError(f"the Ray cluster at {address or 'this machine'} cannot run a task: "
                             f"{executors.describe_error(exc)}") from None
    if theirs != (ours := local_versions()):
        ray.shutdown()
        differ = ", ".join(f"{k} {theirs[k]} there, {ours[k]} here" for k in ours if theirs[k] != ours[k])
        raise ReplicateError(f"the Ray cluster at {address or 'this machine'} runs other versions ({differ}): its runs "
                             "would not give this machine's numbers; install the same versions on both")


def _gpus(device: str, address: str | None) -> float:
    """GPUs a task of runs for ``device`` asks for; one line if the cluster has fewer."""
    import ray

    gpus = settings.current().ray_gpus if device.startswith("cuda") else 0
    if gpus and (have := ray.cluster_resources().get("GPU", 0)) < gpus:
        raise ReplicateError(f"the Ray cluster at {address or 'this machine'} has {have:g} GPUs and the runs are "
                             f"computed for CUDA ({gpus:g} GPU each, REPLICATE_RAY_GPUS): add GPU nodes, or set "
                             "REPLICATE_DEVICE=cpu")
    return gpus


def _joined() -> bool:
    """Whether this process joined a cluster already (Ray imported and initialised)."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def check(address: str | None) -> None:
    """What a batch of notebooks checks before its first one starts (each kernel joins the cluster
    itself): the cluster is there, runs Ray, Python and torch of these versions and has the GPUs."""
    if address is None:  # each kernel would start a private cluster of its own: only check Ray is there
        try:
            import ray  # noqa: F401
        except ImportError:
            connect(address)  # says how to install it
        return
    connect(address)
    import ray

    from replicate.runs.config import run_device

    try:
        _gpus(run_device().type, address)
    finally:
        ray.shutdown()


def task_settings(address: str | None) -> settings.Settings | dict:
    """What a task computes under (``executors.compute_task``'s ``given``). A private instance is this machine:
    the driver's settings, its stop file and cache among them. A cluster's node reads the datasets staged at the
    driver's folders (a cluster shares them) and keeps its own settings for the rest (checkpoints in its cache)."""
    ours = settings.current()
    return ours if address is None else {"data": ours.data, "data_from": ours.data_from}


class RayExecutor:
    """Tasks of runs on the Ray cluster at ``address``; joined when the first sweep uses it."""

    name = "ray"

    def __init__(self, address: str | None):
        self.address = address

    def run(self, tasks: list[list], done: Callable[[list, list], None], device: str | None = None) -> list:
        from replicate.runs import executors
        from replicate.runs.config import run_device

        device = device or run_device().type  # the device type the cache keys name
        connect(self.address)
        import ray

        gpus = _gpus(device, self.address)
        remote = ray.remote(executors.compute_task).options(num_cpus=1, num_gpus=gpus, max_retries=WORKER_DEATHS,
                                                             retry_exceptions=False)
        device = "cuda" if gpus else device  # Ray shows a task its own GPUs, from cuda:0 on
        given = task_settings(self.address)
        refs = {remote.remote(task, device, given): (task, 1) for task in tasks}
        failures = []
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    task, attempt = refs.pop(ref)
                    try:
                        results = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the run raised
                        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                        if executors.retried(cause, attempt):
                            refs[remote.remote(task, device, given)] = (task, attempt + 1)
                        else:
                            failures.append(executors.Failure(task, executors.describe_error(cause)))
                        continue
                    except ray.exceptions.RayError as exc:  # its worker died more than WORKER_DEATHS times
                        failures.append(executors.Failure(task, executors.describe_error(exc)))
                        continue
                    done(task, results)
        except BaseException:  # Ctrl-C or a spent time budget: the runs written so far stay
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
        return failures

