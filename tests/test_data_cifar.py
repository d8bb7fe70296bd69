"""CIFAR-10/100 loaders: official python batches built here in the official layout, the
published-MD5 check of the real registry entries, and the lossy JPEG copy (tiny tarball built
here; the offline copy when present)."""
import hashlib
import io
import os
import pickle
import tarfile

import numpy as np
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.data import cifar, store


def _batch(n, first_label, key=b"labels", seed=0):
    rs = np.random.RandomState(seed)
    return {b"batch_label": b"toy", key: [(first_label + i) % 10 for i in range(n)],
            b"data": rs.randint(0, 256, (n, 3072)).astype(np.uint8), b"filenames": [b"x.png"] * n}


def _official_cifar10(root):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for k in range(1, 6):
        (folder / f"data_batch_{k}").write_bytes(pickle.dumps(_batch(2, k, seed=k), protocol=2))
    (folder / "test_batch").write_bytes(pickle.dumps(_batch(3, 0, seed=9), protocol=2))
    (folder / "batches.meta").write_bytes(pickle.dumps(
        {b"label_names": [c.encode() for c in cifar.CIFAR10_CLASSES], b"num_vis": 3072}, protocol=2))
    return root


def test_batch_rows_are_red_green_blue_planes(tmp_path):
    batch = {b"data": np.arange(3072, dtype=np.int64).reshape(1, 3072) % 256, b"labels": [7]}
    (tmp_path / "b").write_bytes(pickle.dumps(batch, protocol=2))
    x, y = cifar.read_batch(tmp_path / "b")
    assert x.shape == (1, 32, 32, 3) and x.dtype == np.uint8 and y.tolist() == [7]
    # pixel (row 0, col 1): red is plane 0 entry 1, green plane 1 entry 1 (1025 % 256), blue 2049 % 256
    assert x[0, 0, 1].tolist() == [1, 1025 % 256, 2049 % 256]
    assert x[0, 1, 0].tolist() == [32, (1024 + 32) % 256, (2048 + 32) % 256]


def test_official_cifar10_and_cifar100_layouts(tmp_path):
    data = cifar.cifar10_official(_official_cifar10(tmp_path / "c10"))
    assert data.train_x.shape == (10, 32, 32, 3) and data.test_x.shape == (3, 32, 32, 3)
    assert data.train_y.tolist() == [1, 2, 2, 3, 3, 4, 4, 5, 5, 6] and data.classes == cifar.CIFAR10_CLASSES
    assert data.variant == cifar.OFFICIAL and not data.lossy
    folder = tmp_path / "c100" / "cifar-100-python"
    folder.mkdir(parents=True)
    for split, n in (("train", 4), ("test", 2)):
        batch = _batch(n, 0, key=b"fine_labels")
        batch[b"coarse_labels"] = [i % 20 for i in range(n)]
        (folder / split).write_bytes(pickle.dumps(batch, protocol=2))
    (folder / "meta").write_bytes(pickle.dumps({b"fine_label_names": [b"f%d" % i for i in range(100)],
                                                b"coarse_label_names": [b"c%d" % i for i in range(20)]}))
    fine, coarse = cifar.cifar100(tmp_path / "c100"), cifar.cifar100(tmp_path / "c100", labels="coarse")
    assert fine.train_x.shape == (4, 32, 32, 3) and len(fine.classes) == 100 and len(coarse.classes) == 20
    with pytest.raises(ReplicateError, match="fine"):
        cifar.cifar100(tmp_path / "c100", labels="medium")


def test_batches_that_would_run_code_are_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return os.system, ("echo pwned",)
    (tmp_path / "b").write_bytes(pickle.dumps({b"data": Evil(), b"labels": []}))
    with pytest.raises(ReplicateError, match="refusing to load"):
        cifar.read_batch(tmp_path / "b")


def test_real_cifar10_entry_refuses_an_archive_without_the_published_md5(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    src = _official_cifar10(tmp_path / "build")
    (tmp_path / "src").mkdir()
    with tarfile.open(tmp_path / "src" / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(src / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    digest = hashlib.md5((tmp_path / "src" / "cifar-10-python.tar.gz").read_bytes()).hexdigest()
    with pytest.raises(ReplicateError, match=f"MD5 {digest}, expected c58f30108f718f92721af3b95e74349a"):
        store.fetch("cifar10", tmp_path / "src")


def _jpeg_tar(path, per_class=2):
    from PIL import Image

    with tarfile.open(path, "w:gz") as tar:
        for split in ("train", "test"):
            for label, name in enumerate(cifar.CIFAR10_CLASSES[:3]):
                for k in reversed(range(per_class)):  # tar order differs from the sorted order
                    buffer = io.BytesIO()
                    Image.new("RGB", (32, 32), (20 * label, 100, 10 * k)).save(buffer, "JPEG", quality=95)
                    info = tarfile.TarInfo(f"{split}/{name}/{k:04d}.jpg")
                    info.size = buffer.tell()
                    buffer.seek(0)
                    tar.addfile(info, buffer)
    return path


def test_jpeg_copy_is_decoded_once_labelled_lossy_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    data = cifar.cifar10_jpeg(_jpeg_tar(tmp_path / "jpg.tar.gz"))
    assert data.lossy and data.variant == cifar.LOSSY_JPEG
    assert data.train_x.shape == (6, 32, 32, 3) and data.train_y.tolist() == [0, 0, 1, 1, 2, 2]
    assert abs(int(data.train_x[2, 5, 5, 0]) - 20) <= 3 and abs(int(data.train_x[3, 5, 5, 2]) - 10) <= 3
    monkeypatch.setattr(cifar, "_decode_jpeg_tar", lambda path: pytest.fail("decoded twice"))
    again = cifar.cifar10_jpeg(tmp_path / "jpg.tar.gz")
    assert np.array_equal(again.test_x, data.test_x)


def test_jpeg_tarball_with_a_foreign_member_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    with tarfile.open(tmp_path / "bad.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("train/zebra/0000.jpg")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ReplicateError, match="unexpected member 'train/zebra/0000.jpg'"):
        cifar.cifar10_jpeg(tmp_path / "bad.tar.gz")


@pytest.mark.skipif(not store.is_available("cifar10_jpg"),
                    reason="the offline CIFAR-10 JPEG copy is not here (REPLICATE_DATA_FROM, ../shared/data)")
def test_offline_jpeg_copy():
    data = cifar.cifar10_jpeg()  # decoded once into data/cache (about 15 s), then read from there
    assert data.lossy and data.train_x.shape == (50000, 32, 32, 3) and data.test_x.shape == (10000, 32, 32, 3)
    assert np.bincount(data.train_y).tolist() == [5000] * 10 and np.bincount(data.test_y).tolist() == [1000] * 10
    # CIFAR-10's published training channel means; the shared README promises JPEG within 0.04.
    means = data.train_x.reshape(-1, 3).mean(0) / 255
    assert np.allclose(means, [0.4914, 0.4822, 0.4465], atol=0.04)
    if not store.is_available("cifar10"):
        assert cifar.cifar10().lossy  # the fallback is taken, and says so


def _stem_cifar_or_skip():
    from replicate.data import store

    if not (store.is_available("cifar10") or store.is_available("cifar10_jpg")):
        pytest.skip("CIFAR-10 is not available (neither the official batches nor the lossy JPEG copy): "
                    f"run `{store.fetch_command('cifar10')}`")


@pytest.mark.parametrize("heterogeneity, classes_each", [("moderate", 10), ("high", 5)])
def test_stem_cifar10_partition_counts_disjointness_and_classes(heterogeneity, classes_each):
    """STEM §4 / spec §6.2-§6.3: 100 workers × 490 train / 90 test, disjoint, all classes (moderate)
    or 5 of 10 (high, the same 5 in a worker's test set); the JPEG copy is labelled lossy."""
    _stem_cifar_or_skip()
    from replicate.data import load
    from replicate.data.shards import cifar10_stem_name, class_shards

    data = cifar.cifar10()
    name = cifar10_stem_name(heterogeneity)
    assert name == (f"cifar10_jpg_stem_{heterogeneity}" if data.lossy else f"cifar10_stem_{heterogeneity}")
    ds = load(name, seed=1)
    assert ds.name == name
    assert ds.num_clients == 100 and ds.meta["image_shape"] == (3, 32, 32)
    assert set(ds.train.sizes.tolist()) == {490} and set(ds.test.sizes.tolist()) == {90}
    assert ds.train.x.shape == (49_000, 3 * 32 * 32) and abs(float(ds.train.x.mean())) < 0.1
    assert ds.meta["lossy"] == data.lossy and (any("lossy" in d for d in ds.meta["deviations"]) == data.lossy)
    for split, labels, stream in (("train", data.train_y, 0), ("test", data.test_y, 1)):
        parts = class_shards(labels, heterogeneity, 1, stream)
        everything = np.concatenate(parts)
        assert len(np.unique(everything)) == len(everything)  # disjoint across workers
        y = getattr(ds, split).y.numpy()
        offsets = getattr(ds, split).offsets.numpy()
        assert np.array_equal(y, labels[everything])  # the dataset holds exactly these samples, worker by worker
        for k in range(100):
            classes = np.unique(y[offsets[k]:offsets[k + 1]])
            assert len(classes) == classes_each
            if heterogeneity == "high":
                assert set(classes) == {(k + j) % 10 for j in range(5)}
    # same seed, same split; another seed, another one; fewer clients: the first workers of the same split
    assert all(np.array_equal(a, b) for a, b in zip(parts, class_shards(labels, heterogeneity, 1, stream)))
    assert not np.array_equal(parts[0], class_shards(labels, heterogeneity, 2, stream)[0])
    few = load(name, seed=1, num_clients=3)
    assert torch.equal(few.train.x, ds.train.x[:3 * 490]) and torch.equal(few.test.y, ds.test.y[:3 * 90])


def test_cifar_features_are_the_plain_formula_bitwise_and_contiguous():
    """STEM spec §6.3 step 4: (x/255 − mean)/std per channel, computed in place (``shards._cifar_features``):
    bitwise the plain float32 formula for every byte value in every channel, laid out (n, 3, 32, 32) C-contiguous
    (so flattening a worker's images copies nothing)."""
    from replicate.data.shards import CIFAR_MEAN, CIFAR_STD, _cifar_features

    images = np.random.default_rng(0).integers(0, 256, (9, 32, 32, 3), dtype=np.uint8)
    images[0] = np.arange(3 * 32 * 32).reshape(32, 32, 3) % 256  # every value in every channel
    plain = images.astype(np.float32).transpose(0, 3, 1, 2) / np.float32(255.0)
    plain = (plain - np.float32(CIFAR_MEAN)[:, None, None]) / np.float32(CIFAR_STD)[:, None, None]
    features = _cifar_features(images)
    assert features.dtype == np.float32 and features.shape == (9, 3, 32, 32) and features.flags["C_CONTIGUOUS"]
    assert np.array_equal(features, plain)


def test_mnist_features_are_the_plain_formula_bitwise():
    from replicate.data.shards import MNIST_MEAN, MNIST_STD, _mnist_features

    images = np.arange(2 * 28 * 28).reshape(2, 28, 28).astype(np.uint8)  # every byte value
    plain = ((images.astype(np.float32) / 255.0) - MNIST_MEAN) / MNIST_STD
    assert plain.dtype == np.float32 and np.array_equal(_mnist_features(images), plain)
