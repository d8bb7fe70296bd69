"""FedProx's class-skewed letter sets: the draft's EMNIST* and the final (MLSys) FEMNIST.

Both follow FedProx ``data/nist/data/my_sample.py`` (spec
``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §1(c)): devices get a few letter classes
each and lognormal sizes. The letters come from LEAF FEMNIST (:func:`~replicate.data.leaf.femnist_arrays`,
the partial offline copy by default) or, with ``images="tff"``, from TFF's complete federated
EMNIST-62 (:mod:`replicate.data.emnist_tff`; same labels, same pixel convention).
"""
from __future__ import annotations

import numpy as np
import torch

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.core.checks import check_positive_int, check_seed
from replicate.data.federated import FederatedDataset, Split
from replicate.data.emnist_tff import emnist_arrays
from replicate.data.leaf import IMAGE_SHAPE, LOWER_A, data_generator, femnist_arrays, unpack_pixels


def _letters(root, first: int, count: int, images: str = "leaf") -> list[np.ndarray]:
    """Images of LEAF labels first..first+count-1 from every user of both splits, per class:
    from LEAF FEMNIST (``images="leaf"``) or TFF's EMNIST-62 (``"tff"``, same labels and pixels)."""
    if images == "tff":
        parts = emnist_arrays(root)
    elif images == "leaf":
        parts = femnist_arrays(root)
    else:
        raise ReplicateError(f"images must be 'leaf' or 'tff', got {images!r}")
    x = np.concatenate([a.x for a in parts])
    y = np.concatenate([a.y for a in parts])
    return [unpack_pixels(x[y == first + c]) for c in range(count)]


_TFF_IMAGES = ("images from TFF's federated EMNIST-62 (LEAF's by-writer EMNIST, all 3,400 writers, "
               "both splits) instead of {what}")


def class_skewed(pools: list[np.ndarray], num_devices: int, classes_per_device: int,
                 sigma: float, train_fraction: float, seed: int, dataset: str):
    """FedProx ``data/nist/data/my_sample.py`` recipe (spec §1(c)) over per-class ``pools``.

    Device u draws s_u = lognormal(4, σ) + 5 and takes ``max(2, int(s_u / C))`` images of
    each class (u + j) mod len(pools), j < C = ``classes_per_device``. Each class is read
    cyclically through one random permutation of its pool, so an image repeats only after
    its whole pool has been used. The reference resets its read index, so almost every user
    gets the same first images. Each device's samples are shuffled, and the first
    ``int(train_fraction·n)`` are for training. Returns (train xs, train ys, test xs,
    test ys, distinct images used).
    """
    check_positive_int("num_devices", num_devices)
    if not 0 < classes_per_device <= len(pools):
        raise ReplicateError(f"classes_per_device must be in 1..{len(pools)}, got {classes_per_device!r}")
    if not 0 < train_fraction < 1:
        raise ReplicateError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    check_seed(seed)
    if any(len(p) == 0 for p in pools):
        raise ReplicateError(f"{dataset}: some class has no images in the source data")
    sizes = torch.empty(num_devices, dtype=torch.float64).log_normal_(
        4.0, sigma, generator=data_generator(seed, dataset, "sizes")) + 5
    order_g, split_g = data_generator(seed, dataset, "order"), data_generator(seed, dataset, "split")
    orders = [torch.randperm(len(p), generator=order_g).numpy() for p in pools]
    cursor = np.zeros(len(pools), dtype=np.int64)
    used = [set() for _ in pools]
    out = ([], [], [], [])
    for u in range(num_devices):
        per_class = max(2, int(float(sizes[u]) / classes_per_device))
        xs, ys = [], []
        for j in range(classes_per_device):
            c = (u + j) % len(pools)
            picks = orders[c][(cursor[c] + np.arange(per_class)) % len(pools[c])]
            cursor[c] += per_class
            used[c].update(picks.tolist())
            xs.append(pools[c][picks])
            ys.append(np.full(per_class, c, dtype=np.int64))
        x, y = np.concatenate(xs), np.concatenate(ys)
        perm = torch.randperm(len(y), generator=split_g).numpy()
        cut = int(train_fraction * len(y))
        for part, rows in ((0, perm[:cut]), (2, perm[cut:])):
            out[part].append(x[rows].reshape(len(rows), *IMAGE_SHAPE))
            out[part + 1].append(y[rows])
    return (*out, sum(len(s) for s in used))


def _skewed_dataset(name, root, images, first, count, num_devices, classes_per_device, sigma, seed,
                    train_fraction, meta) -> FederatedDataset:
    pools = _letters(root, first, count, images)
    tr_x, tr_y, te_x, te_y, distinct = class_skewed(pools, num_devices, classes_per_device, sigma,
                                                    train_fraction, seed, name)
    meta = {**meta, "seeds": {"partition": seed}, "distinct_images": distinct,
            "pool_images": int(sum(len(p) for p in pools))}
    return FederatedDataset(name, Split.from_clients(tr_x, tr_y), Split.from_clients(te_x, te_y),
                            count, meta)


# The reference draws are unseeded. As for MNIST, each default is the seed in 0..199 whose
# device sizes best fit the paper's table (smallest |total − paper|/paper + |std − paper|/paper).
EMNIST_STAR_SEED = 111
FEMNIST_FEDPROX_SEED = 15


@builder("emnist_star", reads=("femnist",))
def emnist_star(seed: int = EMNIST_STAR_SEED, num_devices: int = 200, classes_per_device: int = 20,
                train_fraction: float = 0.9, root: str | None = None, images: str = "leaf") -> FederatedDataset:
    """The FedProx draft's EMNIST* (App. C.1): the 26 lower-case letters, 20 classes per
    device and 200 devices. LEAF labels 36..61 map to 0..25.

    The draft's code is not available. This follows the spec's PROPOSED recipe (§1(c)):
    :func:`class_skewed` with σ = 2, 20 classes per device and a 90/10 split as in
    ``my_sample.py`` (the draft text says 80/20). Draft Table 1 lists 200 devices, 79,059
    samples, mean 395 and std 873.

    Statistics count train + test (devices / samples / mean / std). The default seed 111
    gives 200 / 71,620 / 358.1 / 823.6. Over seeds 0..199 the median is 71,810 / 359 /
    1,135, with totals from 37,680 to 286,640 because lognormal(4, 2) is heavy-tailed. The
    local pool has 3,062 lower-case images (about 118 per letter), so most samples repeat
    an image. ``meta["distinct_images"]`` counts the images actually used. ``images="tff"``
    draws the letters from TFF's complete EMNIST-62 instead (store entry ``emnist_tff``).
    """
    local = ("images from the partial local LEAF FEMNIST (all 184 writers, both splits): about "
             "118 per letter, so large devices reuse them")
    return _skewed_dataset("emnist_star", root, images, LOWER_A, 26, num_devices, classes_per_device, 2.0,
                           seed, train_fraction, {
        "paper": "FedProx draft App. C.1, Table 1 (EMNIST*)",
        "procedure": "spec §1(c) PROPOSED: my_sample.py recipe, 26 classes, 20 per device, lognormal(4, 2) + 5",
        "deviations": [
            "draft code unavailable; recipe proposed by the spec",
            _TFF_IMAGES.format(what="the draft's LEAF FEMNIST") if images == "tff" else local,
            "classes read cyclically instead of the reference's index reset",
            "90/10 split per my_sample.py (the draft text says 80/20)"]})


@builder("femnist_fedprox", reads=("femnist",))
def femnist_fedprox(seed: int = FEMNIST_FEDPROX_SEED, root: str | None = None,
                    images: str = "leaf") -> FederatedDataset:
    """FedProx final (MLSys) FEMNIST, from ``data/nist/data/my_sample.py`` (spec §1(c)): lower-case
    a–j (LEAF 36..45 → 0..9), 200 devices, 3 classes each, size lognormal(4, 1) + 5, split
    90/10. The README lists 200 devices, 18,345 samples, mean 92 and std 159.

    The default seed 15 gives 200 / 19,050 / 95.3 / 155.3. Over seeds 0..199 the median is
    18,480 / 92.4 / 108.9. The local pool has 1,215 images of a–j. ``images="tff"`` draws them
    from TFF's complete EMNIST-62 instead (store entry ``emnist_tff``).
    """
    local = ("images from the partial local LEAF FEMNIST (about 120 per class) instead of 4,000 "
             "per class from the raw NIST by_class PNGs")
    return _skewed_dataset("femnist_fedprox", root, images, LOWER_A, 10, 200, 3, 1.0, seed, 0.9, {
        "paper": "FedProx final README / MLSys (FEMNIST)",
        "procedure": "FedProx data/nist/data/my_sample.py (spec §1(c))",
        "deviations": [
            _TFF_IMAGES.format(what="4,000 per class from the raw NIST by_class PNGs")
            if images == "tff" else local,
            "classes read cyclically instead of the reference's index reset, which gives "
            "almost every user the same first images",
            "10 outputs; the reference model (nist.mclr) has 26"]})


@builder("emnist_star_tff", reads=("emnist_tff",))
def emnist_star_tff(seed: int = EMNIST_STAR_SEED, num_devices: int = 200, classes_per_device: int = 20,
                    train_fraction: float = 0.9, root: str | None = None) -> FederatedDataset:
    """:func:`emnist_star` with the letters of TFF's complete EMNIST-62 (the official data; store ``emnist_tff``)."""
    return emnist_star(seed, num_devices, classes_per_device, train_fraction, root, images="tff")


@builder("femnist_fedprox_tff", reads=("emnist_tff",))
def femnist_fedprox_tff(seed: int = FEMNIST_FEDPROX_SEED, root: str | None = None) -> FederatedDataset:
    """:func:`femnist_fedprox` with the letters of TFF's complete EMNIST-62 (the official data; store
    ``emnist_tff``)."""
    return femnist_fedprox(seed, root, images="tff")
