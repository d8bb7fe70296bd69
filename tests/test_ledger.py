"""The committed run ledger (``runs.ledger``) and the GPU slot planner (``experiments.plan``)."""
import hashlib
import json
import shutil

import pytest

from replicate.cli.main import main
from replicate.core import paths, settings
from replicate.core.errors import ReplicateError
from replicate.experiments import plan
from replicate.fl.algorithms import FedAvg
from replicate.runs import archive, cache, ledger
from replicate.runs.config import RunConfig

QUAD = RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=5, batch_size=None, client_lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=20)
SYNTHETIC = RunConfig(dataset="synthetic(1,1)", num_clients=10, rounds=3)


def _slot(tmp_path, monkeypatch, name="slot"):
    """A GPU slot as the ledger sees it: runs computed in a cache of its own, exported as one archive."""
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / f"{name}_cache"))
    histories = [cache.run(QUAD, progress=False), cache.run(SYNTHETIC, progress=False)]
    assert main(["cache", "export", str(tmp_path / f"{name}.tar.xz"), "--new"]) == 0
    return tmp_path / f"{name}.tar.xz", histories


def test_round_trip_through_a_clone_computes_nothing(tmp_path, monkeypatch, capsys):
    """A slot's runs committed to the ledger reach a clone with an empty cache: synced, read, not computed."""
    file, histories = _slot(tmp_path, monkeypatch)
    assert main(["ledger", "add", str(file), "--wall-s", "12", "--note", "test slot"]) == 0
    assert "ledger: 2 runs added" in capsys.readouterr().out
    piece, = ledger.index()
    assert piece["runs"] == 2 and piece["wall_s"] == 12 and piece["note"] == "test slot"
    assert piece["sha256"] == hashlib.sha256((ledger.root() / piece["file"]).read_bytes()).hexdigest()
    assert main(["ledger", "add", str(file)]) == 0  # again: nothing new, no second piece
    assert "0 runs added" in capsys.readouterr().out and len(ledger.index()) == 1

    clone = tmp_path / "clone"  # what a fresh clone holds: the ledger folder, an empty cache
    shutil.copytree(ledger.root(), clone / "ledger")
    monkeypatch.setenv("REPLICATE_LEDGER", str(clone / "ledger"))
    monkeypatch.setenv("REPLICATE_CACHE", str(clone / "cache"))
    assert ledger.sync() == (2, 0, 0) and ledger.sync() == (0, 2, 0)
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda *a, **k: pytest.fail("a run was computed"))
    assert cache.run(QUAD, progress=False).equals(histories[0])
    assert cache.run(SYNTHETIC, progress=False).equals(histories[1])
    with pytest.raises(ReplicateError, match="nothing to export"):  # every cached run is in the ledger
        archive.export(tmp_path / "none.tar.xz", ledger.new_in_cache())


def test_round_trip_through_git_computes_nothing(tmp_path, monkeypatch):
    """Issue #36 item 1, through git itself: a ledger piece added inside a repository holding this project's
    .gitignore is committed (nothing of it ignored), and a `git clone` of that repository, with an empty
    cache, reads the slot's runs from it and computes nothing."""
    import subprocess

    def git(*args, cwd):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
                       cwd=cwd, check=True, capture_output=True)

    repo = tmp_path / "repo"
    (repo / "figures").mkdir(parents=True)
    shutil.copy(paths.REPO / ".gitignore", repo / ".gitignore")
    monkeypatch.setenv("REPLICATE_LEDGER", str(repo / "figures" / "ledger"))
    file, histories = _slot(tmp_path, monkeypatch)
    ledger.add(file, wall_s=3)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "slot", cwd=repo)
    clone = tmp_path / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)
    listed = subprocess.run(["git", "ls-files", "figures/ledger"], cwd=clone, capture_output=True, text=True).stdout
    assert "figures/ledger/index.json" in listed and ".tar.xz" in listed
    monkeypatch.setenv("REPLICATE_LEDGER", str(clone / "figures" / "ledger"))
    monkeypatch.setenv("REPLICATE_CACHE", str(clone / "build" / "cache"))
    assert ledger.sync() == (2, 0, 0)  # what `figures` does before computing
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda *a, **k: pytest.fail("a run was computed"))
    assert cache.run(QUAD, progress=False).equals(histories[0])
    assert cache.run(SYNTHETIC, progress=False).equals(histories[1])


def test_only_runs_the_ledger_lacks_travel_back(tmp_path, monkeypatch):
    file, _ = _slot(tmp_path, monkeypatch)
    ledger.add(file)
    cache.run(QUAD.replace(rounds=7), progress=False)
    assert ledger.new_in_cache() == {cache.key(QUAD.replace(rounds=7))}


def test_a_damaged_or_edited_piece_is_never_used(tmp_path, monkeypatch):
    file, _ = _slot(tmp_path, monkeypatch)
    ledger.add(file)
    piece = ledger.root() / ledger.index()[0]["file"]
    original = piece.read_bytes()
    piece.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # one flipped bit
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "other"))
    with pytest.raises(ReplicateError, match="does not match its sha256 in index.json .*none of its runs is used"):
        ledger.sync()
    # an edit that rewrites the archive's own manifest to fit still differs from the committed index
    entries = archive.verified(file)
    entry, data = entries[0]
    edited = data[".csv"].replace(b"0.", b"1.", 1)
    meta = cache.sealed(json.loads(data[".json"]) | cache.integrity(edited))  # sealed to fit
    archive.write(piece, [(entry, {".json": json.dumps(meta).encode(), ".csv": edited}), *entries[1:]])
    assert archive.verified(piece)  # consistent in itself
    with pytest.raises(ReplicateError, match="does not match its sha256"):
        ledger.sync()
    assert not any((tmp_path / "other").rglob("*.csv"))
    piece.unlink()
    with pytest.raises(ReplicateError, match="listed in index.json but missing"):
        ledger.sync()


def test_a_run_computed_again_keeps_the_first(tmp_path, monkeypatch):
    """Another slot's computation of a run already there (another GPU model's rounding) is not added."""
    file, _ = _slot(tmp_path, monkeypatch)
    ledger.add(file)
    entries = archive.verified(file)
    entry, data = entries[0]
    other = data[".csv"].replace(b"0.", b"1.", 1)
    meta = cache.sealed(json.loads(data[".json"]) | cache.integrity(other))  # sealed to fit
    archive.write(tmp_path / "again.tar.xz", [(entry, {".json": json.dumps(meta).encode(), ".csv": other})])
    written, added, same, conflicts = ledger.add(tmp_path / "again.tar.xz")
    assert (written, added, same, conflicts) == ([], 0, 0, [entry.name])
    assert ledger.entries()[entry.name][1][".csv"] == data[".csv"]


def test_sync_takes_the_ledger_over_a_differing_cached_run(tmp_path, monkeypatch):
    file, _ = _slot(tmp_path, monkeypatch)
    ledger.add(file)
    entry, data = archive.verified(file)[0]
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "mine"))
    mine = data[".csv"].replace(b"0.", b"1.", 1)
    archive.put(entry, {".json": json.dumps(json.loads(data[".json"]) | cache.integrity(mine)).encode(), ".csv": mine})
    assert ledger.sync() == (2, 0, 1)
    assert entry.path(".csv").read_bytes() == data[".csv"]
    assert (settings.current().cache / "replaced" / f"{entry.name}.csv").read_bytes() == mine  # kept, not lost


def test_the_ledger_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("REPLICATE_LEDGER", "off")
    assert ledger.root() is None and ledger.sync() == (0, 0, 0) and ledger.index() == []


def test_the_committed_ledger_verifies_and_shows_figure_5_tuned(monkeypatch, capsys):
    """The ledger in figures/ledger: every piece matches its index and every run's name its config; the
    status reads STEM Figure 5's tuning grid as complete, as the 2026-11-27 slot left it."""
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    runs = ledger.runs()
    assert len(runs) >= 94 and all(meta["device"].startswith("cuda") for meta in runs.values())
    rows = {row.unit.label: row for row in plan.table("cuda")}
    assert rows["khanduri2021/fig5"].tuning == (92, 92)
    assert rows["khanduri2021/fig2"].tuning[1] == 46 and rows["fedprox2020/fig3 [sent140]"].tuning[1] == 7
    assert main(["ledger", "verify"]) == 0
    assert "every checksum and name verified" in capsys.readouterr().out


def test_the_slot_plan_follows_the_priority_and_counts_shared_runs_once():
    unit = plan.PRIORITY
    rows = [plan.Progress(unit[0], (4, 4), (2, 2), 10.0, {}, True),  # done
            plan.Progress(unit[1], (0, 2), (0, 1), 0.0, {"a": 60.0, "b": 60.0, "c": 60.0}, True),
            plan.Progress(unit[2], (0, 3), (0, 0), 0.0, {"a": 60.0, "b": 60.0, "d": 120.0}, False),
            plan.Progress(unit[3], (0, 1), (0, 0), 0.0, {"e": 600.0}, False)]
    chosen = plan.slot(rows, budget_s=200.0, rate=2.0)
    assert [(row.unit, share) for row, share in chosen] == [(unit[1], 90.0), (unit[2], 60.0), (unit[3], 50.0)]
    assert plan.left_s(rows) == 900.0


def test_a_slots_queue_goes_on_past_its_projection_in_priority_order():
    """A slot gives each unit the time it has left, so its queue holds every unit not done whose round fits,
    in priority order, past the projected budget: one done sooner than projected leaves its minutes to the
    next (the slot's units keep their shares; the others 0)."""
    unit = plan.PRIORITY
    rows = [plan.Progress(unit[0], (4, 4), (2, 2), 10.0, {}, True),  # done
            plan.Progress(unit[1], (0, 2), (0, 0), 0.0, {"a": 300.0}, False, round_s=20.0),
            plan.Progress(unit[2], (0, 1), (0, 0), 0.0, {"b": 60.0}, False, round_s=500.0),  # no round fits
            plan.Progress(unit[3], (0, 1), (0, 0), 0.0, {"c": 60.0}, False, round_s=150.0),  # not in the budget left
            plan.Progress(unit[4], (0, 1), (0, 0), 0.0, {"d": 60.0}, False, round_s=5.0)]
    assert [(row.unit, share) for row, share in plan.slot(rows, budget_s=400.0, rate=1.0)] == [
        (unit[1], 300.0), (unit[4], 60.0)]
    assert [(row.unit, share) for row, share in plan.queue(rows, budget_s=400.0, rate=1.0)] == [
        (unit[1], 300.0), (unit[3], 0.0), (unit[4], 60.0)]


def test_the_slot_plan_passes_over_a_figure_whose_rounds_outlast_the_slot(monkeypatch, capsys):
    """A run saves its progress at round boundaries only: a unit whose every run left needs longer than the slot
    for one round would keep nothing of it, so the plan passes it over and says why; the next unit goes in."""
    unit = plan.PRIORITY
    rows = [plan.Progress(unit[1], (0, 2), (0, 0), 0.0, {"a": 60.0}, False, round_s=300.0),
            plan.Progress(unit[2], (0, 1), (0, 0), 0.0, {"b": 60.0}, False, round_s=30.0)]
    assert plan.beyond(rows, 200.0) == [rows[0]]
    assert [row.unit for row, _ in plan.slot(rows, budget_s=200.0, rate=1.0)] == [unit[2]]
    assert [row.unit for row, _ in plan.slot(rows, budget_s=400.0, rate=1.0)] == [unit[1], unit[2]]
    ahead = plan.Progress(unit[0], (0, 3), (0, 0), 0.0, {"c": 180.0}, False, round_s=10.0)
    later = plan.Progress(unit[3], (0, 1), (0, 0), 0.0, {"d": 300.0}, False, round_s=100.0)
    assert [row.unit for row, _ in plan.slot([ahead, later], budget_s=200.0, rate=1.0)] == [unit[0]]  # 20 s left
    # the committed ledger's plan: FedProx Figure 3's Shakespeare rounds, modelled, outlast a 10-minute slot
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    shakespeare = next(row for row in plan.table("cuda") if row.unit.label == "fedprox2020/fig3 [shakespeare]")
    epochs = {**plan._epoch_steps(), **plan._row("fedprox2020/fig3")["round_epoch_steps"]}  # as ``progress`` prices
    rounds = [plan.round_seconds(c, epochs) for c in plan._figure("fedprox2020/fig3").plan()[0] if c.dataset == "shakespeare"]
    assert shakespeare.round_s == pytest.approx(min(rounds)) and shakespeare.round_s > 600
    assert main(["figures", "--plan", "--device", "cuda", "--time-budget", "10m"]) == 0
    out = capsys.readouterr().out
    assert "passed over: fedprox2020/fig3 [shakespeare]" in out
    queued = next(line for line in out.splitlines() if "then, with the minutes of a unit done sooner" in line)
    assert "fedprox2020/fig3 [shakespeare]" not in queued  # a unit passed over is not queued either


def test_a_graphed_steps_op_by_op_cost_is_marked_an_estimate_not_a_bound(monkeypatch, capsys):
    """The LSTMs' step replays a CUDA graph on a GPU, which removes the host dispatch per op that the model
    counts: their modelled costs are marked ‡ (likely high), not * (a lower bound), in the status, the plan and
    the report's table; the CNNs' stay lower bounds."""
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    rows = {row.unit.label: row for row in plan.table("cuda")}
    shakespeare, stem = rows["fedprox2020/fig3 [shakespeare]"], rows["khanduri2021/fig2"]
    assert shakespeare.graphed == frozenset(shakespeare.left) and not shakespeare.measured
    assert not stem.graphed and not stem.measured  # LeNet-5: a bench timing, no graph
    assert rows["charles2021/fig6"].left and not rows["charles2021/fig6"].graphed  # FEMNIST's CNN: a bound
    mixed = rows["charles2021/fig13"]  # FEMNIST's CNN and TFF Shakespeare's LSTM
    assert mixed.graphed and set(mixed.graphed) < set(mixed.left)
    assert not mixed.round_graphed  # its shortest round is the CNN's: a lower bound
    assert shakespeare.round_graphed and not stem.round_graphed
    assert 0 < plan.left_s(list(rows.values()), graphed=True) < plan.left_s(list(rows.values()))
    config = plan._figure("fedprox2020/fig3").plan()[0][0]
    assert config.model == "char_lstm" and config.execution == "auto"
    assert plan.graphed_estimate(config, "cuda") and not plan.graphed_estimate(config, "cpu")
    assert not plan.graphed_estimate(config.replace(execution="stacked"), "cuda")  # no graph: dispatch is paid
    assert main(["ledger", "status"]) == 0
    out = capsys.readouterr().out
    line = {row.split()[0] + (" " + row.split()[1] if row.split()[1].startswith("[") else ""): row
            for row in out.splitlines()[3:16]}
    assert line["fedprox2020/fig3 [shakespeare]"].split()[-3] == "‡" and line["khanduri2021/fig2"].split()[-3] == "*"
    assert " of it ‡)" in out and "an estimate, likely high, not a bound" in out
    assert main(["figures", "--plan", "--device", "cuda", "--time-budget", "10m"]) == 0
    passed = next(l for l in capsys.readouterr().out.splitlines() if "passed over: fedprox2020/fig3 [shakespeare]" in l)
    assert "its shortest round left takes ≈ " in passed and "CUDA graph" in passed and "≥" not in passed
    assert main(["ledger", "status", "--device", "cpu"]) == 0  # no graph on a CPU: no ‡, and no word of it
    assert "‡" not in capsys.readouterr().out
    from replicate.report import replication
    slots = json.loads((paths.figures_dir() / "gpu_work.json").read_text())["slots"]
    table = "\n".join(replication._slots_table(slots))
    assert "| fedprox2020/fig3 [shakespeare] | 0 / 7 | 0 / 1 | 0.0 | 908.6 ‡ |" in table and "of them ‡" in table


def test_plan_commands_are_figure_commands(monkeypatch, capsys):
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    assert main(["figures", "--plan", "--device", "cuda", "--time-budget", "10m", "--commands"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines and all(line.startswith("python -m replicate figures ") and " --profile paper" in line
                         and " --time-budget " in line for line in lines)
    order = [next(i for i, unit in enumerate(plan.PRIORITY) if line.startswith(unit.command() + " --time-budget"))
             for line in lines]
    assert order == sorted(order)  # in the project's priority order
    budgets = [int(line.rsplit(" ", 1)[1].rstrip("s")) for line in lines]  # the slot's time from each one's start
    assert budgets[0] == 600 and budgets == sorted(budgets, reverse=True) and min(budgets) >= 30
    rows = plan.table("cuda", plan.head_starts())  # the queue: every unit not done whose round fits the slot
    assert len(lines) == sum(not row.done and row.round_s <= 600 for row in rows) >= len(plan.slot(rows, 600.0, 1.0))
    assert main(["figures", "--commands"]) == 2
    assert "--commands goes with --plan" in capsys.readouterr().err
