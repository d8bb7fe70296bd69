"""``cache export`` / ``cache import``: one archive of cached runs, verified before anything is written."""
import io
import json
import tarfile

import pytest
import torch

from replicate.cli.main import main
from replicate.core import paths, settings
from replicate.core.errors import ReplicateError
from replicate.experiments.li2020 import fig2
from replicate.report.claims import publish
from replicate.runs import archive, cache, keys
from replicate.fl.algorithms import FedAvg
from replicate.runs.config import RunConfig, run_device

QUAD = RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=5, batch_size=None, client_lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=20)
SYNTHETIC = RunConfig(dataset="synthetic(1,1)", num_clients=10, rounds=3)
TINY = fig2.Fig2Config(local_steps=(1, 5), decay=(1e-6, 1e-2), rounds=30, theorem5_lrs=(0.02,), theorem5_steps=(2,))


def _members(file) -> dict:
    with tarfile.open(file) as tar:
        return {info.name: tar.extractfile(info).read() for info in tar}


def _write(file, members: dict) -> None:
    with tarfile.open(file, "w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _one_run_archive(tmp_path, monkeypatch):
    """Two runs exported from this machine's cache; then the cache is another machine's, empty."""
    cache.run(QUAD, progress=False)
    cache.run(SYNTHETIC, progress=False, stop_loss=1e9)  # a stopped run: to_target/<key>_to_1e+09
    file = tmp_path / "runs.tar.xz"
    written, stale = archive.export(file)
    assert sorted(written) == sorted([cache.key(QUAD), f"{cache.key(SYNTHETIC)}_to_1e+09"]) and stale == []
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "other_machine_cache"))
    return file, tmp_path / "other_machine_cache"


def test_export_import_and_replot_without_computing(tmp_path, monkeypatch, capsys):
    """A figure's runs, named by its claims record, go into one file; imported into an empty cache,
    the figure re-plots from it with nothing computed."""
    log = cache.RunLog(display=False)
    first = fig2.fig2(TINY, progress=False, log=log)
    publish(None, first, [], paper="li2020", figure="fig2", profile="smoke", provenance=log.provenance())
    cache.run(QUAD.replace(rounds=7), progress=False)  # in the cache, not behind the figure
    file = tmp_path / "fig2.tar.xz"
    monkeypatch.setattr(paths, "figures_dir", lambda: tmp_path / "no_committed_figures")  # whatever is committed
    publish(None, first.head(1), [], paper="li2020", figure="table2", profile="smoke")  # a table: no run provenance
    assert main(["cache", "export", str(file), "li2020/fig2", "li2020/fig1a", "li2020/table2"]) == 0
    out, err = capsys.readouterr()
    assert f"wrote {file}" in out and ": 4 runs" in out
    assert "not exported: li2020/fig1a (" in err  # no record of it names its runs (never published here)
    assert "nothing to export for li2020/table2: they train no runs" in err  # rerunning it would not help
    manifest = json.loads(_members(file)["manifest.json"])
    assert manifest["cache_version"] == keys.VERSION and len(manifest["entries"]) == 4
    assert all(e["device"].split(":")[0] == run_device().type and len(e["csv_sha256"]) == 64
               for e in manifest["entries"])

    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "empty"))
    assert main(["cache", "import", str(file)]) == 0
    assert "imported 4 runs" in capsys.readouterr().out
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda *a, **k: pytest.fail("a run was computed"))
    again = cache.RunLog(display=False)
    replot = fig2.fig2(TINY, progress=False, log=again)
    assert again.runs == again.from_cache == 4
    assert replot.equals(first)
    assert main(["cache", "import", str(file)]) == 0  # again: identical entries are skipped
    out = capsys.readouterr().out
    assert "imported 0 runs" in out and "4 already there, identical" in out


def test_export_says_which_record_names_the_runs_it_lacks(tmp_path, monkeypatch, capsys):
    """A figure's runs that are not in this cache are counted against the record that names them, by its path,
    so that a committed paper-profile record is not mistaken for this machine's smoke run."""
    log = cache.RunLog(display=False)
    publish(None, fig2.fig2(TINY, progress=False, log=log), [], paper="li2020", figure="fig2", profile="smoke",
            provenance=log.provenance())
    monkeypatch.setattr(paths, "figures_dir", lambda: tmp_path / "no_committed_figures")
    record = settings.current().build / "figures" / "li2020" / "fig2.claims.json"
    named = sorted(cache.recorded_runs(json.loads(record.read_text())))
    (settings.current().cache / "runs" / f"{named[0]}.csv").unlink()
    assert main(["cache", "export", str(tmp_path / "fig2.tar.xz"), "li2020/fig2"]) == 0
    out = capsys.readouterr().out
    assert f": {len(named) - 1} runs; 1 runs named by {record} are not in this cache" in out


def test_reimport_skips_identical_and_refuses_a_different_entry(tmp_path, monkeypatch):
    file, empty_cache = _one_run_archive(tmp_path, monkeypatch)
    assert archive.load(file) == (2, 0, {})
    assert archive.load(file) == (0, 2, {})
    stored = empty_cache / "runs" / f"{cache.key(QUAD)}.csv"
    whole = stored.read_bytes()
    stored.write_bytes(whole[:-9])  # damaged: moved aside, the archive's taken
    assert archive.load(file) == (1, 1, {}) and stored.read_bytes() == whole
    assert (empty_cache / "damaged" / stored.name).exists()
    other = whole + b"\n"  # a whole entry with other numbers (its sidecar fits it): never replaced
    sidecar = stored.with_suffix(".json")
    sidecar.write_text(json.dumps(cache.sealed(json.loads(sidecar.read_text()) | cache.integrity(other))))
    stored.write_bytes(other)
    with pytest.raises(ReplicateError, match=f"entry runs/{cache.key(QUAD)} differs from the one in"):
        archive.load(file)


def test_a_tampered_entry_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    file, empty_cache = _one_run_archive(tmp_path, monkeypatch)
    members = _members(file)
    name = f"runs/{cache.key(QUAD)}.csv"
    members[name] = members[name].replace(b"0.", b"1.", 1)
    _write(tmp_path / "bad.tar.xz", members)
    with pytest.raises(ReplicateError, match=f"entry runs/{cache.key(QUAD)} refused: the CSV does not match"):
        archive.load(tmp_path / "bad.tar.xz")
    assert not empty_cache.exists() or not any(empty_cache.rglob("*.csv"))


def test_another_version_or_numerics_is_refused(tmp_path, monkeypatch):
    file, empty_cache = _one_run_archive(tmp_path, monkeypatch)
    version = keys.VERSION
    with monkeypatch.context() as patch:
        patch.setattr(keys, "VERSION", version + 1)
        with pytest.raises(ReplicateError, match=f"cache VERSION {version}, this code's is {version + 1}"):
            archive.load(file)
    with monkeypatch.context() as patch:
        patch.setitem(keys.NUMERICS, "fedavg", 7)
        with pytest.raises(ReplicateError, match=r"refused: computed under NUMERICS \{\}, this code's are \{'fedavg': 7\}"):
            archive.load(file)
    members = _members(file)  # a sidecar whose config does not hash to its name, checksums made to fit
    manifest = json.loads(members["manifest.json"])
    name = f"runs/{cache.key(QUAD)}.json"
    members[name] = json.dumps(cache.sealed(json.loads(members[name]) | {"rounds": 21})).encode()  # sealed to fit
    entry = next(e for e in manifest["entries"] if e["folder"] == "runs")
    entry["json_sha256"] = archive._sha256(members[name])
    members["manifest.json"] = json.dumps(manifest).encode()
    _write(tmp_path / "forged.tar.xz", members)
    with pytest.raises(ReplicateError, match="its recorded config hashes to .* under this code"):
        archive.load(tmp_path / "forged.tar.xz")
    assert not empty_cache.exists() or not any(empty_cache.rglob("*.csv"))


def test_a_device_draws_version_renames_that_device_runs_alone(monkeypatch):
    """CUDA's runs drew their mini-batches with CUDA's generator before DRAWS["cuda"] = 1: such entries must
    not be read as today's; the CPU's keys (and so every committed figure's runs) stay as they were."""
    before = {device: cache.key(QUAD, device=device) for device in ("cpu", "cuda")}
    with monkeypatch.context() as patch:
        patch.setattr(keys, "DRAWS", {})
        assert cache.key(QUAD, device="cpu") == before["cpu"]
        assert cache.key(QUAD, device="cuda") != before["cuda"]
        patch.setattr(keys, "DRAWS", {"cuda": 2})
        assert cache.key(QUAD, device="cuda") not in (before["cuda"], before["cpu"])


def test_paths_outside_the_cache_are_refused(tmp_path, monkeypatch):
    file, empty_cache = _one_run_archive(tmp_path, monkeypatch)
    members = _members(file)
    _write(tmp_path / "escape.tar.xz", {**members, "../x": b"boo"})
    with pytest.raises(ReplicateError, match="member '../x' is not a cache entry"):
        archive.load(tmp_path / "escape.tar.xz")
    manifest = json.loads(members["manifest.json"])
    manifest["entries"][0]["folder"] = "../runs"
    _write(tmp_path / "listed.tar.xz", {**members, "manifest.json": json.dumps(manifest).encode()})
    with pytest.raises(ReplicateError, match="nothing imported"):
        archive.load(tmp_path / "listed.tar.xz")
    assert not (tmp_path / "x").exists() and not (empty_cache.parent / "runs").exists()


def test_a_truncated_archive_is_one_line(tmp_path, monkeypatch, capsys):
    file, empty_cache = _one_run_archive(tmp_path, monkeypatch)
    data = file.read_bytes()
    (tmp_path / "cut.tar.xz").write_bytes(data[: len(data) // 2])
    assert main(["cache", "import", str(tmp_path / "cut.tar.xz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a complete cache archive" in err[0] and "nothing imported" in err[0]
    assert main(["cache", "import", str(tmp_path / "absent.tar.xz")]) == 2
    assert "no such archive" in capsys.readouterr().err
    assert not empty_cache.exists() or not any(empty_cache.rglob("*.csv"))


def test_stale_entries_stay_out_of_an_export(tmp_path, monkeypatch):
    cache.run(QUAD, progress=False)
    with monkeypatch.context() as patch:
        patch.setitem(keys.NUMERICS, "fedavg", 7)  # as after a numerics bump: the entry is no longer read
        with pytest.raises(ReplicateError, match="nothing to export: no runs are in .*1 stale entries"):
            archive.export(tmp_path / "none.tar.xz")
    assert archive.export(tmp_path / "one.tar.xz")[0] == [cache.key(QUAD)]


def test_import_says_when_runs_ran_on_another_device_type(tmp_path, monkeypatch, capsys):
    """A run's key holds its device type: runs computed on CUDA are imported whole, and the import says
    that notebooks here read them only with REPLICATE_DEVICE=cuda."""
    monkeypatch.setattr("replicate.runs.config.run_device", lambda: torch.device("cpu"))  # on any machine
    cache.run(QUAD, progress=False)
    stored = settings.current().cache / "runs" / f"{cache.key(QUAD)}"
    meta = json.loads(stored.with_suffix(".json").read_text()) | {"device": "cuda:0"}
    gpu = settings.current().cache / "runs" / cache.entry_name(meta)
    assert gpu.name == cache.key(QUAD, device="cuda") != stored.name
    gpu.with_suffix(".json").write_text(json.dumps(cache.sealed(meta)))
    gpu.with_suffix(".csv").write_bytes(stored.with_suffix(".csv").read_bytes())
    assert sorted(archive.export(tmp_path / "runs.tar.xz")[0]) == sorted([stored.name, gpu.name])
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "other_machine_cache"))
    assert main(["cache", "import", str(tmp_path / "runs.tar.xz")]) == 0
    out = capsys.readouterr().out
    assert "imported 2 runs" in out and "; 1 of them ran on cuda, which notebooks here read only with " \
        "REPLICATE_DEVICE=cuda" in out


def test_a_file_that_is_no_archive_is_one_line(tmp_path, capsys):
    (tmp_path / "notes.tar.xz").write_text("not an archive")
    assert main(["cache", "import", str(tmp_path / "notes.tar.xz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a complete cache archive" in err[0] and "nothing imported" in err[0]
