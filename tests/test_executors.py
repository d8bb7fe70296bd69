"""Executors: a sweep computed by the local pool or on a real Ray cluster gives the same cached bytes,
failures are reported after the other runs are cached, a killed worker is rescheduled, bad input is
one line before any compute. The Ray tests start a head node of their own on 127.0.0.1 (2 CPUs) and
stop it; they are skipped, with the reason, only where Ray is not installed (requirements-ray.txt)."""
from __future__ import annotations

import functools
import operator
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from replicate.core import settings
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import FedAvg
from replicate.runs import cache, executors, pool
from replicate.runs.config import RunConfig

# The test cluster and its driver without Ray's token authentication, whatever this user's ~/.ray holds: a
# token there (Ray 2.60 writes one when a ray.init() starts a local instance) turns it on for every `ray start`.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

QUAD = RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=5, batch_size=None, client_lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=30)
SWEEP = [QUAD.replace(local_steps=e, rounds=1500, seed=s) for e in (1, 5) for s in (0, 1)]  # ~0.5 s a run


def _raising_hook():
    """An extra-metrics hook that raises a TypeError wherever it is called (picklable, no test code in it)."""
    hook = functools.partial(operator.truediv, 1)
    hook.key = "raises"
    return hook


def _cached(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "runs").glob("*.csv"))}


def _sweep(cache_root: Path, monkeypatch, executor: str, jobs=None, log=None) -> dict[str, bytes]:
    monkeypatch.setenv("REPLICATE_CACHE", str(cache_root))
    monkeypatch.setenv("REPLICATE_EXECUTOR", executor)
    monkeypatch.setattr(pool, "PARALLEL_ABOVE", 0)  # a tiny sweep still goes to the worker pool
    pool.compute(jobs or [(c, None) for c in SWEEP], workers=2, progress=False, log=log)
    return _cached(cache_root)


def test_a_sweep_through_the_local_pool_stores_what_in_process_runs_store(tmp_path, monkeypatch):
    log = cache.RunLog(progress_file=None, display=False)
    pooled = _sweep(tmp_path / "pool", monkeypatch, "local", [(c, None) for c in SWEEP[:2]], log)
    assert len(pooled) == 2 and log.computed == 2 and log.to_compute == 2  # runs done / total
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "here"))
    for config in SWEEP[:2]:
        cache.run(config, progress=False)
    assert _cached(tmp_path / "here") == pooled  # byte for byte


def test_a_failing_run_is_reported_with_its_config_after_the_others_are_cached(tmp_path, monkeypatch):
    jobs = [(SWEEP[0], None), (SWEEP[1], None, _raising_hook())]
    with pytest.raises(ReplicateError, match=r"(?s)1 of 2 runs failed after 2 attempts.*seed=1.*TypeError"):
        _sweep(tmp_path, monkeypatch, "local", jobs)
    assert list(_cached(tmp_path)) == [f"{cache.key(SWEEP[0])}.csv"]


def _interrupted_then_resumed(tmp_path, monkeypatch, executor: str) -> None:
    """Ctrl-C as the first run comes back: the runs finished are kept, a rerun computes only the others."""
    store, calls = cache.store, []

    def store_then_interrupt(*args):
        store(*args)
        calls.append(args)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(cache, "store", store_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        _sweep(tmp_path, monkeypatch, executor)
    kept = _cached(tmp_path)
    # the first run, and locally those under way or already handed to a worker process (not cancellable)
    assert 1 <= len(kept) <= (len(SWEEP) if executor == "local" else len(SWEEP) - 1)
    log = cache.RunLog(progress_file=None, display=False)
    assert len(_sweep(tmp_path, monkeypatch, executor, log=log)) == len(SWEEP)
    assert log.to_compute == log.computed == len(SWEEP) - len(kept)  # resumed: only the missing runs


def test_ctrl_c_keeps_the_finished_runs_of_the_local_pool(tmp_path, monkeypatch):
    _interrupted_then_resumed(tmp_path, monkeypatch, "local")


def test_executor_settings_are_checked(monkeypatch):
    monkeypatch.setenv("REPLICATE_EXECUTOR", "spark")
    with pytest.raises(ReplicateError, match="must be one of local, ray"):
        executors.current()
    monkeypatch.delenv("REPLICATE_EXECUTOR")
    monkeypatch.setenv("REPLICATE_WORKERS", "0")
    with pytest.raises(ReplicateError, match="REPLICATE_WORKERS must be a positive whole number"):
        settings.current().workers
    monkeypatch.setenv("REPLICATE_WORKERS", "3")
    assert executors.LocalExecutor().workers == 3


# --- a real Ray cluster -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    """A head node on 127.0.0.1 with 2 CPUs, in a process group of its own that teardown ends (never
    `ray stop`, which would stop every Ray cluster of this user on the machine)."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-ray.txt)")
    ray_bin = Path(sys.executable).with_name("ray")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    port = _free_port()
    head_log = Path(temp) / "head.log"
    head = subprocess.Popen([str(ray_bin), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                             f"--port={port}", "--num-cpus=2", "--num-gpus=0", f"--temp-dir={temp}",
                             "--disable-usage-stats", "--include-dashboard=false"],
                            stdout=head_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        _ready(head, address, head_log)
        yield address, head.pid  # the process group of the cluster's processes
    finally:
        import ray

        ray.shutdown()
        left = _processes(head.pid)
        for pid in left:  # ours alone: the head's process group and the workers under its raylet
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        head.wait(10)
        shutil.rmtree(temp, ignore_errors=True)


def _ready(head: subprocess.Popen, address: str, head_log: Path, timeout: float = 120) -> None:
    """Until a driver can join: the head's port open, then its node registered (on two busy cores the raylet can
    register seconds after the port opens, and a driver joining before it fails to connect)."""
    from replicate.runs import ray_executor

    port, deadline = int(address.rsplit(":", 1)[1]), time.monotonic() + timeout
    while True:
        if head.poll() is not None or time.monotonic() > deadline:
            log = head_log.read_text(errors="replace")[-2000:] if head_log.exists() else ""
            pytest.fail(f"the Ray head node did not come up (exit status {head.poll()}):\n{log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            ray_executor._probe(address)  # a driver joins and leaves, in a process of its own
            return
        except (OSError, ReplicateError):
            time.sleep(1)


def _processes(group: int) -> dict[int, tuple[int, bytes]]:
    """The cluster's processes: those of its process group and their children (Ray puts each worker
    process in a group of its own, under the raylet), pid → (parent, command line)."""
    table = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                table[int(entry.name)] = (int(stat[1]), int(stat[2]), (entry / "cmdline").read_bytes())
        except (OSError, IndexError, ValueError):
            continue
    ours = {pid for pid, (_, pgid, _) in table.items() if pgid == group}
    return {pid: (parent, cmd) for pid, (parent, pgid, cmd) in table.items() if pid in ours or parent in ours}


def _task_workers(group: int) -> list[int]:
    """Pids of this cluster's worker processes running a task of runs (Ray titles them ray::compute_task)."""
    return [pid for pid, (_, cmd) in _processes(group).items() if cmd.startswith(b"ray::compute_task")]


def test_a_ray_sweep_survives_a_killed_worker_and_caches_the_local_pools_bytes(ray_cluster, tmp_path, monkeypatch):
    address, group = ray_cluster
    monkeypatch.setenv("RAY_ADDRESS", address)
    killed = []

    def kill_one():
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            if pids := _task_workers(group):
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    log = cache.RunLog(progress_file=None, display=False)
    on_ray = _sweep(tmp_path / "ray", monkeypatch, "ray", log=log)
    killer.join()
    assert killed, "no worker was running a task to kill"
    assert len(on_ray) == len(SWEEP) and log.computed == len(SWEEP)  # the killed worker's runs were rescheduled
    assert _sweep(tmp_path / "local", monkeypatch, "local") == on_ray  # same bytes, same names (keys)
    from replicate.runs import ray_executor

    with pytest.raises(ReplicateError, match="has 0 GPUs and the runs are computed for CUDA"):
        ray_executor._gpus("cuda", address)  # what a sweep checks before its tasks, for runs that want CUDA


def test_a_ray_task_that_raises_is_retried_once_then_reported(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster[0])
    jobs = [(SWEEP[0], None), (SWEEP[1], None, _raising_hook())]
    with pytest.raises(ReplicateError, match=r"(?s)1 of 2 runs failed after 2 attempts.*seed=1.*TypeError"):
        _sweep(tmp_path, monkeypatch, "ray", jobs)
    assert list(_cached(tmp_path)) == [f"{cache.key(SWEEP[0])}.csv"]


def test_ctrl_c_cancels_the_outstanding_ray_tasks_and_keeps_the_finished_runs(ray_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster[0])
    _interrupted_then_resumed(tmp_path, monkeypatch, "ray")


def test_bad_ray_input_is_one_line_before_any_compute(ray_cluster, tmp_path, monkeypatch):
    import ray

    from replicate.runs import ray_executor

    ray.shutdown()  # as a fresh command line: not yet connected
    address = ray_cluster[0]
    closed = _free_port()
    with pytest.raises(ReplicateError, match=f"no Ray cluster at 127.0.0.1:{closed}: .*refused"):
        ray_executor.check(f"127.0.0.1:{closed}")
    with pytest.raises(ReplicateError, match="must be host:port"):
        ray_executor.check("nowhere")
    monkeypatch.setattr(ray_executor, "local_versions", lambda: {"python": "3.0", "ray": "0.1", "torch": "1.0"})
    with pytest.raises(ReplicateError, match=r"runs other versions \(python .* there, 3.0 here"):
        ray_executor.check(address)


def test_the_command_line_refuses_an_unreachable_cluster_in_one_line_before_any_notebook(monkeypatch, capsys):
    pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-ray.txt)")
    from replicate.cli import main, runner

    for name in ("REPLICATE_EXECUTOR", "RAY_ADDRESS", "REPLICATE_WORKERS"):
        monkeypatch.setenv(name, "")  # what the command sets is undone after the test
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("a notebook ran"))
    closed = _free_port()
    assert main.main(["figures", "li2020/fig2", "--executor", "ray", "--ray-address", f"127.0.0.1:{closed}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: no Ray cluster at 127.0.0.1:{closed}") and "\n" not in err


def test_ray_is_imported_only_by_the_ray_executor():
    code = "import sys, replicate.runs.pool, replicate.runs.executors; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_worker_whose_driver_is_killed_exits(tmp_path):
    """SIGTERM or SIGKILL to a figure job's driver leaves no pool worker computing on for nothing."""
    import textwrap

    pid_file = tmp_path / "worker.pid"
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(f"""
        import concurrent.futures, multiprocessing, os, time
        from replicate.core import settings
        from replicate.runs import executors

        def task():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(120)

        if __name__ == "__main__":
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context,
                                                        initializer=executors._worker_init,
                                                        initargs=(settings.Settings(),)) as pool:
                pool.submit(task).result()
    """))
    driver = subprocess.Popen([sys.executable, str(script)])
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    worker = int(pid_file.read_text())
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 5 * executors.ORPHAN_POLL_S
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert not alive, "the orphaned worker was still running"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_an_address_that_answers_but_is_not_ray_is_one_line_within_the_probe(monkeypatch):
    """A listening web server at RAY_ADDRESS made `ray.init` retry for over 6 minutes, 26
    warnings on the terminal; the first connection is now a bounded probe in a process of its own."""
    import http.server
    import threading
    import time

    pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-ray.txt)")
    from replicate.runs import ray_executor

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(ray_executor, "PROBE_S", 10)
    start = time.monotonic()
    try:
        with pytest.raises(ReplicateError) as caught:
            ray_executor.connect(f"127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    assert time.monotonic() - start < 30 and len(str(caught.value).splitlines()) == 1
    assert f"127.0.0.1:{server.server_port}" in str(caught.value)


@pytest.mark.parametrize("kind", ["web server", "silent listener"])
def test_a_listening_port_that_is_not_ray_is_refused_within_seconds_at_the_default_probe(kind):
    """Something listening at RAY_ADDRESS that is not a Ray head node (a web server; a port that accepts and never
    answers) is refused by its protocol within seconds, before any Ray join is tried: the bounded join alone
    (``PROBE_S``, sized for a real cluster on a busy machine) took 97 s to say so."""
    import http.server
    import socketserver
    import threading
    import time

    from replicate.runs import ray_executor

    class Silent(socketserver.BaseRequestHandler):
        def handle(self):
            time.sleep(8)

    server = (http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) if kind == "web server"
              else socketserver.ThreadingTCPServer(("127.0.0.1", 0), Silent))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    start = time.monotonic()
    try:
        with pytest.raises(ReplicateError, match="not a Ray head node") as caught:
            ray_executor._reachable(f"127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    assert time.monotonic() - start < 10 and len(str(caught.value).splitlines()) == 1
