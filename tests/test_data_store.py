"""Dataset file staging: checksums of uncompressed content, atomic writes, clear errors."""
import gzip
import hashlib

import pytest

import fake_http

from replicate.core import settings
from replicate.data import store
from replicate.core.errors import ReplicateError

PAYLOAD = b"\x00\x00\x08\x01\x00\x00\x00\x03\x07\x02\x01"  # a 3-label IDX file
TOY = store.DatasetFiles(
    name="toy",
    files=(store.FileSpec("labels-idx1-ubyte", hashlib.sha256(PAYLOAD).hexdigest()),),
    mirrors=("https://mirror-a.invalid/toy/", "https://mirror-b.invalid/toy/"),
    local_dirs=("toy",),
)


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """The toy dataset registered, an empty data dir, and no default local source."""
    monkeypatch.setitem(store._REGISTRY, "toy", TOY)
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")  # no local copy
    return tmp_path


def _staged(tmp_path):
    return tmp_path / "data" / "toy" / "labels-idx1-ubyte"


def test_fetch_stages_gzipped_source_as_verified_uncompressed_file(toy):
    source = toy / "src" / "toy"
    source.mkdir(parents=True)
    # Recompressed bytes differ from the official .gz; only the content is checked.
    (source / "labels-idx1-ubyte.gz").write_bytes(gzip.compress(PAYLOAD, compresslevel=1))
    folder = store.fetch("toy", toy / "src")
    assert folder == toy / "data" / "toy"
    assert _staged(toy).read_bytes() == PAYLOAD
    assert [p.name for p in folder.iterdir()] == ["labels-idx1-ubyte"]  # no temp files left
    assert store.ensure("toy") == folder


def test_checksum_mismatch_names_file_and_both_hashes_and_leaves_nothing(toy):
    (toy / "src").mkdir()
    corrupted = PAYLOAD[:-1] + b"\x09"
    (toy / "src" / "labels-idx1-ubyte.gz").write_bytes(gzip.compress(corrupted))
    with pytest.raises(ReplicateError) as err:
        store.fetch("toy", toy / "src")
    message = str(err.value)
    assert "labels-idx1-ubyte" in message
    assert TOY.files[0].sha256 in message
    assert hashlib.sha256(corrupted).hexdigest() in message
    assert "not used" in message
    assert not (toy / "data" / "toy").exists() or not any((toy / "data" / "toy").iterdir())


def test_corrupted_staged_file_is_refused_then_replaced_by_fetch(toy):
    _staged(toy).parent.mkdir(parents=True)
    _staged(toy).write_bytes(b"garbage")
    with pytest.raises(ReplicateError, match="not used"):
        store.ensure("toy")
    (toy / "src").mkdir()
    (toy / "src" / "labels-idx1-ubyte").write_bytes(PAYLOAD)
    store.fetch("toy", toy / "src")
    assert _staged(toy).read_bytes() == PAYLOAD


def test_ensure_stages_from_local_source_env(toy, monkeypatch):
    (toy / "shared" / "toy").mkdir(parents=True)
    (toy / "shared" / "toy" / "labels-idx1-ubyte.gz").write_bytes(gzip.compress(PAYLOAD))
    monkeypatch.setenv("REPLICATE_DATA_FROM", str(toy / "shared"))
    assert store.is_available("toy")
    store.ensure("toy")
    assert _staged(toy).read_bytes() == PAYLOAD


def test_missing_data_says_what_to_run(toy):
    assert not store.is_available("toy")
    with pytest.raises(ReplicateError) as err:
        store.ensure("toy")
    assert "python -m replicate data fetch toy" in str(err.value)
    assert "REPLICATE_DATA_FROM" in str(err.value)


def test_missing_source_directory_and_missing_file(toy):
    with pytest.raises(ReplicateError, match="does not exist"):
        store.fetch("toy", toy / "absent")
    (toy / "empty").mkdir()
    with pytest.raises(ReplicateError, match=r"labels-idx1-ubyte\.gz is not in .*python -m replicate data fetch toy"):
        store.fetch("toy", toy / "empty")


def test_download_tries_mirrors_in_order_and_verifies(toy, monkeypatch):
    tried = []
    fake_http.serve(monkeypatch, lambda url: None if "mirror-a" in url else gzip.compress(PAYLOAD), tried)
    store.fetch("toy")
    assert tried == [m + "labels-idx1-ubyte.gz" for m in TOY.mirrors]
    assert _staged(toy).read_bytes() == PAYLOAD
    assert not (toy / "data" / "toy" / ".download" / "labels-idx1-ubyte.gz").exists()  # the download is not kept


def test_failed_download_lists_urls_and_suggests_local_staging(toy, monkeypatch):
    fake_http.serve(monkeypatch, lambda url: None)
    with pytest.raises(ReplicateError) as err:
        store.fetch("toy")
    assert all(m in str(err.value) for m in TOY.mirrors)
    assert "--from DIR" in str(err.value)
    assert not _staged(toy).exists()


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(ReplicateError, match="mnist"):
        store.fetch("imagenet")


def test_mnist_registry_has_the_official_files():
    assert [f.published_name for f in store.spec("mnist").files] == [
        "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    assert store.spec("mnist").mirrors[0] == "https://ossci-datasets.s3.amazonaws.com/mnist/"


def test_a_local_source_that_is_not_there_is_an_error_before_anything_is_fetched(monkeypatch, tmp_path):
    """REPLICATE_DATA_FROM naming no folder was once ignored silently (and the dataset downloaded)."""
    monkeypatch.setenv("REPLICATE_DATA_FROM", str(tmp_path / "typo"))
    with pytest.raises(ReplicateError, match=r"REPLICATE_DATA_FROM=.*typo is not a folder"):
        settings.current().data_from
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")
    assert settings.current().data_from is None


# ---- data packs (store.pack): a lossless xz tar of the staged files, verified again when staged ----------

def _toy_pack(toy):
    (toy / "src").mkdir()
    (toy / "src" / "labels-idx1-ubyte").write_bytes(PAYLOAD)
    store.fetch("toy", toy / "src")
    return store.pack("toy", toy / "carry")


def test_a_pack_stages_the_same_bytes_on_a_machine_without_the_files(toy, monkeypatch):
    packed = _toy_pack(toy)
    assert packed.name == "toy.pack.tar.xz"
    again = store.pack("toy", toy / "again")
    assert again.read_bytes() == packed.read_bytes()  # deterministic: same files, same pack
    monkeypatch.setenv("REPLICATE_DATA", str(toy / "elsewhere"))
    assert not store.is_available("toy")
    monkeypatch.setenv("REPLICATE_DATA_FROM", str(toy / "carry"))
    assert store.is_available("toy")
    assert store.fetch_plan("toy")[0] == "copy"
    assert (store.ensure("toy") / "labels-idx1-ubyte").read_bytes() == PAYLOAD


def test_a_damaged_pack_is_refused_and_nothing_is_staged(toy, monkeypatch):
    import lzma
    import tarfile

    packed = _toy_pack(toy)
    monkeypatch.setenv("REPLICATE_DATA", str(toy / "elsewhere"))
    staged = toy / "elsewhere" / "toy" / "labels-idx1-ubyte"
    # a changed member (the archive itself well formed): the member's checksum refuses it
    bad = PAYLOAD[:-1] + b"\x09"
    (toy / "member").write_bytes(bad)
    with tarfile.open(packed, "w:xz") as tar:
        tar.add(toy / "member", arcname="labels-idx1-ubyte")
    with pytest.raises(ReplicateError, match=f"labels-idx1-ubyte .*{hashlib.sha256(bad).hexdigest()}.*not used"):
        store.fetch("toy", toy / "carry")
    assert not staged.exists()
    # a truncated pack: one line naming it
    packed.write_bytes(lzma.compress(b"not a tar at all")[:20])
    with pytest.raises(ReplicateError, match="truncated or corrupt archive"):
        store.fetch("toy", toy / "carry")
    # a pack without the file
    (toy / "other").write_bytes(PAYLOAD)
    with tarfile.open(packed, "w:xz") as tar:
        tar.add(toy / "other", arcname="other-file")
    with pytest.raises(ReplicateError, match="has no labels-idx1-ubyte; it was not used"):
        store.fetch("toy", toy / "carry")
    assert not staged.exists()


def test_a_dataset_checked_only_by_a_pin_of_this_machine_is_not_packed(toy, monkeypatch):
    from dataclasses import replace

    monkeypatch.setitem(store._REGISTRY, "toy", replace(TOY, files=(store.FileSpec("labels-idx1-ubyte", None),)))
    (toy / "src").mkdir()
    (toy / "src" / "labels-idx1-ubyte").write_bytes(PAYLOAD)
    monkeypatch.setattr(store.archives, "pinned", lambda key: hashlib.sha256(PAYLOAD).hexdigest())
    store.fetch("toy", toy / "src")
    with pytest.raises(ReplicateError, match="no catalogued checksum"):
        store.pack("toy", toy / "carry")
