"""Derived caches (parsed arrays): a corrupt one is reported with its path and rebuilt (issue #22, defect 2)."""
import hashlib
import json

import numpy as np
import pytest

from replicate.data import leaf


def _femnist_root(tmp_path):
    root = tmp_path / "femnist"
    for split in ("train", "test"):
        (root / split).mkdir(parents=True)
        (root / split / "all_data_0.json").write_text(json.dumps({
            "users": ["w0"], "num_samples": [2],
            "user_data": {"w0": {"x": [[0.0] * 784, [1.0] * 784], "y": [3, 61]}}}))
    return root


def test_truncated_femnist_cache_is_named_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = _femnist_root(tmp_path)
    first = leaf.femnist_arrays(root)
    (cache,) = (tmp_path / "data" / "cache").glob("femnist-*.npz")
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])  # an interrupted write
    with pytest.warns(RuntimeWarning, match=str(cache)):
        again = leaf.femnist_arrays(root)
    assert np.array_equal(again[0].x, first[0].x) and again[1].users == first[1].users
    with np.load(cache) as z:  # rebuilt in place, readable again
        assert z["train_y"].tolist() == [3, 61]


def test_data_fetch_removes_a_corrupt_cache_of_that_dataset(tmp_path, monkeypatch):
    from replicate.data import cache, store

    payload = b"content"
    toy = store.DatasetFiles("toy", (store.FileSpec("f.bin", hashlib.sha256(payload).hexdigest(), gzipped=False),))
    store.spec("mnist")  # catalog loaded first
    monkeypatch.setitem(store._REGISTRY, "toy", toy)
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f.bin").write_bytes(payload)
    good, bad = cache.path("toy", "good"), cache.path("toy", "bad")
    cache.save(good, {"a": np.arange(3)})
    bad.write_bytes(good.read_bytes()[:40])
    other = cache.path("toyother", "x")
    other.write_bytes(b"not mine")
    lines = []
    store.fetch("toy", tmp_path / "src", log=lines.append)
    assert not bad.exists() and good.exists() and other.exists()
    assert any(str(bad) in line and "corrupt" in line for line in lines)
