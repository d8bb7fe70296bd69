"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009) as image arrays: the official python batches, or
the lossy offline JPEG copy of CIFAR-10. STEM's (Khanduri et al. 2021) CIFAR-10 experiments
start from these; their federated partitions are built elsewhere.

Official layout (https://www.cs.toronto.edu/~kriz/cifar.html, "python version"):
``cifar-10-batches-py/data_batch_1..5`` and ``test_batch`` are pickled dicts with ``b"data"``,
a (10000, 3072) uint8 array whose rows hold the red, green and blue 32×32 planes one after the
other, row-major, and ``b"labels"``; ``batches.meta`` has ``b"label_names"``. CIFAR-100's
``cifar-100-python/train`` and ``test`` hold ``b"fine_labels"`` and ``b"coarse_labels"``, and
``meta`` has ``b"fine_label_names"``. Unpickling can run code, so batches are read only from a
folder whose published MD5s matched (:func:`replicate.data.store.ensure`), through an unpickler
that admits nothing but plain containers and numpy arrays.

The offline copy ``cifar10_jpg`` (``train/<class>/NNNN.jpg``, ``test/<class>/NNNN.jpg``, class
folders named as CIFAR-10's labels, which are in alphabetical order) is JPEG re-encoded at quality
about 75: LOSSY. It is decoded once with Pillow into ``data_dir()/cache/cifar10_jpg-<key>.npz``
and always carries ``variant = "lossy JPEG"``, so anything built on it can say so.
"""
from __future__ import annotations

import io
import pickle
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from replicate.core.errors import ReplicateError
from replicate.data import archives, cache, store

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
OFFICIAL, LOSSY_JPEG = "official python batches", "lossy JPEG"
_NUMPY_GLOBALS = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
                  ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
                  ("numpy._core.multiarray", "scalar"),
                  ("_codecs", "encode")}  # how protocol-2 pickles written by Python 3 store bytes


@dataclass(frozen=True)
class ImageArrays:
    """A centralised image dataset: ``(n, 32, 32, 3)`` uint8 images and int64 labels."""

    name: str
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: tuple[str, ...]
    variant: str  # OFFICIAL or LOSSY_JPEG
    source: str

    @property
    def lossy(self) -> bool:
        return self.variant != OFFICIAL


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _NUMPY_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def read_batch(path: Path, label_key: bytes = b"labels") -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch as ``(n, 32, 32, 3)`` uint8 images and int64 labels."""
    try:
        with open(path, "rb") as fh:
            batch = _ArraysOnly(fh, encoding="bytes").load()
        data = np.asarray(batch[b"data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int64)
    except (OSError, EOFError, KeyError, TypeError, ValueError, pickle.UnpicklingError) as exc:
        raise ReplicateError(f"{path}: not a CIFAR python batch ({type(exc).__name__}: {exc})") from None
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ReplicateError(f"{path}: data {data.shape} and {len(labels)} labels; a CIFAR batch has "
                             f"(n, 3072) pixels and n labels")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


def _names(path: Path, key: bytes) -> tuple[str, ...]:
    with open(path, "rb") as fh:
        meta = _ArraysOnly(fh, encoding="bytes").load()
    return tuple(n.decode() for n in meta[key])


def cifar10_official(folder: str | Path | None = None) -> ImageArrays:
    """CIFAR-10 from the official batches (default: the verified ``cifar10`` store entry)."""
    root = Path(folder) if folder is not None else store.ensure("cifar10")
    batches = root / "cifar-10-batches-py"
    parts = [read_batch(batches / f"data_batch_{k}") for k in range(1, 6)]
    test_x, test_y = read_batch(batches / "test_batch")
    return ImageArrays("cifar10", np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts]),
                       test_x, test_y, _names(batches / "batches.meta", b"label_names"), OFFICIAL, str(batches))


def cifar100(folder: str | Path | None = None, labels: str = "fine") -> ImageArrays:
    """CIFAR-100 from the official files; ``labels`` is ``"fine"`` (100 classes) or ``"coarse"`` (20)."""
    if labels not in ("fine", "coarse"):
        raise ReplicateError(f"labels must be 'fine' or 'coarse', got {labels!r}")
    root = Path(folder) if folder is not None else store.ensure("cifar100")
    files = root / "cifar-100-python"
    key = f"{labels}_labels".encode()
    train_x, train_y = read_batch(files / "train", key)
    test_x, test_y = read_batch(files / "test", key)
    return ImageArrays("cifar100", train_x, train_y, test_x, test_y,
                       _names(files / "meta", f"{labels}_label_names".encode()), OFFICIAL, str(files))


def _decode_jpeg_tar(path: Path) -> dict[str, np.ndarray]:
    from PIL import Image  # Pillow comes with matplotlib; pinned in requirements.txt

    images = {"train": [], "test": []}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                parts = PurePosixPath(member.name).parts
                if not member.isfile():
                    continue
                if len(parts) != 3 or parts[0] not in images or parts[1] not in CIFAR10_CLASSES:
                    raise ReplicateError(f"{path}: unexpected member {member.name!r}; the layout is "
                                         f"train|test/<class>/NNNN.jpg")
                with Image.open(io.BytesIO(tar.extractfile(member).read())) as img:
                    pixels = np.asarray(img.convert("RGB"), dtype=np.uint8)
                if pixels.shape != (32, 32, 3):
                    raise ReplicateError(f"{path}: {member.name} is {pixels.shape}, not 32×32 RGB")
                images[parts[0]].append((CIFAR10_CLASSES.index(parts[1]), parts[2], pixels))
    except (OSError, EOFError, tarfile.TarError) as exc:
        raise ReplicateError(f"{path}: truncated or corrupt JPEG tarball ({type(exc).__name__}: {exc})") from None
    out = {}
    for split, found in images.items():
        found.sort(key=lambda item: item[:2])  # label order, then file name: independent of tar order
        out[f"{split}_x"] = np.stack([p for *_, p in found]) if found else np.zeros((0, 32, 32, 3), np.uint8)
        out[f"{split}_y"] = np.array([label for label, *_ in found], dtype=np.int64)
    return out


def cifar10_jpeg(path: str | Path | None = None) -> ImageArrays:
    """The LOSSY JPEG copy of CIFAR-10, decoded once and cached (keyed by the tarball's SHA-256)."""
    if path is None:
        path = store.ensure("cifar10_jpg") / "cifar10-jpg.tar.gz"
    path = Path(path)
    file = cache.path("cifar10_jpg", archives.file_digests(path, md5=False)["sha256"][:20])
    fields = ("train_x", "train_y", "test_x", "test_y")
    arrays = cache.load(file, fields)
    if arrays is None:
        arrays = _decode_jpeg_tar(path)
        cache.save(file, arrays)
    return ImageArrays("cifar10", *(arrays[f] for f in fields), CIFAR10_CLASSES, LOSSY_JPEG, str(path))


def cifar10(allow_lossy: bool = True) -> ImageArrays:
    """CIFAR-10: the official batches when they can be had, else (if ``allow_lossy``) the lossy
    JPEG copy, labelled by ``variant``. Never downloads (``data fetch cifar10`` does)."""
    if store.is_available("cifar10"):
        return cifar10_official()
    if allow_lossy and store.is_available("cifar10_jpg"):
        return cifar10_jpeg()
    raise ReplicateError("cifar10: the official python batches are not staged; run "
                         f"`{store.fetch_command('cifar10')}`"
                         + ("" if allow_lossy else " (the lossy JPEG copy was not allowed)"))
