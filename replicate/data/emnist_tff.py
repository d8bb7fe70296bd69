"""TensorFlow Federated's federated EMNIST-62 (``fed_emnist.tar.bz2``; store entry ``emnist_tff``):
the data of Charles & Konečný's FEMNIST experiments and Table 3, one client per writer.

TFF builds it from LEAF's by-writer EMNIST and splits each writer's examples into train and test
(``tff.simulation.datasets.emnist.load_data(only_digits=False)``: 3,400 writers, 671,585 train
and 77,483 test examples). The two HDF5 files hold ``/examples/<writer>/pixels`` ((n, 28, 28)
float32 in [0, 1]) and ``/examples/<writer>/label`` ((n,) integers: 0–9 digits, 10–35 upper
case, 36–61 lower case, LEAF's labels).

Pixels: TFF's documentation says 1.0 is the background and 0.0 the ink, the inverse of MNIST.
LEAF's FEMNIST JSON has the same convention (a train file of the offline LEAF copy has median
pixel 1.0, a white background), so the two sources are interchangeable for the same model and
nothing is inverted here.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.data import cache, store
from replicate.data.federated import FederatedDataset, offsets_of
from replicate.data.leaf import (FEMNIST_CLASSES, IMAGE_SHAPE, LeafArrays, data_generator, leaf_dataset, pack_pixels,
                                 select_users, unpack_pixels)

_FILES = {"train": "fed_emnist_train.h5", "test": "fed_emnist_test.h5"}
_CACHE_VERSION = 1


def read_clients(path: str | os.PathLike) -> LeafArrays:
    """Every writer of one TFF EMNIST HDF5 file, in the file's order, pixels flattened to 784
    and packed as uint8 where exact (see :func:`~replicate.data.leaf.pack_pixels`)."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is in requirements.txt
        raise ReplicateError("reading TFF's HDF5 files needs h5py: pip install h5py") from None
    users, xs, ys = [], [], []
    try:
        with h5py.File(path, "r") as f:
            for writer, group in f["examples"].items():
                pixels = np.asarray(group["pixels"][()], dtype=np.float32)
                labels = np.asarray(group["label"][()]).reshape(-1).astype(np.int64)
                if pixels.shape[1:] != (28, 28) or len(pixels) != len(labels):
                    raise ReplicateError(f"{path}: writer {writer!r} has pixels {pixels.shape} and "
                                         f"{len(labels)} labels; expected (n, 28, 28) and n")
                if labels.size and (labels.min() < 0 or labels.max() >= FEMNIST_CLASSES):
                    raise ReplicateError(f"{path}: writer {writer!r} has labels outside 0..61")
                users.append(writer)
                xs.append(pack_pixels(pixels.reshape(len(pixels), 28 * 28)))
                ys.append(labels)
    except (OSError, KeyError) as exc:
        raise ReplicateError(f"{path} is not a TFF EMNIST file (/examples/<writer>/pixels, label): {exc}") from None
    packed = all(x.dtype == np.uint8 for x in xs)
    x = np.concatenate(xs if packed else [unpack_pixels(x) for x in xs]) if xs else np.zeros((0, 784), np.uint8)
    return LeafArrays(tuple(users), x, np.concatenate(ys) if ys else np.zeros(0, np.int64),
                      offsets_of([len(y) for y in ys]))


def emnist_arrays(root: str | os.PathLike | None = None) -> tuple[LeafArrays, LeafArrays]:
    """Train and test writers, pixels as stored (uint8 k for k/255, else float32); parsed once
    and cached in ``data_dir()/cache`` keyed by the files' names, sizes and mtimes."""
    folder = Path(root) if root is not None else store.ensure("emnist_tff")
    files = [folder / _FILES[s] for s in ("train", "test")]
    for file in files:
        if not file.is_file():
            raise ReplicateError(f"{file} does not exist; TFF's archive fed_emnist.tar.bz2 holds "
                                 f"{' and '.join(_FILES.values())}")
    key = hashlib.sha256(repr((_CACHE_VERSION, [(f.name, f.stat().st_size, f.stat().st_mtime_ns)
                                                for f in files])).encode()).hexdigest()[:20]
    file = cache.path("emnist_tff", key)
    fields = tuple(f"{s}_{f}" for s in ("train", "test") for f in ("users", "x", "y", "offsets"))
    z = cache.load(file, fields)
    if z is not None:
        return tuple(LeafArrays(tuple(z[f"{s}_users"].tolist()), z[f"{s}_x"], z[f"{s}_y"], z[f"{s}_offsets"])
                     for s in ("train", "test"))
    parts = tuple(read_clients(path) for path in files)
    cache.save(file, {f"{s}_{field}": value for s, a in zip(("train", "test"), parts)
                      for field, value in (("users", np.array(a.users, dtype=str)), ("x", a.x),
                                           ("y", a.y), ("offsets", a.offsets))})
    return parts


@builder("emnist_tff", reads=("emnist_tff",))
def emnist_tff(root: str | None = None, num_clients: int | None = None) -> FederatedDataset:
    """TFF's federated EMNIST-62 with one client per writer and inputs (1, 28, 28) float32 in
    [0, 1] (background 1.0). ``num_clients`` keeps the first writers only (smoke runs)."""
    train, test = (LeafArrays(a.users, unpack_pixels(a.x), a.y, a.offsets) for a in emnist_arrays(root))
    data = leaf_dataset("emnist_tff", train, test, FEMNIST_CLASSES, {
        "paper": "Charles & Konečný 2021, FEMNIST experiments and Table 3 (TFF EMNIST-62, 3,400 writers)",
        "source": "TFF fed_emnist HDF5" + (f" in {root}" if root else " (store: emnist_tff)"),
        "features": "TFF pixels in [0, 1], background 1.0 (as LEAF), shape (1, 28, 28)",
        "deviations": [],
    }, IMAGE_SHAPE)
    return data if num_clients is None else data.first(num_clients)


DRAFT_WRITERS = 900  # the FedProx draft's EMNIST: Table 1 lists 900 devices (305,654 samples)


@builder("emnist_draft_tff", reads=("emnist_tff",))
def emnist_draft_tff(seed: int = 0, num_writers: int = DRAFT_WRITERS, root: str | None = None,
                     num_clients: int | None = None) -> FederatedDataset:
    """The FedProx draft's EMNIST (§5.1, Table 1: 900 devices, 305,654 samples) from TFF's EMNIST-62: a seeded
    draw of ``num_writers`` writers, each with TFF's own train and test images (spec §1(c) PROPOSED: LEAF's
    user sampling; the draft's arguments are unpublished). 900 of TFF's writers hold ≈ 198k images, not the
    draft's 305,654: LEAF's writers are NIST's, TFF's are the ones it kept."""
    train, test = (LeafArrays(a.users, unpack_pixels(a.x), a.y, a.offsets) for a in emnist_arrays(root))
    if not 1 <= num_writers <= len(train.users):
        raise ReplicateError(f"emnist_draft_tff: num_writers must be between 1 and {len(train.users)}, "
                             f"got {num_writers}")
    drawn = torch.randperm(len(train.users), generator=data_generator(seed, "emnist_draft_tff", "writers"))
    keep = sorted(drawn[:num_writers].tolist())  # in the file's order
    chosen = {train.users[k] for k in keep}

    def subset(a: LeafArrays) -> LeafArrays:
        return select_users(a, [k for k, u in enumerate(a.users) if u in chosen])

    data = leaf_dataset("emnist_draft_tff", subset(train), subset(test), FEMNIST_CLASSES, {
        "paper": "FedProx draft §5.1, Table 1 (EMNIST: 900 devices)",
        "source": "TFF fed_emnist HDF5" + (f" in {root}" if root else " (store: emnist_tff)"),
        "procedure": f"spec §1(c) PROPOSED: a seeded draw of {num_writers} of TFF EMNIST-62's 3,400 writers",
        "seeds": {"writers": seed},
        "deviations": ["the draft's sampling of LEAF's NIST writers is unpublished: a seeded draw of TFF's "
                       "writers, with TFF's per-writer train/test split"],
    }, IMAGE_SHAPE)
    return data if num_clients is None else data.first(num_clients)
