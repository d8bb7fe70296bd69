"""Official archives (issue #22 §1): tiny archives in the official layouts, built here.

Checksum match and mismatch, a truncated archive, a missing member, no internet, .tar.gz /
.tar.bz2 / .zip unpacking, path traversal and links refused, trust-on-first-use pins, and
``fetch --all`` reporting every dataset.
"""
import hashlib
import io
import json
import tarfile
import zipfile

import pytest

import fake_http

from replicate.cli.main import main
from replicate.core.errors import ReplicateError
from replicate.data import archives, catalog, store

TRAIN, TEST = b"train-bytes\x00\x01" * 50, b"test-bytes\x02" * 30


def _tar(path, members, mode):
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _spec(archive_name, archive_sha=None, archive_md5=None, member_sums=True):
    """A TFF-like dataset: two members of one archive, stored as a/train.h5 and a/test.h5."""
    return store.DatasetFiles(
        name="toyarc",
        files=(store.FileSpec("a/train.h5", _sha(TRAIN) if member_sums else None, gzipped=False),
               store.FileSpec("a/test.h5", _sha(TEST) if member_sums else None, gzipped=False)),
        archives=(store.Archive(archive_name, ("https://host-a.invalid/" + archive_name,
                                               "https://host-b.invalid/" + archive_name),
                                (("toy_train.h5", "a/train.h5"), ("toy_test.h5", "a/test.h5")),
                                sha256=archive_sha, md5=archive_md5),),
        local_dirs=("toyarc",),
    )


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")  # no local copy
    return tmp_path


def _register(monkeypatch, spec):
    store.spec("mnist")  # the catalog is loaded before the toy entry goes in
    monkeypatch.setitem(store._REGISTRY, spec.name, spec)


def _serve(monkeypatch, payloads, tried=None):
    """The network answering from ``payloads`` {url: bytes}; other URLs are unreachable."""
    fake_http.serve(monkeypatch, payloads.get, tried)


@pytest.mark.parametrize("suffix, mode", [(".tar.bz2", "w:bz2"), (".tar.gz", "w:gz"), (".zip", None)])
def test_download_verifies_the_archive_and_unpacks_its_members(env, monkeypatch, suffix, mode):
    members = {"toy_train.h5": TRAIN, "toy_test.h5": TEST, "README": b"other member, not staged"}
    built = (_zip(env / f"toy{suffix}", members) if mode is None else _tar(env / f"toy{suffix}", members, mode))
    data = built.read_bytes()
    spec = _spec(f"toy{suffix}", archive_sha=_sha(data))
    _register(monkeypatch, spec)
    tried = []
    _serve(monkeypatch, {spec.archives[0].urls[1]: data}, tried)
    lines = []
    folder = store.fetch("toyarc", log=lines.append)
    assert tried == list(spec.archives[0].urls)  # the first host is down, the second answers
    assert (folder / "a" / "train.h5").read_bytes() == TRAIN and (folder / "a" / "test.h5").read_bytes() == TEST
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == ["test.h5", "train.h5"]  # no temp files
    assert lines == [f"toyarc: <- {spec.archives[0].urls[1]}"]
    assert store.ensure("toyarc") == folder


def test_archive_checksum_mismatch_names_both_hashes_and_stages_nothing(env, monkeypatch):
    data = _tar(env / "toy.tar.gz", {"toy_train.h5": TRAIN, "toy_test.h5": TEST}, "w:gz").read_bytes()
    spec = _spec("toy.tar.gz", archive_md5="0" * 32)
    _register(monkeypatch, spec)
    _serve(monkeypatch, {spec.archives[0].urls[0]: data})
    with pytest.raises(ReplicateError) as err:
        store.fetch("toyarc")
    message = str(err.value)
    assert "MD5 " + hashlib.md5(data).hexdigest() in message and "expected " + "0" * 32 in message
    assert "not used" in message
    assert not any(p.is_file() for p in (env / "data" / "toyarc").rglob("*"))


def test_truncated_archive_is_one_clear_error_naming_the_file(env, monkeypatch):
    data = _tar(env / "toy.tar.bz2", {"toy_train.h5": TRAIN * 20, "toy_test.h5": TEST}, "w:bz2").read_bytes()
    cut = env / "src" / "toyarc" / "toy.tar.bz2"
    cut.parent.mkdir(parents=True)
    cut.write_bytes(data[: len(data) // 2])
    _register(monkeypatch, _spec("toy.tar.bz2"))  # no published checksum: only unpacking can tell
    with pytest.raises(ReplicateError, match=r"toy\.tar\.bz2: truncated or corrupt archive") as err:
        store.fetch("toyarc", env / "src")
    assert len(str(err.value).splitlines()) == 1
    assert archives.pinned("toyarc/toy.tar.bz2") is None  # a broken download is never trusted


def test_missing_member_is_named(env, monkeypatch):
    (env / "src").mkdir()
    _zip(env / "src" / "toy.zip", {"toy_train.h5": TRAIN})
    _register(monkeypatch, _spec("toy.zip"))
    with pytest.raises(ReplicateError, match="has no member toy_test.h5"):
        store.fetch("toyarc", env / "src")
    assert not (env / "data" / "toyarc" / "a" / "train.h5").exists()  # all members or none


def test_member_content_mismatch_is_refused(env, monkeypatch):
    (env / "src").mkdir()
    _zip(env / "src" / "toy.zip", {"toy_train.h5": TRAIN + b"!", "toy_test.h5": TEST})
    _register(monkeypatch, _spec("toy.zip"))
    with pytest.raises(ReplicateError, match=f"SHA-256 {_sha(TRAIN + b'!')}, expected {_sha(TRAIN)}"):
        store.fetch("toyarc", env / "src")


def test_offline_download_says_so_and_how_to_stage_by_hand(env, monkeypatch):
    _register(monkeypatch, _spec("toy.tar.bz2", archive_sha="a" * 64))
    _serve(monkeypatch, {})
    with pytest.raises(ReplicateError) as err:
        store.fetch("toyarc")
    message = str(err.value)
    assert "host unreachable" in message and "offline" in message
    assert all(url in message for url in _spec("toy.tar.bz2").archives[0].urls)
    assert "--from DIR" in message and "to download it" not in message
    assert not (env / "data" / "toyarc" / ".download" / "toy.tar.bz2").exists()


@pytest.mark.parametrize("name", ["../evil.h5", "/etc/evil.h5", "x/../../evil.h5"])
def test_path_traversal_is_refused(env, monkeypatch, name):
    (env / "src").mkdir()
    _tar(env / "src" / "toy.tar.gz", {"toy_train.h5": TRAIN, "toy_test.h5": TEST, name: b"x"}, "w:gz")
    _register(monkeypatch, _spec("toy.tar.gz"))
    with pytest.raises(ReplicateError, match="outside the target folder"):
        store.fetch("toyarc", env / "src")
    assert not (env / "evil.h5").exists() and not (env / "data" / "evil.h5").exists()


def test_links_in_archives_are_refused(env, monkeypatch):
    (env / "src").mkdir()
    with tarfile.open(env / "src" / "toy.tar.gz", "w:gz") as tar:
        link = tarfile.TarInfo("toy_train.h5")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    _register(monkeypatch, _spec("toy.tar.gz"))
    with pytest.raises(ReplicateError, match="link"):
        store.fetch("toyarc", env / "src")


def test_unpublished_checksums_are_pinned_on_first_use_then_enforced(env, monkeypatch):
    data = _zip(env / "toy.zip", {"toy_train.h5": TRAIN, "toy_test.h5": TEST}).read_bytes()
    spec = _spec("toy.zip", member_sums=False)
    _register(monkeypatch, spec)
    url = spec.archives[0].urls[0]
    _serve(monkeypatch, {url: data})
    store.fetch("toyarc")
    pins = json.loads(archives.lock_path().read_text())
    assert pins["toyarc/toy.zip"]["sha256"] == _sha(data) and pins["toyarc/toy.zip"]["origin"] == url
    assert pins["toyarc/a/train.h5"]["sha256"] == _sha(TRAIN)
    # A later, different download (the host changed the file) is refused with both hashes.
    (env / "data" / "toyarc" / "a" / "train.h5").unlink()
    other = _zip(env / "other.zip", {"toy_train.h5": TRAIN + b"v2", "toy_test.h5": TEST}).read_bytes()
    _serve(monkeypatch, {url: other})
    with pytest.raises(ReplicateError, match=f"SHA-256 {_sha(other)}, expected {_sha(data)}"):
        store.fetch("toyarc")
    # And a staged member that changed on disk is refused when loading.
    _serve(monkeypatch, {url: data})
    store.fetch("toyarc")
    (env / "data" / "toyarc" / "a" / "test.h5").write_bytes(b"edited")
    with pytest.raises(ReplicateError, match="not used"):
        store.ensure("toyarc")


def test_a_staged_file_whose_pin_is_gone_is_staged_again_not_pinned_as_it_lies(env, monkeypatch):
    """A file checked only by its pin, changed on disk, then its lock deleted (as the error for a damaged lock
    says): nothing vouches for the file as it lies, so it is not pinned from there. Loading it is refused in one
    line (no local source) or stages it again from its source (one), and `data fetch` stages it afresh."""
    data = _zip(env / "toy.zip", {"toy_train.h5": TRAIN, "toy_test.h5": TEST}).read_bytes()
    spec = _spec("toy.zip", member_sums=False)
    _register(monkeypatch, spec)
    _serve(monkeypatch, {spec.archives[0].urls[0]: data})
    store.fetch("toyarc")
    staged = env / "data" / "toyarc" / "a" / "train.h5"
    staged.write_bytes(TRAIN[:-1] + b"\xff")  # one byte changed on disk
    archives.lock_path().write_text("{ cut")
    with pytest.raises(ReplicateError, match="unreadable checksum pins.*delete it, then fetch"):
        store.ensure("toyarc")
    archives.lock_path().unlink()
    with pytest.raises(ReplicateError, match="has no checksum to be checked against .* not used. Run `python -m "
                                             "replicate data fetch toyarc`"):
        store.ensure("toyarc")
    assert archives.pinned("toyarc/a/train.h5") is None  # nothing pinned from the disk
    (env / "shared" / "toyarc").mkdir(parents=True)
    (env / "shared" / "toyarc" / "toy.zip").write_bytes(data)
    monkeypatch.setenv("REPLICATE_DATA_FROM", str(env / "shared"))
    assert (store.ensure("toyarc") / "a" / "train.h5").read_bytes() == TRAIN  # staged again from the source
    assert archives.pinned("toyarc/a/train.h5") == _sha(TRAIN)
    staged.write_bytes(b"edited")
    archives.lock_path().unlink()
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")
    store.fetch("toyarc")  # downloads again: the file on disk is not kept as verified
    assert staged.read_bytes() == TRAIN and archives.pinned("toyarc/a/train.h5") == _sha(TRAIN)


def test_a_staged_file_whose_pin_is_gone_is_not_called_staged(env, monkeypatch):
    """`data fetch --dry-run`, `data list` and the notebooks' data skips say what `ensure` does: a staged file
    whose pin is gone is not ready (it must be staged again from its source)."""
    data = _zip(env / "toy.zip", {"toy_train.h5": TRAIN, "toy_test.h5": TEST}).read_bytes()
    spec = _spec("toy.zip", member_sums=False)
    _register(monkeypatch, spec)
    _serve(monkeypatch, {spec.archives[0].urls[0]: data})
    store.fetch("toyarc")
    assert store.fetch_plan("toyarc")[0] == "staged" and store.is_available("toyarc")
    archives.lock_path().unlink()
    assert store.fetch_plan("toyarc")[0] == "download" and not store.is_available("toyarc")


def _pin_many(folder, prefix, count):
    import os
    os.environ["REPLICATE_DATA"] = str(folder)
    from replicate.data import archives as pins
    for i in range(count):
        pins.pin(f"{prefix}/{i}", f"{i:064x}", "test")


def test_processes_pinning_at_once_lose_no_pin(tmp_path):
    """Two processes staging pin-only datasets at the same moment each read, extend and write the pins: they
    take turns, so neither's pins are lost (a lost pin makes its staged file unusable until fetched again)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_pin_many, args=(tmp_path, name, 150)) for name in ("a", "b")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    assert len(json.loads((tmp_path / "checksums.lock").read_text())) == 300


def test_local_archive_is_staged_without_network(env, monkeypatch):
    data = _tar(env / "toy.tar.bz2", {"toy_train.h5": TRAIN, "toy_test.h5": TEST}, "w:bz2").read_bytes()
    (env / "shared" / "toyarc").mkdir(parents=True)
    (env / "shared" / "toyarc" / "toy.tar.bz2").write_bytes(data)
    monkeypatch.setenv("REPLICATE_DATA_FROM", str(env / "shared"))
    _register(monkeypatch, _spec("toy.tar.bz2", archive_sha=_sha(data)))
    _serve(monkeypatch, {})
    assert store.is_available("toyarc")
    assert (store.ensure("toyarc") / "a" / "test.h5").read_bytes() == TEST


def test_fetch_all_reports_every_dataset(env, monkeypatch, capsys):
    _serve(monkeypatch, {})
    assert main(["data", "fetch", "--all"]) == 0
    out = capsys.readouterr().out
    for name in store.registered():
        line = next(line for line in out.splitlines() if line.startswith(name + " "))
        assert "not available" in line and ("host unreachable" in line or "no download" in line), line


def test_missing_dataset_without_download_says_why(env):
    with pytest.raises(ReplicateError) as err:
        store.ensure("femnist")
    assert "has no download" in str(err.value) and "NIST" in str(err.value)
    assert "to download it" not in str(err.value)


def test_catalog_entries_say_where_their_checksums_come_from():
    for name in store.registered():
        ds = store.spec(name)
        assert ds.checksums and ds.citation and ds.size and ds.status in ("full", "partial", "lossy"), name
        assert ds.downloadable or ds.no_download, name
        for archive in ds.archives:
            assert all(u.startswith(("https://", "http://")) for u in archive.urls)
            assert {n for _, n in archive.members} <= {f.name for f in ds.files}, name
        unpinned = [f.name for f in ds.files if not (f.sha256 or f.md5)]
        assert not unpinned or ds.archives, f"{name}: {unpinned} need an archive checksum or a pin"
    assert store.spec("emnist_tff").archives[0].sha256 == "fe1ed5a502cea3a952eb105920bff8cffb32836b5173cb18a57a32c3606f3ea0"
    assert store.spec("shakespeare_tff").archives[0].sha256 == "0285be9906cb5f268092eee4edeeacfc2af4574f2941f7cc2f08a321d7f5c707"
    assert store.spec("cifar10").archives[0].md5 == "c58f30108f718f92721af3b95e74349a"
    assert store.spec("cifar100").archives[0].md5 == "eb9058c3a382ffc7106e4002c42a8d85"
    assert catalog.__doc__ and "pinned on first use" in catalog.__doc__


def test_own_mirror_first_then_the_archive_that_holds_the_file(env, monkeypatch):
    """As Shakespeare: the text from its mirror, else from Gutenberg's zip; both failures named."""
    text = b"the complete works\n"
    spec = store.DatasetFiles(
        name="toytext", files=(store.FileSpec("t8.txt", _sha(text), gzipped=False),),
        mirrors=("https://mirror.invalid/",),
        archives=(store.Archive("100.zip", ("https://archive.invalid/100.zip",), (("100.txt", "t8.txt"),)),))
    _register(monkeypatch, spec)
    data = _zip(env / "100.zip", {"100.txt": text}).read_bytes()
    _serve(monkeypatch, {"https://archive.invalid/100.zip": data})
    lines = []
    store.fetch("toytext", log=lines.append)
    assert lines == ["toytext: <- https://archive.invalid/100.zip"]
    (env / "data" / "toytext" / "t8.txt").unlink()
    _serve(monkeypatch, {"https://archive.invalid/100.zip": _zip(env / "v2.zip", {"100.txt": b"v2"}).read_bytes()})
    with pytest.raises(ReplicateError) as err:
        store.fetch("toytext")
    assert "https://mirror.invalid/t8.txt: host unreachable" in str(err.value)
    assert f"expected {_sha(data)}" in str(err.value)  # the zip was pinned on first use


def test_a_download_cut_short_is_named_and_leaves_nothing_but_its_part(env, monkeypatch):
    spec = _spec("toy.zip")
    _register(monkeypatch, spec)
    fake_http.serve(monkeypatch, lambda url: (b"partial", 1000))  # 1,000 bytes declared, 7 sent
    with pytest.raises(ReplicateError, match="broke off.*7 of 1,000 bytes"):
        store.fetch("toyarc")
    assert archives.pinned("toyarc/toy.zip") is None
    # the bytes received wait in .download/toy.zip.part for a resume (tests/test_data_download.py); no data file
    assert [p.name for p in (env / "data" / "toyarc").rglob("*") if p.is_file()] == ["toy.zip.part"]


def test_data_list_shows_status_and_checksum_provenance(env, capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == store.registered()
    rows = {line.split()[0]: line for line in out}
    assert "lossy" in rows["cifar10_jpg"] and "partial" in rows["femnist"] and "no download" in rows["femnist"]
    assert "no published checksum" in rows["glove"] and "published in TFF" in rows["emnist_tff"]
