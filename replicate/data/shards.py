"""Class-shard partitions of the STEM experiments (Khanduri et al. 2021 §4; spec STEM §6.2-§6.3):
MNIST (Figure 5) and CIFAR-10 (Figures 2-4).

K = 100 workers (INFERRED: the only round K that reproduces every per-worker count the paper
prints), disjoint data. Per split and class y the class's indices are shuffled with the seed and
cut into 100 shards of s = ⌊(n_min − 1)/100⌋ samples, n_min the split's smallest class count
(MNIST: 54 train / 8 test; CIFAR-10: 49 / 9; the rest is dropped). PROPOSED procedure, exact counts:

- ``moderate``: worker k takes shard k of every class — 10 classes, 540 train / 80 test (CIFAR-10:
  490 / 90);
- ``high``: worker k holds the classes C_k = {(k + j) mod 10 : j = 0..4}, each class held by 50
  workers; the m-th holder of y (in worker order) takes y's shards 2m and 2m + 1 — 5 classes,
  540 train / 80 test (CIFAR-10: 490 / 90; its test set from the same 5 classes).

MNIST images are x/255 standardised with MNIST's mean 0.1307 and std 0.3081, kept as (1, 28, 28);
CIFAR-10 images x/255 per channel with the spec's mean (0.4914, 0.4822, 0.4465) and std (0.247,
0.243, 0.261), as (3, 32, 32) (channels first). CIFAR-10 comes from the official batches
(``cifar10_stem_*``) or the lossy JPEG copy (``cifar10_jpg_stem_*``: the name, ``meta["variant"]``
and ``meta["deviations"]`` say so); :func:`cifar10_stem_name` picks the official one when it can be had.
"""
from __future__ import annotations

import numpy as np

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.core.checks import check_seed
from replicate.data.cifar import LOSSY_JPEG, OFFICIAL
from replicate.data.federated import FederatedDataset, Split

HETEROGENEITY = ("moderate", "high")
WORKERS = 100  # K, INFERRED (spec §6.2)
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)  # spec §6.3 step 4


def class_shards(labels: np.ndarray, heterogeneity: str, seed: int, stream: int,
                 workers: int = WORKERS, classes: int = 10) -> list[np.ndarray]:
    """Each worker's sample indices (spec §6.3); ``stream`` separates the train and test draws."""
    if heterogeneity not in HETEROGENEITY:
        raise ReplicateError(f"heterogeneity must be one of {', '.join(HETEROGENEITY)}, got {heterogeneity!r}")
    check_seed(seed)
    rng = np.random.default_rng([seed, stream])
    by_class = [rng.permutation(np.flatnonzero(labels == y)) for y in range(classes)]
    size = (min(len(v) for v in by_class) - 1) // workers  # s = ⌊(n_min − 1)/K⌋
    if size < 1:
        raise ReplicateError(f"too few samples per class ({min(len(v) for v in by_class)}) for {workers} shards")
    shards = [v[:size * workers].reshape(workers, size) for v in by_class]
    if heterogeneity == "moderate":
        return [np.concatenate([shards[y][k] for y in range(classes)]) for k in range(workers)]
    held = classes // 2
    holders = [[k for k in range(workers) if (y - k) % classes < held] for y in range(classes)]
    parts = []
    for k in range(workers):
        mine = [(k + j) % classes for j in range(held)]
        parts.append(np.concatenate([shards[y][2 * holders[y].index(k) + i] for y in sorted(mine) for i in (0, 1)]))
    return parts


def _check_workers(num_clients: int) -> None:
    if not 1 <= num_clients <= WORKERS:
        raise ReplicateError(f"num_clients must be between 1 and {WORKERS}, got {num_clients}")


def _mnist_features(images: np.ndarray) -> np.ndarray:
    """uint8 images → float32 (x/255 − mean)/std, in place after one converting copy (bitwise the plain formula)."""
    x = images.astype(np.float32)
    x /= np.float32(255.0)
    x -= np.float32(MNIST_MEAN)
    x /= np.float32(MNIST_STD)
    return x


def _cifar_features(images: np.ndarray) -> np.ndarray:
    """(n, 32, 32, 3) uint8 → (n, 3, 32, 32) float32, C-contiguous, standardised per channel. In place after one
    converting copy: the same float32 operations element by element as ``(x/255 − mean)/std`` (bitwise), without
    three 600 MB temporaries and the strided copy a transposed result costs when flattened (2.5× faster)."""
    x = images.transpose(0, 3, 1, 2).astype(np.float32, order="C")
    x /= np.float32(255.0)
    x -= np.float32(CIFAR_MEAN)[:, None, None]
    x /= np.float32(CIFAR_STD)[:, None, None]
    return x


def _split(images: np.ndarray, labels: np.ndarray, parts: list[np.ndarray], features=_mnist_features) -> Split:
    order = np.concatenate(parts)
    x = features(images[order])
    return Split.from_arrays(x.reshape(len(order), -1), labels[order].astype(np.int64), [len(p) for p in parts])


@builder("mnist_stem_high", reads=("mnist",))
def mnist_stem_high(seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """STEM's MNIST at high heterogeneity (5 classes per worker): Figure 5's data."""
    return mnist_stem("high", seed, num_clients)


@builder("mnist_stem_moderate", reads=("mnist",))
def mnist_stem_moderate(seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """STEM's MNIST at moderate heterogeneity (every class at every worker)."""
    return mnist_stem("moderate", seed, num_clients)


@builder("mnist_stem", reads=("mnist",))
def mnist_stem(heterogeneity: str = "high", seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """STEM's MNIST: 100 workers × 540 train / 80 test images (5 classes each at ``high``).
    ``num_clients`` < 100 keeps the first workers of the same 100-worker partition (smoke scale)."""
    from replicate.data.mnist import load_mnist

    _check_workers(num_clients)
    m = load_mnist()
    train = class_shards(m.train_labels, heterogeneity, seed, stream=0)[:num_clients]
    test = class_shards(m.test_labels, heterogeneity, seed, stream=1)[:num_clients]
    return FederatedDataset(
        name=f"mnist_stem_{heterogeneity}",
        train=_split(m.train_images, m.train_labels, train),
        test=_split(m.test_images, m.test_labels, test),
        num_classes=10,
        meta={"paper": "Khanduri et al. 2021, §4 (MNIST, Figure 5)", "image_shape": (1, 28, 28),
              "procedure": "class shards, spec STEM §6.3 (PROPOSED; reproduces 540 / 80 per worker)",
              "features": f"(x/255 − {MNIST_MEAN}) / {MNIST_STD}", "seeds": {"partition": seed},
              "deviations": ["K = 100 INFERRED from the per-worker counts; the shard procedure is PROPOSED"]},
    )


@builder("cifar10_stem_high", reads=("cifar10",))
def cifar10_stem_high(seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """STEM's CIFAR-10 (official batches) at high heterogeneity (5 classes per worker): Figure 4's data."""
    return cifar10_stem("high", seed, num_clients, OFFICIAL)


@builder("cifar10_stem_moderate", reads=("cifar10",))
def cifar10_stem_moderate(seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """STEM's CIFAR-10 (official batches) at moderate heterogeneity (all classes): Figures 2 and 3."""
    return cifar10_stem("moderate", seed, num_clients, OFFICIAL)


@builder("cifar10_jpg_stem_high", reads=("cifar10_jpg",))
def cifar10_jpg_stem_high(seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """As :func:`cifar10_stem_high`, from the LOSSY JPEG copy."""
    return cifar10_stem("high", seed, num_clients, LOSSY_JPEG)


@builder("cifar10_jpg_stem_moderate", reads=("cifar10_jpg",))
def cifar10_jpg_stem_moderate(seed: int = 0, num_clients: int = WORKERS) -> FederatedDataset:
    """As :func:`cifar10_stem_moderate`, from the LOSSY JPEG copy."""
    return cifar10_stem("moderate", seed, num_clients, LOSSY_JPEG)


def cifar10_stem_name(heterogeneity: str) -> str:
    """The loader name a figure uses: the official batches when they can be had, else the lossy JPEG
    copy. The two have different names, so their runs are never mixed in the run cache."""
    from replicate.data import store

    return f"cifar10_stem_{heterogeneity}" if store.is_available("cifar10") else f"cifar10_jpg_stem_{heterogeneity}"


def cifar10_stem(heterogeneity: str = "moderate", seed: int = 0, num_clients: int = WORKERS,
                 variant: str = OFFICIAL) -> FederatedDataset:
    """STEM's CIFAR-10: 100 workers × 490 train / 90 test images (5 classes each at ``high``), from the
    official batches or the lossy JPEG copy (``variant``; labelled in the name and ``meta``).
    ``num_clients`` < 100 keeps the first workers of the same 100-worker partition (smoke scale)."""
    from replicate.data.cifar import cifar10_jpeg, cifar10_official

    _check_workers(num_clients)
    if variant not in (OFFICIAL, LOSSY_JPEG):
        raise ReplicateError(f"variant must be {OFFICIAL!r} or {LOSSY_JPEG!r}, got {variant!r}")
    c = cifar10_official() if variant == OFFICIAL else cifar10_jpeg()
    train = class_shards(c.train_y, heterogeneity, seed, stream=0)[:num_clients]
    test = class_shards(c.test_y, heterogeneity, seed, stream=1)[:num_clients]
    deviations = ["K = 100 INFERRED from the per-worker counts; the shard procedure is PROPOSED"]
    if c.lossy:
        deviations.append(f"CIFAR-10 from the {c.variant} copy (JPEG quality ~75), not the official batches")
    return FederatedDataset(
        name=f"cifar10{'_jpg' if c.lossy else ''}_stem_{heterogeneity}",
        train=_split(c.train_x, c.train_y, train, _cifar_features),
        test=_split(c.test_x, c.test_y, test, _cifar_features),
        num_classes=10,
        meta={"paper": "Khanduri et al. 2021, §4 (CIFAR-10, Figures 2-4)", "image_shape": (3, 32, 32),
              "procedure": "class shards, spec STEM §6.3 (PROPOSED; reproduces 490 / 90 per worker)",
              "features": f"(x/255 − {CIFAR_MEAN}) / {CIFAR_STD} per channel", "seeds": {"partition": seed},
              "variant": c.variant, "lossy": c.lossy, "source": c.source, "deviations": deviations},
    )
