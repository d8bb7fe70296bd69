"""LEAF-format federated data (Caldas et al., 2018) and the FedProx image sets built on it.

A LEAF release is a folder with ``train/`` and ``test/`` sub-folders of JSON files
``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``
(LEAF ``utils/split_data.py``; FedProx ``flearn/utils/model_utils.read_data`` reads the same
layout). :func:`load_leaf` merges each split's files and keeps the users present in both
splits, one client per user; how many users and samples were dropped is in
``meta["dropped"]``. The LEAF pipeline steps that FedProx applies to a user table
(spec ``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §1(c)) are :func:`niid_sample` and
:func:`split_by_sample`.

Image builders (FedProx draft §5.1, App. C.1, Table 1; spec §1(c)):

- :func:`femnist`: the draft's "EMNIST", with one device per writer and 62 classes.
- :mod:`replicate.data.letters`: the draft's EMNIST* (26 lower-case letters, 20 per device,
  200 devices) and the final (MLSys) FEMNIST (letters a–j, 3 per device, 200 devices).

Only part of FEMNIST is stored locally (``shared/data/femnist-leaf``: LEAF
``-s niid --sf 0.05 -k 0 -t sample --tf 0.9``). Just 20 of the 35 train files are
present, so 105 writers have both splits (14,708 train / 1,685 test samples). Another 79
writers appear only in test files. The full LEAF FEMNIST has about 3,500 writers. Pass
``root=DIR`` to load a complete release. No host serves LEAF's output and this package does not
run LEAF's NIST SD19 pipeline (several GB); TFF's complete by-writer EMNIST-62 is
:mod:`replicate.data.emnist_tff`.

Random draws come from :func:`data_generator`, one named stream per step.
"""
from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from replicate.data.registry import builder
from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.data import cache, store
from replicate.data.federated import FederatedDataset, Split, offsets_of

FEMNIST_CLASSES = 62  # LEAF relabel_class: 0-9 digits, 10-35 upper case, 36-61 lower case
LOWER_A = 36  # LEAF label of 'a'
IMAGE_SHAPE = (1, 28, 28)
_KEYS = ("users", "num_samples", "user_data")
_CACHE_VERSION = 1
_PIXELS = (np.arange(256) / 255).astype(np.float32)  # LEAF stores uint8 / 255


def data_generator(seed: int, dataset: str, step: str) -> torch.Generator:
    """Stream for one step of building ``dataset``.

    This is ``rng.generator(seed, "sampling", 0, crc32(dataset), crc32(step))``. The role is
    "sampling", after LEAF's own ``sample.py``. The two extra entropy words keep it apart
    from the per-round client sampling ``generator(seed, "sampling", round)``.
    """
    return rng.generator(seed, "sampling", 0, zlib.crc32(dataset.encode()), zlib.crc32(step.encode()))


# ---- reading -----------------------------------------------------------------------------

@dataclass(frozen=True)
class LeafUser:
    """One user's raw lists as stored, and the file they came from (for error messages)."""

    x: list
    y: list
    file: Path


def _read_file(path: Path):
    try:
        with open(path, "rb") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReplicateError(f"{path}: not a readable LEAF JSON file ({exc})") from None
    missing = [k for k in _KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise ReplicateError(f"{path}: missing key {', '.join(map(repr, missing))}; a LEAF file "
                             f"holds 'users', 'num_samples' and 'user_data'")
    names, counts, table = data["users"], data["num_samples"], data["user_data"]
    if not (isinstance(names, list) and isinstance(counts, list) and isinstance(table, dict)
            and len(names) == len(counts)):
        raise ReplicateError(f"{path}: 'users' and 'num_samples' must be lists of equal length "
                             f"and 'user_data' an object")
    for name, count in zip(names, counts):
        record = table.get(name)
        if not (isinstance(record, dict) and isinstance(record.get("x"), list)
                and isinstance(record.get("y"), list)):
            raise ReplicateError(f"{path}: user {name!r} has no 'x' and 'y' lists in 'user_data'")
        if not len(record["x"]) == len(record["y"]) == count:
            raise ReplicateError(f"{path}: user {name!r} has {len(record['x'])} inputs and "
                                 f"{len(record['y'])} labels but num_samples {count}")
        yield name, LeafUser(record["x"], record["y"], path)


def _split_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise ReplicateError(f"{folder} does not exist; a LEAF dataset folder holds train/ and "
                             f"test/ folders of JSON files")
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ReplicateError(f"{folder} holds no .json files")
    return files


def read_leaf_split(folder: str | os.PathLike) -> dict[str, LeafUser]:
    """Merge every ``*.json`` of ``folder`` (sorted by name) into ``{user: LeafUser}``,
    keeping file order, then user order within each file."""
    users: dict[str, LeafUser] = {}
    for path in _split_files(Path(folder)):
        for name, user in _read_file(path):
            if name in users:
                raise ReplicateError(f"{path}: user {name!r} is also in {users[name].file}; "
                                     f"a LEAF split lists each user once")
            users[name] = user
    return users


@dataclass(frozen=True)
class LeafArrays:
    """One split's users as arrays; user k owns rows ``offsets[k]:offsets[k+1]``."""

    users: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray  # int64
    offsets: np.ndarray  # int64, len(users) + 1


def to_arrays(users: dict[str, LeafUser], features: Callable[[list], np.ndarray],
              num_classes: int) -> LeafArrays:
    """Convert each user's ``x`` with ``features`` and check that its labels are integers in
    ``[0, num_classes)``."""
    xs, ys = [], []
    for name, user in users.items():
        try:
            x = features(user.x)
            y = np.asarray(user.y, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise ReplicateError(f"{user.file}: data of user {name!r} is malformed ({exc})") from None
        if len(x) != len(y) or (y.size and (np.any(y != np.round(y)) or y.min() < 0
                                            or y.max() >= num_classes)):
            raise ReplicateError(f"{user.file}: user {name!r} needs one integer label in "
                                 f"[0, {num_classes}) per input")
        if xs and x.shape[1:] != xs[0].shape[1:]:
            raise ReplicateError(f"{user.file}: user {name!r} has inputs of shape {x.shape[1:]}, "
                                 f"earlier users {xs[0].shape[1:]}")
        xs.append(x)
        ys.append(y.astype(np.int64))
    x = np.concatenate(xs) if xs else np.zeros((0,), np.float32)
    return LeafArrays(tuple(users), x, np.concatenate(ys) if ys else np.zeros(0, np.int64),
                      offsets_of([len(y) for y in ys]))


def select_users(a: LeafArrays, keep: list[int]) -> LeafArrays:
    """The users at indices ``keep`` of ``a``, in that order, with their samples."""
    rows = np.concatenate([np.arange(a.offsets[k], a.offsets[k + 1]) for k in keep] or [np.zeros(0, int)])
    return LeafArrays(tuple(a.users[k] for k in keep), a.x[rows], a.y[rows],
                      offsets_of([a.offsets[k + 1] - a.offsets[k] for k in keep]))


def _gather(a: LeafArrays, keep: list[int], shape: tuple[int, ...] | None) -> Split:
    part = select_users(a, keep)
    x = part.x if shape is None else part.x.reshape(len(part.y), *shape)
    return Split(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(part.y), torch.from_numpy(part.offsets))


def leaf_dataset(name: str, train: LeafArrays, test: LeafArrays, num_classes: int,
                 meta: dict | None = None, shape: tuple[int, ...] | None = None) -> FederatedDataset:
    """One client per user present in both splits, in train order. Users found in only one
    split are dropped and counted in ``meta["dropped"]``. If ``shape`` is given, inputs are
    reshaped to ``(n, *shape)``."""
    test_index = {u: k for k, u in enumerate(test.users)}
    keep = [k for k, u in enumerate(train.users) if u in test_index]
    if not keep:
        raise ReplicateError(f"{name}: no user appears in both the train and the test files")
    kept = {train.users[k] for k in keep}

    def _lost(a: LeafArrays) -> tuple[int, int]:
        gone = [k for k, u in enumerate(a.users) if u not in kept]
        return len(gone), int(sum(a.offsets[k + 1] - a.offsets[k] for k in gone))

    (tr_users, tr_samples), (te_users, te_samples) = _lost(train), _lost(test)
    return FederatedDataset(
        name=name,
        train=_gather(train, keep, shape),
        test=_gather(test, [test_index[train.users[k]] for k in keep], shape),
        num_classes=num_classes,
        meta={"users": tuple(train.users[k] for k in keep),
              "dropped": {"train_only_users": tr_users, "train_only_samples": tr_samples,
                          "test_only_users": te_users, "test_only_samples": te_samples},
              **(meta or {})},
    )


def load_leaf(root: str | os.PathLike, name: str, num_classes: int,
              features: Callable[[list], np.ndarray] = lambda x: np.asarray(x, np.float32),
              shape: tuple[int, ...] | None = None) -> FederatedDataset:
    """The LEAF release in ``root`` (``train/`` + ``test/``) as a :class:`FederatedDataset`."""
    root = Path(root)
    train = to_arrays(read_leaf_split(root / "train"), features, num_classes)
    test = to_arrays(read_leaf_split(root / "test"), features, num_classes)
    return leaf_dataset(name, train, test, num_classes, {"source": str(root)}, shape)


# ---- LEAF pipeline steps used by FedProx (spec §1(c)) --------------------------------------

def niid_sample(sizes, fraction: float, g: torch.Generator) -> list[tuple[int, int]]:
    """LEAF ``sample.py --niid``: shuffle the users, then take whole users until the running
    total reaches ``int(fraction * total)``. The last user is cut to the remainder (its first
    samples). Returns ``(user index, samples kept)`` pairs in the order they were drawn."""
    if not 0 < fraction <= 1:
        raise ReplicateError(f"fraction must be in (0, 1], got {fraction!r}")
    sizes = [int(n) for n in sizes]
    target, total, chosen = int(fraction * sum(sizes)), 0, []
    for k in torch.randperm(len(sizes), generator=g).tolist():
        if total >= target:
            break
        chosen.append((k, min(sizes[k], target - total)))
        total += chosen[-1][1]
    return chosen


def split_by_sample(n: int, train_fraction: float, g: torch.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """LEAF ``split_data.py --by_sample``: a user with n ≥ 2 samples keeps
    ``max(1, int(train_fraction·n))`` random ones for training (1 when n = 2) and the rest
    for testing. Both parts keep their original order. Returns None when n < 2, because
    LEAF drops such users."""
    if n < 2:
        return None
    n_train = 1 if n == 2 else max(1, int(train_fraction * n))
    chosen = np.zeros(n, dtype=bool)
    chosen[torch.randperm(n, generator=g)[:n_train].numpy()] = True
    return np.flatnonzero(chosen), np.flatnonzero(~chosen)


def sample_and_split(sizes, fraction: float, min_samples: int, train_fraction: float, seed: int, dataset: str):
    """LEAF's ``-s niid --sf fraction -k min_samples -t sample --tf train_fraction`` over users of the given
    sizes: yields ``(user index, samples kept, (train rows, test rows))`` for every user kept, in draw order,
    from the streams (seed, dataset, "sample") and (seed, dataset, "split")."""
    sampled = niid_sample(sizes, fraction, data_generator(seed, dataset, "sample"))
    split_g = data_generator(seed, dataset, "split")
    for k, n in sampled:
        if n <= min_samples:
            continue
        rows = split_by_sample(n, train_fraction, split_g)
        if rows is not None:
            yield k, n, rows


# ---- FEMNIST: parsed once, cached as .npz --------------------------------------------------

def _image_features(x: list) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).reshape(-1, 28 * 28)


def femnist_arrays(root: str | os.PathLike | None = None) -> tuple[LeafArrays, LeafArrays]:
    """FEMNIST's train and test users, all of them, with inputs (n, 784) float32 in [0, 1].

    ``root`` defaults to the verified copy that :func:`store.ensure` stages. The parsed
    arrays are cached in ``settings.current().data/cache`` (:mod:`replicate.data.cache`; a damaged
    cache is reported and rebuilt) and keyed by the JSON files' names, sizes and mtimes.
    Pixels are stored as uint8 when that is lossless, as it is for LEAF's ``uint8 / 255``.
    """
    root = Path(root) if root is not None else store.ensure("femnist")
    files = [f for split in ("train", "test") for f in _split_files(root / split)]
    key = hashlib.sha256(repr((_CACHE_VERSION, [(f.relative_to(root).as_posix(), f.stat().st_size,
                                                 f.stat().st_mtime_ns) for f in files])).encode())
    file = cache.path("femnist", key.hexdigest()[:20])
    fields = tuple(f"{s}_{f}" for s in ("train", "test") for f in ("users", "x", "y", "offsets"))
    z = cache.load(file, fields)
    if z is not None:
        return tuple(LeafArrays(tuple(z[f"{s}_users"].tolist()), unpack_pixels(z[f"{s}_x"]), z[f"{s}_y"],
                                z[f"{s}_offsets"]) for s in ("train", "test"))
    parts = tuple(to_arrays(read_leaf_split(root / s), _image_features, FEMNIST_CLASSES)
                  for s in ("train", "test"))
    cache.save(file, {f"{s}_{field}": value for s, a in zip(("train", "test"), parts)
                      for field, value in (("users", np.array(a.users, dtype=str)), ("x", pack_pixels(a.x)),
                                           ("y", a.y), ("offsets", a.offsets))})
    return parts


def pack_pixels(x: np.ndarray) -> np.ndarray:
    """Pixels k/255 as uint8 k when that is exact (LEAF's and TFF's are), else unchanged."""
    u8 = np.clip(np.rint(x * 255), 0, 255).astype(np.uint8)
    return u8 if np.array_equal(_PIXELS[u8], x) else x


def unpack_pixels(x: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_pixels`: float32 in [0, 1]."""
    return _PIXELS[x] if x.dtype == np.uint8 else x


@builder("femnist", reads=("femnist",))
def femnist(root: str | None = None, num_clients: int | None = None) -> FederatedDataset:
    """The FedProx draft's "EMNIST" (§5.1, App. C.1): LEAF FEMNIST with one device per
    writer, 62 classes and inputs (1, 28, 28) float32 in [0, 1] (LEAF's pixel / 255).

    Draft Table 1 lists 900 devices, 305,654 samples, mean 340 and std 107. Its sampling
    arguments were never published (spec §1(c)). The local partial copy gives the 105
    writers that have both splits: 105 devices, 16,393 samples, mean 156.1 and std 37.2
    (train 14,708, test 1,685). ``meta["dropped"]`` counts the 79 test-only writers
    (2,403 samples). ``num_clients`` keeps only the first writers (in train-file order) of
    those: a smaller federation (smoke runs).
    """
    train, test = femnist_arrays(root)
    data = leaf_dataset("femnist", train, test, FEMNIST_CLASSES, {
        "paper": "FedProx draft §5.1, App. C.1, Table 1 (EMNIST)",
        "source": "LEAF FEMNIST JSON" + (f" in {root}" if root else " (store: femnist)"),
        "features": "LEAF pixel/255 in [0, 1], shape (1, 28, 28)",
        "deviations": [] if root else [
            "partial local copy: 20 of 35 train files, 105 writers with train and test "
            "(paper: 900 devices from the full LEAF FEMNIST with unpublished sampling)"],
    }, IMAGE_SHAPE)
    return data if num_clients is None else data.first(num_clients)
