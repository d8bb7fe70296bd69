"""This project's own GPU queue (``.ci/gpu/gpu_queue.py``): the order, a session's cut of it, its commands.

Not part of the package (a user runs ``figures --estimate``); tested here because ``.ci/device-check`` runs it
on every lent GPU, where a broken queue would waste the session.
"""
import importlib.util
import sys
from pathlib import Path

import pytest

from replicate.core import paths
from replicate.experiments import estimate

GPU = Path(__file__).resolve().parents[1] / ".ci" / "gpu"
sys.path.insert(0, str(GPU))
_spec = importlib.util.spec_from_file_location("gpu_queue", GPU / "gpu_queue.py")
gpu_queue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_queue)


def _units():
    by_label = {unit.label: unit for unit in estimate.UNITS}
    return [by_label[label] for label in gpu_queue.PRIORITY]


def test_the_queue_orders_every_gpu_scale_unit_once():
    assert sorted(gpu_queue.PRIORITY) == sorted(unit.label for unit in estimate.UNITS)


def test_a_session_follows_the_priority_and_counts_shared_runs_once():
    unit = _units()
    rows = [estimate.Progress(unit[0], (4, 4), (2, 2), 10.0, {}, True),  # done
            estimate.Progress(unit[1], (0, 2), (0, 1), 0.0, {"a": 60.0, "b": 60.0, "c": 60.0}, True),
            estimate.Progress(unit[2], (0, 3), (0, 0), 0.0, {"a": 60.0, "b": 60.0, "d": 120.0}, False),
            estimate.Progress(unit[3], (0, 1), (0, 0), 0.0, {"e": 600.0}, False)]
    chosen = gpu_queue.session(rows, budget_s=200.0, rate=2.0)
    assert [(row.unit, share) for row, share in chosen] == [(unit[1], 90.0), (unit[2], 60.0), (unit[3], 50.0)]
    assert estimate.left_s(rows) == 900.0


def test_a_sessions_queue_goes_on_past_its_projection_in_priority_order():
    """A session gives each unit the time it has left, so its queue holds every unit not done whose round fits,
    in priority order, past the projected budget: one done sooner than projected leaves its minutes to the
    next (the session's units keep their shares; the others 0)."""
    unit = _units()
    rows = [estimate.Progress(unit[0], (4, 4), (2, 2), 10.0, {}, True),  # done
            estimate.Progress(unit[1], (0, 2), (0, 0), 0.0, {"a": 300.0}, False, round_s=20.0),
            estimate.Progress(unit[2], (0, 1), (0, 0), 0.0, {"b": 60.0}, False, round_s=500.0),  # no round fits
            estimate.Progress(unit[3], (0, 1), (0, 0), 0.0, {"c": 60.0}, False, round_s=150.0),  # not in the budget left
            estimate.Progress(unit[4], (0, 1), (0, 0), 0.0, {"d": 60.0}, False, round_s=5.0)]
    assert [(row.unit, share) for row, share in gpu_queue.session(rows, budget_s=400.0, rate=1.0)] == [
        (unit[1], 300.0), (unit[4], 60.0)]
    assert [(row.unit, share) for row, share in gpu_queue.queue(rows, budget_s=400.0, rate=1.0)] == [
        (unit[1], 300.0), (unit[3], 0.0), (unit[4], 60.0)]


def test_a_session_passes_over_a_figure_whose_rounds_outlast_it(monkeypatch, capsys):
    """A run saves its progress at round boundaries only: a unit whose every run left needs longer than the session
    for one round would keep nothing of it, so the plan passes it over and says why; the next unit goes in."""
    unit = _units()
    rows = [estimate.Progress(unit[1], (0, 2), (0, 0), 0.0, {"a": 60.0}, False, round_s=300.0),
            estimate.Progress(unit[2], (0, 1), (0, 0), 0.0, {"b": 60.0}, False, round_s=30.0)]
    assert gpu_queue.beyond(rows, 200.0) == [rows[0]]
    assert [row.unit for row, _ in gpu_queue.session(rows, budget_s=200.0, rate=1.0)] == [unit[2]]
    assert [row.unit for row, _ in gpu_queue.session(rows, budget_s=400.0, rate=1.0)] == [unit[1], unit[2]]
    ahead = estimate.Progress(unit[0], (0, 3), (0, 0), 0.0, {"c": 180.0}, False, round_s=10.0)
    later = estimate.Progress(unit[3], (0, 1), (0, 0), 0.0, {"d": 300.0}, False, round_s=100.0)
    assert [row.unit for row, _ in gpu_queue.session([ahead, later], budget_s=200.0, rate=1.0)] == [unit[0]]  # 20 s left
    # the committed ledger's plan: FedProx Figure 3's Shakespeare rounds, modelled, outlast a 10-minute session
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    shakespeare = next(row for row in estimate.table("cuda") if row.unit.label == "fedprox2020/fig3 [shakespeare]")
    epochs = {**estimate._epoch_steps(), **estimate._row("fedprox2020/fig3")["round_epoch_steps"]}  # as ``progress`` prices
    rounds = [estimate.round_seconds(c, epochs) for c in estimate._figure("fedprox2020/fig3").plan()[0]
              if c.dataset == "shakespeare"]
    assert shakespeare.round_s == pytest.approx(min(rounds)) and shakespeare.round_s > 600
    out = gpu_queue.plan(600.0, "cuda")
    assert "passed over: fedprox2020/fig3 [shakespeare]" in out
    queued = next(line for line in out.splitlines() if "then, with the minutes of a unit done sooner" in line)
    assert "fedprox2020/fig3 [shakespeare]" not in queued  # a unit passed over is not queued either


def test_the_queues_commands_are_figure_commands(monkeypatch):
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    every = gpu_queue.plan(600.0, "cuda", commands=True).strip().splitlines()
    assert every and all(line.startswith("python -m replicate figures ") and " --profile paper" in line
                         and " --time-budget " in line for line in every)
    # STEM Figure 5 under the second grid follows STEM's units, before any other
    extra = [i for i, line in enumerate(every) if line.startswith(gpu_queue.AFTER_STEM[0] + " --time-budget")]
    assert len(extra) == 1 and all(line.split()[4].startswith("khanduri2021/") for line in every[:extra[0]])
    lines = every[:extra[0]] + every[extra[0] + 1:]
    order = [next(i for i, unit in enumerate(_units()) if line.startswith(gpu_queue.command(unit) + " --time-budget"))
             for line in lines]
    assert order == sorted(order)  # in the project's priority order
    budgets = [int(line.rsplit(" ", 1)[1].rstrip("s")) for line in lines]  # the session's time from each one's start
    assert budgets[0] == 600 and budgets == sorted(budgets, reverse=True) and min(budgets) >= 30
    rows = gpu_queue.rows("cuda")  # the queue: every unit not done whose round fits the session
    assert len(lines) == sum(not row.done and row.round_s <= 600 for row in rows) >= len(gpu_queue.session(rows, 600.0, 1.0))
    assert all("--set 'data_source=\"stand-in\"'" in line for line in lines if "khanduri2021/fig2" in line)


def test_no_module_of_the_gpu_scripts_shadows_the_standard_library():
    """The scripts put their folder on ``sys.path`` (and the tests load them in the suite's process, whose worker
    processes inherit that path): a ``queue.py`` there once hid the standard ``queue`` that torch imports."""
    names = {path.stem for path in GPU.glob("*.py")}
    assert not names & set(sys.stdlib_module_names)
