"""A damaged run-cache entry is never used: found when read, moved aside, reported in one line, recomputed."""
import json

import pytest

from replicate.core import settings
from replicate.experiments.li2020 import fig2
from replicate.fl import engine
from replicate.fl.algorithms import FedAvg
from replicate.runs import cache
from replicate.runs.config import RunConfig

QUAD = RunConfig(dataset="quadratic", algorithm=FedAvg("full"), local_steps=5, batch_size=None, client_lr=0.4,
                 lr_schedule="constant", weight_decay=0.0, clip_norm=None, rounds=20)


def _entry():
    return settings.current().cache / "runs" / cache.key(QUAD)


def _truncate(csv):
    csv.write_bytes(csv.read_bytes()[: len(csv.read_bytes()) * 2 // 3])


def _flip(csv):
    data = bytearray(csv.read_bytes())
    data[len(data) // 2] ^= 0x04  # one bit of one digit: still a parsable CSV
    csv.write_bytes(bytes(data))


def _empty(csv):
    csv.write_bytes(b"")


def _no_sidecar(csv):
    csv.with_suffix(".json").unlink()


@pytest.mark.parametrize("damage", [_truncate, _flip, _empty, _no_sidecar])
def test_a_damaged_entry_is_recomputed_and_never_used(damage, capsys, monkeypatch):
    first = cache.run(QUAD, progress=False)
    meta = json.loads(_entry().with_suffix(".json").read_text())
    assert meta["rows"] == len(first) and len(meta["csv_sha256"]) == 64
    damage(_entry().with_suffix(".csv"))
    assert not cache.is_cached(_entry().name)
    calls = []
    real = engine.run_batch
    monkeypatch.setattr(engine, "run_batch", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = cache.run(QUAD, progress=False)
    assert calls == [1] and again.equals(first)  # recomputed, the same numbers
    err = capsys.readouterr().err
    if damage is not _no_sidecar:  # a CSV without its sidecar is an entry never finished: simply recomputed
        line, = [line for line in err.splitlines() if "damaged" in line]
        assert f"runs/{_entry().name} is damaged" in line and "recomputed, not used" in line
        assert (settings.current().cache / "damaged" / f"{_entry().name}.csv").exists()  # kept for inspection
        assert cache.damaged_since(0) == [_entry().name]
    assert cache.damage(_entry()) is None  # whole again


def test_a_damaged_entry_never_reaches_a_figure(monkeypatch):
    """The issue's case: a cut run CSV silently shortened a published li2020/fig2.csv."""
    tiny = fig2.Fig2Config(local_steps=(1, 5), decay=(1e-6, 1e-2), rounds=30, theorem5_lrs=(0.02,),
                           theorem5_steps=(2,))
    first = fig2.fig2(tiny, progress=False, log=cache.RunLog(display=False))
    for csv in sorted((settings.current().cache / "runs").glob("*.csv"))[:2]:
        _truncate(csv)
    log = cache.RunLog(display=False)
    assert fig2.fig2(tiny, progress=False, log=log).equals(first)
    assert log.from_cache == log.runs - 2


def test_an_entry_of_an_older_cache_without_checksums_is_recomputed(capsys):
    """A sidecar written before the cache recorded checksums: nothing can verify its CSV (a flipped digit
    still parses), so the entry is moved aside and recomputed, never read."""
    first = cache.run(QUAD, progress=False)
    sidecar = _entry().with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({k: v for k, v in meta.items() if k not in ("csv_sha256", "rows", cache.SEAL)}))
    _flip(_entry().with_suffix(".csv"))
    assert "records no checksum" in cache.damage(_entry())
    assert cache.run(QUAD, progress=False).equals(first)
    assert "recomputed, not used" in capsys.readouterr().err
    assert cache.damage(_entry()) is None


@pytest.mark.parametrize("field, value", [("elapsed_s", 9.123), ("machine", "NVIDIA H200, torch 2.13.0"),
                                          ("rounds", 21)])
def test_a_sidecar_edited_or_damaged_is_recomputed(field, value, capsys):
    """A sidecar's other fields are sealed by its own sha256: its time and processor (which a figure's claims
    record and `figures --estimate` read) or its config, changed after it was written, make the entry damaged."""
    first = cache.run(QUAD, progress=False)
    sidecar = _entry().with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    assert meta[cache.SEAL] == cache.sealed({k: v for k, v in meta.items() if k != cache.SEAL})[cache.SEAL]
    sidecar.write_text(json.dumps({**meta, field: value}, indent=1))
    assert cache.damage(_entry()) == "its sidecar (.json) does not match its own checksum"
    log = cache.RunLog(display=False)
    assert cache.run(QUAD, progress=False, log=log).equals(first) and log.from_cache == 0
    assert "recomputed, not used" in capsys.readouterr().err
    assert json.loads(sidecar.read_text()).get(field) != value


def test_a_worker_result_without_checksums_is_stored_checksummed():
    """A result from a worker of code before checksums (no ``csv_sha256``): checksummed as it is stored, so the
    entry verifies when read instead of being refused and computed again."""
    history, text, meta = cache.compute(QUAD)
    cache.store(QUAD, None, None, text, {k: v for k, v in meta.items() if k not in ("csv_sha256", "rows")})
    assert cache.damage(_entry()) is None and cache.is_cached(_entry().name)


def test_a_sidecar_sealed_before_its_fields_reach_an_archive_and_back():
    """Written into the cache from an archive's entry (``archive.put``), a sidecar is sealed and verifies; one
    written before sidecars were sealed (its CSV checksummed) is read as before, and sealed when it passes."""
    from replicate.runs import archive

    cache.run(QUAD, progress=False)
    sidecar = _entry().with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({k: v for k, v in meta.items() if k != cache.SEAL}, indent=1))
    assert cache.damage(_entry()) is None  # CSV verified; its other fields as they are
    entry, = archive.entries()
    data = {suffix: entry.path(suffix).read_bytes() for suffix in (".json", ".csv")}
    archive.put(entry, data)
    assert json.loads(sidecar.read_text())[cache.SEAL] and cache.damage(_entry()) is None


def test_a_worker_result_damaged_on_its_way_is_not_stored():
    history, text, meta = cache.compute(QUAD)
    with pytest.raises(Exception, match="came back damaged"):
        cache.store(QUAD, None, None, text[:-5], meta)
    assert not _entry().with_suffix(".csv").exists()


def _read_only(tmp_path):
    """A cache folder no run can be written into, for any user: its place is taken by a file (a read-only
    mount cannot be made here, and root writes through permission bits)."""
    (tmp_path / "ro").write_text("a file where the cache folder should be")
    return tmp_path / "ro" / "cache"


def test_a_cache_that_cannot_be_written_is_refused_before_any_compute(tmp_path, monkeypatch):
    """Issue #37 item 4: a run computed only to fail storing it (rc 1, OSError) is refused first, in one line,
    on both paths a run is computed by (one run read by a figure; a sweep's missing runs)."""
    monkeypatch.setenv("REPLICATE_CACHE", str(_read_only(tmp_path)))
    monkeypatch.setattr(engine, "run_batch", lambda *a, **k: pytest.fail("a run was computed into an unwritable cache"))
    with pytest.raises(cache.ReplicateError, match=r"cannot write into .*REPLICATE_CACHE") as raised:
        cache.run(QUAD, progress=False)
    assert len(str(raised.value).splitlines()) == 1
    with pytest.raises(cache.ReplicateError, match="cannot write into"):
        cache.plan([(QUAD, None, None)], None)
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "fine"))
    assert cache.plan([(QUAD, None, None)], None) == [(QUAD, None, None)]  # a writable one plans as before


def test_a_cached_run_reads_back_the_very_floats_it_stored(monkeypatch):
    """A cache entry is read bitwise as computed, whatever pandas' version: pandas 2's default parser read
    "1.3410166501998901" one ulp off on a GPU machine (cache.EXACT_FLOATS), so a run read from the cache
    differed from the same run computed. The values below are that one and the float64 extremes of each kind."""
    import pandas as pd

    values = [1.3410166501998901, 0.1 + 0.2, 2.2250738585072014e-308, 5e-324, 1.7976931348623157e308,
              0.30000000000000004, 123456.78901234567, 2.4251463413238525]
    computed = pd.DataFrame({"round": range(len(values)), "test_loss": values})
    monkeypatch.setattr("replicate.fl.engine.run_batch", lambda problem, runs, *a, **k: [computed.copy() for _ in runs])
    ran = cache.run(QUAD, progress=False, log=cache.RunLog(display=False))
    read = cache.load(QUAD)
    assert [v.hex() for v in read["test_loss"]] == [v.hex() for v in values]
    pd.testing.assert_frame_equal(read, ran, check_exact=True)


def test_an_archive_entry_whose_sidecar_breaks_its_seal_is_refused(tmp_path, monkeypatch):
    """A sealed sidecar changed inside an archive whose manifest was rewritten to fit: the archive's own
    checksums pass, the sidecar's seal does not, and nothing is imported (not resealed as if verified)."""
    from replicate.runs import archive

    cache.run(QUAD, progress=False)
    (entry, data), = [(e, {s: e.path(s).read_bytes() for s in (".json", ".csv")}) for e in archive.entries()]
    meta = json.loads(data[".json"])
    edited = {**data, ".json": json.dumps({**meta, "elapsed_s": 0.001}).encode()}
    archive.write(tmp_path / "edited.tar.xz", [(entry, edited)])
    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "elsewhere"))
    with pytest.raises(cache.ReplicateError, match="does not match its own checksum.*nothing imported"):
        archive.load(tmp_path / "edited.tar.xz")
    assert not cache.is_cached(entry.name)


def test_an_older_caches_entry_of_the_archives_very_numbers_is_replaced_quietly(tmp_path, monkeypatch, capsys):
    """Importing (or syncing the ledger) over an entry of an older cache without checksums whose CSV is the
    archive's: it is replaced by the verified entry, not reported damaged and moved aside."""
    from replicate.runs import archive

    cache.run(QUAD, progress=False)
    assert archive.export(tmp_path / "runs.tar.xz")[0] == [_entry().name]
    sidecar = _entry().with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({k: v for k, v in meta.items() if k not in ("csv_sha256", "rows", cache.SEAL)}))
    capsys.readouterr()
    assert archive.load(tmp_path / "runs.tar.xz")[0] == 1
    assert "damaged" not in capsys.readouterr().err and not (settings.current().cache / "damaged").exists()
    assert cache.damage(_entry()) is None and cache.SEAL in json.loads(sidecar.read_text())
