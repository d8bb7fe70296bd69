"""The committed run ledger (``runs.ledger``) and the estimate of the GPU-scale work left (``experiments.estimate``)."""
import hashlib
import json
import shutil

import pytest

from replicate.cli.main import main
from replicate.core import paths, settings
from replicate.core.errors import ReplicateError
from replicate.experiments import estimate
from replicate.fl.algorithms import FedAvg
from replicate.runs import archive, cache, ledger
from replicate.runs.config import RunConfig

QUAD = RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=5, batch_size=None, client_lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=20)
SYNTHETIC = RunConfig(dataset="synthetic(1,1)", num_clients=10, rounds=3)


def _gpu_job(tmp_path, monkeypatch, name="gpu-job"):
    """A GPU job as the ledger sees it: runs computed in a cache of its own, exported as one archive."""
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / f"{name}_cache"))
    histories = [cache.run(QUAD, progress=False), cache.run(SYNTHETIC, progress=False)]
    assert main(["cache", "export", str(tmp_path / f"{name}.tar.xz"), "--new"]) == 0
    return tmp_path / f"{name}.tar.xz", histories


def test_round_trip_through_a_clone_computes_nothing(tmp_path, monkeypatch, capsys):
    """A GPU job's runs committed to the ledger reach a clone with an empty cache: synced, read, not computed."""
    file, histories = _gpu_job(tmp_path, monkeypatch)
    assert main(["ledger", "add", str(file), "--wall-s", "12", "--note", "test job"]) == 0
    assert "ledger: 2 runs added" in capsys.readouterr().out
    piece, = ledger.index()
    assert piece["runs"] == 2 and piece["wall_s"] == 12 and piece["note"] == "test job"
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
    cache, reads the job's runs from it and computes nothing."""
    import subprocess

    def git(*args, cwd):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main", *args],
                       cwd=cwd, check=True, capture_output=True)

    repo = tmp_path / "repo"
    (repo / "figures").mkdir(parents=True)
    shutil.copy(paths.REPO / ".gitignore", repo / ".gitignore")
    monkeypatch.setenv("REPLICATE_LEDGER", str(repo / "figures" / "ledger"))
    file, histories = _gpu_job(tmp_path, monkeypatch)
    ledger.add(file, wall_s=3)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "gpu job", cwd=repo)
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
    file, _ = _gpu_job(tmp_path, monkeypatch)
    ledger.add(file)
    cache.run(QUAD.replace(rounds=7), progress=False)
    assert ledger.new_in_cache() == {cache.key(QUAD.replace(rounds=7))}


def test_a_damaged_or_edited_piece_is_never_used(tmp_path, monkeypatch):
    file, _ = _gpu_job(tmp_path, monkeypatch)
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
    """Another job's computation of a run already there (another GPU model's rounding) is not added."""
    file, _ = _gpu_job(tmp_path, monkeypatch)
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
    file, _ = _gpu_job(tmp_path, monkeypatch)
    ledger.add(file)
    entry, data = archive.verified(file)[0]
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "mine"))
    mine = data[".csv"].replace(b"0.", b"1.", 1)
    archive.put(entry, {".json": json.dumps(json.loads(data[".json"]) | cache.integrity(mine)).encode(), ".csv": mine})
    assert ledger.sync() == (2, 0, 1)
    assert entry.path(".csv").read_bytes() == data[".csv"]
    assert (settings.current().cache / "replaced" / f"{entry.name}.csv").read_bytes() == mine  # kept, not lost



def test_a_cpu_piece_of_the_ledger_counts_neither_as_gpu_runs_nor_in_the_gpu_concurrency(tmp_path, monkeypatch):
    """A cluster of CPUs may add its runs too: the estimate on cuda counts the ledger's cuda runs and measures its
    concurrency on their pieces only (a CPU piece once showed as "154 runs on cuda" where 134 were)."""
    archive_file, _ = _gpu_job(tmp_path, monkeypatch)  # computed on this CPU
    monkeypatch.setenv("REPLICATE_LEDGER", str(tmp_path / "ledger"))
    ledger.add(archive_file, "a CPU cluster", wall_s=1.0)
    (piece,) = ledger.index()
    assert piece["device"] == "cpu" and piece["runs"] == 2 and piece["wall_s"] == 1.0
    assert estimate.concurrency(device="cuda") == 1.0  # no cuda piece: nothing measured
    pieces = [{"device": "cuda", "run_s": 30.0, "wall_s": 10.0}, {"device": "cpu", "run_s": 5.0, "wall_s": 10.0}]
    assert (estimate.concurrency(pieces, "cuda"), estimate.concurrency(pieces, "cpu")) == (3.0, 0.5)
    assert sum(estimate._on(meta, "cuda") for meta in ledger.runs().values()) == 0
    assert sum(estimate._on(meta, "cpu") for meta in ledger.runs().values()) == 2

def test_the_ledger_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("REPLICATE_LEDGER", "off")
    assert ledger.root() is None and ledger.sync() == (0, 0, 0) and ledger.index() == []


def test_the_committed_ledger_verifies_and_shows_figure_5_tuned(monkeypatch, capsys):
    """The ledger in figures/ledger: every piece matches its index and every run's name its config; the
    estimate reads STEM Figure 5's tuning grid as complete, as the H200 runs left it."""
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    runs = ledger.runs()
    assert len(runs) >= 94 and all(meta["device"].startswith("cuda") for meta in runs.values())
    rows = {row.unit.label: row for row in estimate.table("cuda")}
    assert rows["khanduri2021/fig5"].tuning == (92, 92)
    assert rows["khanduri2021/fig2"].tuning[1] == 46 and rows["fedprox2020/fig3 [sent140]"].tuning[1] == 7
    assert main(["ledger", "verify"]) == 0
    assert "every checksum and name verified" in capsys.readouterr().out


def test_a_graphed_steps_op_by_op_cost_is_marked_an_estimate_not_a_bound(monkeypatch, capsys):
    """The LSTMs' step replays a CUDA graph on a GPU, which removes the host dispatch per op that the model
    counts: their modelled costs are marked ‡ (likely high), not * (a lower bound), in ``figures --estimate`` and
    the report's table; the CNNs' stay lower bounds."""
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    rows = {row.unit.label: row for row in estimate.table("cuda")}
    shakespeare, stem = rows["fedprox2020/fig3 [shakespeare]"], rows["khanduri2021/fig2"]
    assert shakespeare.graphed == frozenset(shakespeare.left) and not shakespeare.measured
    assert not stem.graphed and not stem.measured  # LeNet-5: a bench timing, no graph
    assert rows["charles2021/fig6"].left and not rows["charles2021/fig6"].graphed  # FEMNIST's CNN: a bound
    mixed = rows["charles2021/fig13"]  # FEMNIST's CNN and TFF Shakespeare's LSTM
    assert mixed.graphed and set(mixed.graphed) < set(mixed.left)
    assert not mixed.round_graphed  # its shortest round is the CNN's: a lower bound
    assert shakespeare.round_graphed and not stem.round_graphed
    assert 0 < estimate.left_s(list(rows.values()), graphed=True) < estimate.left_s(list(rows.values()))
    config = estimate._figure("fedprox2020/fig3").plan()[0][0]
    assert config.model == "char_lstm" and config.execution == "auto"
    assert estimate.graphed_estimate(config, "cuda") and not estimate.graphed_estimate(config, "cpu")
    assert not estimate.graphed_estimate(config.replace(execution="stacked"), "cuda")  # no graph: dispatch is paid
    assert main(["figures", "--estimate"]) == 0
    out = capsys.readouterr().out
    line = {row.split()[0] + (" " + row.split()[1] if row.split()[1].startswith("[") else ""): row
            for row in out.splitlines()[3:16]}
    assert line["fedprox2020/fig3 [shakespeare]"].split()[-3] == "‡" and line["khanduri2021/fig2"].split()[-3] == "*"
    assert " of it ‡)" in out and "an estimate, likely high, not a bound" in out
    assert main(["figures", "--estimate", "--device", "cpu"]) == 2  # the model prices a GPU: not a CPU's minutes
    assert "models the GPU-scale figures on a GPU" in capsys.readouterr().err
    from replicate.report import gpu_work
    recorded = json.loads((paths.figures_dir() / "gpu_work.json").read_text())["estimate"]
    table = "\n".join(gpu_work.estimate_table(recorded))
    assert "| fedprox2020/fig3 [shakespeare] | 0 / 7 | 0 / 1 | 0.0 | 908.6 ‡ |" in table and "of them ‡" in table




def test_estimate_takes_no_figures_and_device_goes_with_it(capsys):
    assert main(["figures", "--device", "cuda"]) == 2
    assert "--device goes with --estimate" in capsys.readouterr().err
    assert main(["figures", "li2020/fig2", "--estimate"]) == 2
    assert "--estimate takes no figures" in capsys.readouterr().err
