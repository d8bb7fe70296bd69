"""SIGINT (Ctrl-C) and SIGTERM (a job at its time limit, a preempted machine) during `python -m replicate figures`:
the runs in flight save at their next round boundary, the command exits within seconds with 130 or 75 in one
line, and rerunning it finishes the figure byte-identically to a run never stopped.

Each end-to-end test runs a real command twice (stopped, then resumed) on Li et al. Figure 4 at the smoke scale
with 40 rounds, beside one uninterrupted reference run shared by both: about 20 s each on two busy cores,
the whole file about 55 s."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicate.runs import checkpoints

FIGURE, ROUNDS = "li2020/fig4", 40
COMMAND = [sys.executable, "-m", "replicate", "figures", FIGURE, "--set", f"rounds={ROUNDS}"]
CSV = Path("figures") / "li2020" / "fig4.csv"  # in the build folder: the smoke profile publishes there


def _env(root: Path, checkpoint_s: float = 0) -> dict:
    """The command's environment: its own build folder (cache, checkpoints, outputs) and ledger, CPU runs, and
    a checkpoint every ``checkpoint_s`` seconds of training (0: none)."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("REPLICATE_STOP_FILE", "REPLICATE_PROGRESS", "REPLICATE_CACHE")}
    return {**env, "REPLICATE_BUILD": str(root / "build"), "REPLICATE_LEDGER": str(root / "ledger"),
            "REPLICATE_DEVICE": "cpu", "REPLICATE_CHECKPOINT_S": str(checkpoint_s)}


def _start(root: Path, checkpoint_s: float = 0) -> subprocess.Popen:
    return subprocess.Popen(COMMAND, env=_env(root, checkpoint_s), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # a process group of its own, as a terminal's job


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The figure's CSV from the same command never interrupted (started at once; read when first needed)."""
    root = tmp_path_factory.mktemp("uninterrupted")
    proc = _start(root)
    csv = {}

    def read() -> bytes:
        if not csv:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err
            csv["bytes"] = (root / "build" / CSV).read_bytes()
        return csv["bytes"]

    yield read
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _training(build: Path, timeout: float = 120) -> None:
    """Once a run is into its rounds: its first periodic checkpoint is on disk. Sent sooner (its data still being
    built, as a slow machine takes seconds to), a stop has no round boundary within ``signals.GRACE_S`` and
    rightly saves nothing, which is not what these tests look at."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list((build / "cache" / "checkpoints").glob("*.pt")):
            return
        time.sleep(0.1)
    pytest.fail(f"no run reached its second round within {timeout:.0f} s")


def _lines(err: str) -> list[str]:
    """What the command wrote on stderr, its progress bar's redraws aside."""
    return [line for line in err.replace("\r", "\n").splitlines() if line.strip() and "figures (smoke)" not in line]


@pytest.mark.smoke
@pytest.mark.parametrize("signum, status, said", [(signal.SIGINT, 130, "interrupted during li2020/fig4"),
                                                  (signal.SIGTERM, 75, "terminated (SIGTERM) during li2020/fig4")],
                         ids=["sigint-to-the-process-group", "sigterm-to-the-command"])
def test_a_signal_saves_the_runs_in_flight_and_the_rerun_finishes_them_identically(tmp_path, reference, signum,
                                                                                   status, said):
    build = tmp_path / "build"
    proc = _start(tmp_path, checkpoint_s=0.2)
    _training(build)
    sent = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
    else:
        proc.send_signal(signal.SIGTERM)  # `kill PID`, a job's time limit: the command alone
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == status, err
    assert took < 20, f"exited {took:.0f} s after the signal"
    assert "Traceback" not in err
    lines = _lines(err)
    assert len(lines) == 1, lines
    assert lines[0].startswith(said) and "its runs in flight saved at their round boundary" in lines[0], lines[0]
    assert "rerun the same command to resume" in lines[0]
    folder = build / "cache" / "checkpoints"
    saved = {path.name: checkpoints.round_of(path.read_bytes()) for path in folder.glob("*.pt")}
    assert saved and all(r is not None and 0 < r < ROUNDS for r in saved.values()), saved  # cut mid-run, each readable
    assert not list((build / "cache" / "checkpoints").glob("stop.*"))  # the stop request is gone with the command
    assert not (build / CSV).exists() and not (build / "staging").exists()

    resumed = _start(tmp_path)  # the same command again, to the end
    _, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err
    assert f"; {len(saved)} runs went on from their checkpoints" in err  # the done line says it resumed
    assert not list((build / "cache" / "checkpoints").glob("*.pt"))  # every cut-off run resumed and was stored
    assert (build / CSV).read_bytes() == reference()


def _sleeping_batch(tmp_path: Path, grace: float) -> subprocess.Popen:
    """``figures notes/figA`` in a process of its own on a notebook whose one cell sleeps a minute (no round
    boundary comes), with ``signals.GRACE_S = grace``; returned once its kernel runs the cell."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    (tmp_path / "notebooks").mkdir()
    params = new_code_cell('profile = "smoke"\nout_dir = None')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell("import time\ntime.sleep(60)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "notebooks" / "notes_figA.ipynb")
    script = ("import sys\nfrom pathlib import Path\nfrom replicate.core import paths\n"
              "from replicate.cli import signals\n"
              f"paths.notebooks_dir = lambda: Path({str(tmp_path / 'notebooks')!r})\n"
              f"paths.figures_dir = lambda: Path({str(tmp_path / 'figures')!r})\n"
              f"signals.GRACE_S = {grace}\n"
              "from replicate.cli.main import main\nsys.exit(main(['figures', 'notes/figA']))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env=_env(tmp_path), stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((tmp_path / "build").glob("executed/smoke/*.ipynb")):
        time.sleep(0.2)  # papermill writes the executed notebook once the kernel runs
    time.sleep(2)
    return proc


@pytest.mark.smoke
@pytest.mark.parametrize("signals, status, said", [((signal.SIGTERM,), 75, "terminated (SIGTERM)"),
                                                   ((signal.SIGINT, signal.SIGINT), 130, "interrupted")],
                         ids=["sigterm-waits-the-grace", "a-second-ctrl-c-does-not"])
def test_a_notebook_that_trains_no_run_is_interrupted_after_the_grace_or_a_second_signal(tmp_path, signals, status,
                                                                                         said):
    """No round boundary comes (the cell sleeps): the notebook is interrupted ``signals.GRACE_S`` (here 1.5 s)
    after SIGTERM, or at a second Ctrl-C (the grace here a minute); still one line, exit status 75 or 130."""
    proc = _sleeping_batch(tmp_path, grace=1.5 if len(signals) == 1 else 60)
    sent = time.monotonic()
    for signum in signals:
        os.killpg(proc.pid, signum)
        time.sleep(0.5)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == status, err
    assert "Traceback" not in err
    lines = _lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"{said} during notes/figA"), lines
    assert "runs in flight saved" not in lines[0]  # it had none: nothing claims they were
    assert (1.4 if len(signals) == 1 else 0) < took < 15, took
    assert not (tmp_path / "figures").exists() and not (tmp_path / "build" / "staging").exists()


def test_sigterm_before_a_batch_starts_is_one_line_and_status_75(monkeypatch, capsys):
    """Outside a notebook (the parameter checks, the ledger's sync, --check's comparison) SIGTERM ends the
    command at once, in one line, with the status a requeueing job script tests."""
    from replicate.cli import runner
    from replicate.cli.main import main

    def terminated_while_preparing(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # the handler raises in this thread before the sleep ends
        raise AssertionError("SIGTERM was not taken")

    monkeypatch.setattr(runner, "run", terminated_while_preparing)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["figures", FIGURE]) == 75
    assert signal.getsignal(signal.SIGTERM) is before  # the command's handler is gone with it
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("terminated (SIGTERM)") and "rerun the same command" in err[0]


def test_help_lists_every_command_and_the_exit_statuses(capsys):
    from replicate.cli.main import main

    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    for command in ("arena", "figures", "bench", "data", "cache", "ledger", "report"):
        assert command in top.split("positional arguments")[0]
    with pytest.raises(SystemExit):
        main(["figures", "--help"])
    text = capsys.readouterr().out
    assert "issue #" not in top + text
    statuses = text.split("exit status:")[1]
    for status in ("0", "1", "2", "75", "130"):
        assert f"\n  {status} " in statuses
    assert "SIGTERM" in statuses and "Ctrl-C" in statuses and "--time-budget" in statuses


def test_papermills_log_is_quiet_once_a_stop_is_asked(caplog):
    """nbclient logs "Kernel died while waiting for execute reply." through papermill's logger when the kernel
    interrupted at a second Ctrl-C exits before replying (seen once in CI as a second line): dropped once a
    stop is asked, passed on before."""
    import logging

    from replicate.cli import runner

    class Asked:
        signum = None

    signals, logger = Asked(), logging.getLogger("papermill")
    with runner._papermill_log(signals):
        logger.error("a cell's kernel died")
        signals.signum = signal.SIGINT
        logger.error("Kernel died while waiting for execute reply.")
    assert [r.getMessage() for r in caplog.records if r.name == "papermill"] == ["a cell's kernel died"]
    assert not logger.filters
