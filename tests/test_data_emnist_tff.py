"""TFF federated EMNIST-62 reader: tiny HDF5 files in TFF's layout, built here."""
import hashlib
import tarfile

import h5py
import numpy as np
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.data import emnist_tff, store


def _h5(path, writers):
    """``{writer: labels}``; pixel value of example i is (label + i) / 255, background-like."""
    with h5py.File(path, "w") as f:
        for writer, labels in writers.items():
            group = f.create_group(f"examples/{writer}")
            pixels = np.stack([np.full((28, 28), (lab + i) / 255, np.float32) for i, lab in enumerate(labels)])
            group["pixels"] = pixels
            group["label"] = np.asarray(labels, np.int32)
    return path


def _root(tmp_path):
    root = tmp_path / "fed"
    root.mkdir()
    _h5(root / "fed_emnist_train.h5", {"f0001_01": [0, 61, 36], "f0002_02": [10, 11]})
    _h5(root / "fed_emnist_test.h5", {"f0001_01": [5], "f0002_02": [35, 1]})
    return root


def test_writers_become_clients_with_leaf_shaped_images(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    ds = emnist_tff.emnist_tff(root=str(_root(tmp_path)))
    assert ds.num_clients == 2 and ds.num_classes == 62 and ds.meta["users"] == ("f0001_01", "f0002_02")
    assert ds.train.x.shape == (5, 1, 28, 28) and ds.train.x.dtype == torch.float32
    assert ds.train.y.tolist() == [0, 61, 36, 10, 11] and ds.test.y.tolist() == [5, 35, 1]
    x, _ = ds.train.client(0)
    assert x[:, 0, 3, 3].tolist() == pytest.approx([0 / 255, 62 / 255, 38 / 255])
    (cache,) = (tmp_path / "data" / "cache").glob("emnist_tff-*.npz")
    with np.load(cache) as z:
        assert z["train_x"].dtype == np.uint8  # k/255 pixels stored exactly as bytes
    again = emnist_tff.emnist_tff(root=str(tmp_path / "fed"))  # from the cache
    assert torch.equal(again.train.x, ds.train.x)
    assert emnist_tff.emnist_tff(root=str(tmp_path / "fed"), num_clients=1).num_clients == 1


def test_malformed_files_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = _root(tmp_path)
    _h5(root / "fed_emnist_test.h5", {"f0001_01": [62]})
    with pytest.raises(ReplicateError, match="labels outside 0..61"):
        emnist_tff.emnist_tff(root=str(root))
    (root / "fed_emnist_test.h5").write_bytes(b"not hdf5")
    with pytest.raises(ReplicateError, match="fed_emnist_test.h5 is not a TFF EMNIST file"):
        emnist_tff.emnist_tff(root=str(root))
    (root / "fed_emnist_test.h5").unlink()
    with pytest.raises(ReplicateError, match="fed_emnist_test.h5 does not exist"):
        emnist_tff.emnist_tff(root=str(root))


def test_real_entry_refuses_an_archive_without_tffs_published_sha256(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = _root(tmp_path)
    (tmp_path / "src").mkdir()
    archive = tmp_path / "src" / "fed_emnist.tar.bz2"
    with tarfile.open(archive, "w:bz2") as tar:
        for name in ("fed_emnist_train.h5", "fed_emnist_test.h5"):
            tar.add(root / name, arcname=name)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    with pytest.raises(ReplicateError, match=f"SHA-256 {digest}, expected fe1ed5a502ce"):
        store.fetch("emnist_tff", tmp_path / "src")
    assert not (tmp_path / "data" / "emnist_tff" / "fed_emnist_train.h5").exists()


def test_fedprox_letter_sets_can_draw_from_tff_emnist(tmp_path, monkeypatch):
    from replicate.data import letters

    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = tmp_path / "fed"
    root.mkdir()
    # every lower-case letter a–z (LEAF 36..61) twice per writer, in both files
    _h5(root / "fed_emnist_train.h5", {"w0": list(range(36, 62)) * 2, "w1": list(range(36, 62))})
    _h5(root / "fed_emnist_test.h5", {"w0": list(range(36, 62)), "w1": [0]})
    ds = letters.femnist_fedprox(root=str(root), images="tff")
    assert ds.num_clients == 200 and ds.num_classes == 10 and int(ds.train.y.max()) <= 9
    assert ds.meta["pool_images"] == 10 * 4 and "TFF's federated EMNIST-62" in ds.meta["deviations"][0]
    star = letters.emnist_star(seed=1, num_devices=5, root=str(root), images="tff")
    assert star.num_classes == 26 and star.meta["pool_images"] == 26 * 4
    with pytest.raises(ReplicateError, match="'leaf' or 'tff'"):
        letters.femnist_fedprox(root=str(root), images="nist")
