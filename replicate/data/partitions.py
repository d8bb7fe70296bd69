"""Partitions of a pooled dataset into clients, seeded and described, and :func:`federate`.

``partition.assign(labels, seed)`` gives one sorted int64 index array per client: disjoint, and together
every sample exactly once. The same seed gives the same partition bitwise; the draws come from the
stream named (seed, "partition", round 0), and a redraw takes that stream's next numbers.

- :func:`iid` — a seeded permutation cut into near-equal parts;
- :func:`shards` — McMahan et al. 2017 (AISTATS), §3: sort by label, deal out equal shards;
- :func:`dirichlet` — label skew with concentration α (Hsu, Qi & Brown 2019, §3), split per class as
  Li et al. 2022 (NIID-Bench) and Flower Datasets' ``DirichletPartitioner`` do;
- :func:`quantity_skew` — lognormal client sizes, labels IID (Li et al. 2022 name the skew and draw sizes from a
  Dirichlet; the lognormal is the size law of Synthetic(α, β), :mod:`replicate.data.synthetic`);
- :func:`natural` — the data's own clients (writer, speaker, device), one per distinct group id.

``federate(x, y, partition, seed)`` builds the :class:`FederatedDataset`; :func:`describe` and
:func:`plot_label_heatmap` say what a partition did to the labels.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np
import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.core.checks import check_positive_int, check_seed
from replicate.data.federated import FederatedDataset, Split

MAX_REDRAWS = 1000  # Dirichlet draws tried before a min_size is declared out of reach


def _stream(seed: int) -> np.random.Generator:
    """The (seed, "partition") stream, as numpy draws it (torch has no Dirichlet sampler with a generator)."""
    check_seed(seed)
    return np.random.default_rng(rng.seed_for(seed, "partition"))


def _labels(labels) -> np.ndarray:
    y = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if y.ndim != 1 or y.size == 0:
        raise ReplicateError(f"labels must be a non-empty 1-D array, got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise ReplicateError(f"labels must be integers (class ids), got dtype {y.dtype}; cast them with .astype(int)")
    if y.min() < 0:
        raise ReplicateError(f"labels must be >= 0, got {int(y.min())}; map the classes to 0..C-1")
    return y.astype(np.int64, copy=False)


def _cut(indices: np.ndarray, sizes) -> list[np.ndarray]:
    """``indices`` cut into consecutive parts of ``sizes``, each sorted (a client is a set of samples)."""
    return [np.sort(p).astype(np.int64) for p in np.split(indices, np.cumsum(sizes)[:-1])]


def _check_clients(clients: int, n: int, what: str = "clients") -> None:
    if clients > n:
        raise ReplicateError(f"{clients} {what} need at least {clients} samples, got {n}; use fewer clients")


@dataclass(frozen=True)
class Partition:
    """A rule that assigns every sample to one of ``clients`` clients."""

    name: ClassVar[str] = "partition"

    def assign(self, labels, seed: int) -> list[np.ndarray]:
        """One sorted int64 index array per client: disjoint, together ``range(len(labels))``."""
        raise NotImplementedError

    def spec(self) -> dict:
        """Name and parameters, as plain numbers (what ``federate`` records in ``meta``)."""
        return {"name": self.name, **asdict(self)}


@dataclass(frozen=True)
class IID(Partition):
    """A seeded permutation cut into near-equal parts; the first ``n mod clients`` clients hold one more."""

    clients: int
    name: ClassVar[str] = "iid"

    def __post_init__(self):
        check_positive_int("clients", self.clients)

    def assign(self, labels, seed: int) -> list[np.ndarray]:
        n = len(_labels(labels))
        _check_clients(self.clients, n)
        return [np.sort(p).astype(np.int64) for p in np.array_split(_stream(seed).permutation(n), self.clients)]


@dataclass(frozen=True)
class Shards(Partition):
    """McMahan et al. 2017 §3: sort by label (stable), cut into clients·shards_per_client shards, deal each
    client shards_per_client of them at random. Shards are equal when that product divides n, else their
    sizes differ by at most one (the first ones larger)."""

    clients: int
    shards_per_client: int = 2
    name: ClassVar[str] = "shards"

    def __post_init__(self):
        check_positive_int("clients", self.clients)
        check_positive_int("shards_per_client", self.shards_per_client)

    def assign(self, labels, seed: int) -> list[np.ndarray]:
        y = _labels(labels)
        total = self.clients * self.shards_per_client
        _check_clients(total, len(y), "shards")
        pieces = np.array_split(np.argsort(y, kind="stable"), total)
        dealt = _stream(seed).permutation(total).reshape(self.clients, self.shards_per_client)
        return [np.sort(np.concatenate([pieces[s] for s in row])).astype(np.int64) for row in dealt]


@dataclass(frozen=True)
class Dirichlet(Partition):
    """Label skew: for each class c, q_c ~ Dir(α·1_N) over the N clients, and c's samples (shuffled) are cut
    by q_c's cumulative shares (Hsu et al. 2019 §3 draw q per client over classes; this per-class form is
    Li et al. 2022's and Flower's). α → ∞ approaches equal shares, α → 0 one client per class. The whole
    draw is repeated, from the same stream, until every client holds at least ``min_size`` samples."""

    alpha: float  # α, the concentration
    clients: int
    min_size: int = 1  # at least 1: a client without a sample cannot train (``federate`` refuses one)
    name: ClassVar[str] = "dirichlet"

    def __post_init__(self):
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, numbers.Real) or not (
                math.isfinite(self.alpha) and self.alpha > 0):
            raise ReplicateError(f"alpha must be a finite number > 0, got {self.alpha!r}")
        check_positive_int("clients", self.clients)
        if isinstance(self.min_size, bool) or not isinstance(self.min_size, numbers.Integral) or self.min_size < 0:
            raise ReplicateError(f"min_size must be an integer >= 0, got {self.min_size!r}")

    def assign(self, labels, seed: int) -> list[np.ndarray]:
        y = _labels(labels)
        if self.min_size * self.clients > len(y):
            raise ReplicateError(f"min_size {self.min_size} × {self.clients} clients exceeds the {len(y)} samples; "
                                 "lower min_size or use fewer clients")
        rng = _stream(seed)
        by_class = [np.flatnonzero(y == c) for c in np.unique(y)]
        for _ in range(MAX_REDRAWS):
            parts = [[] for _ in range(self.clients)]
            for members in by_class:
                q = rng.dirichlet(np.full(self.clients, float(self.alpha)))
                cuts = (np.cumsum(q)[:-1] * len(members)).astype(np.int64)
                for k, piece in enumerate(np.split(rng.permutation(members), cuts)):
                    parts[k].append(piece)
            parts = [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]
            if min(len(p) for p in parts) >= self.min_size:
                return parts
        raise ReplicateError(f"no Dirichlet(alpha={self.alpha}) draw in {MAX_REDRAWS} gave every client "
                             f"{self.min_size} samples; lower min_size or raise alpha")


@dataclass(frozen=True)
class QuantitySkew(Partition):
    """Client sizes proportional to lognormal(0, σ) draws, each client at least one sample, the samples
    dealt at random (labels IID). Each client gets 1 + ⌊w_k (n − N)⌋ for normalised draws w, the
    flooring's leftover one each to the largest remainders; σ = 0 gives near-equal sizes."""

    clients: int
    sigma: float = 1.0  # σ of the log-sizes
    name: ClassVar[str] = "quantity_skew"

    def __post_init__(self):
        check_positive_int("clients", self.clients)
        if isinstance(self.sigma, bool) or not isinstance(self.sigma, numbers.Real) or not (
                math.isfinite(self.sigma) and self.sigma >= 0):
            raise ReplicateError(f"sigma must be a finite number >= 0, got {self.sigma!r}")

    def assign(self, labels, seed: int) -> list[np.ndarray]:
        n = len(_labels(labels))
        _check_clients(self.clients, n)
        rng = _stream(seed)
        w = rng.lognormal(0.0, float(self.sigma), self.clients)
        share = w / w.sum() * (n - self.clients)
        sizes = 1 + np.floor(share).astype(np.int64)
        leftover = n - int(sizes.sum())
        sizes[np.argsort(-(share - np.floor(share)), kind="stable")[:leftover]] += 1
        return _cut(rng.permutation(n), sizes)


@dataclass(frozen=True, eq=False)
class Natural(Partition):
    """The data's own clients: one per distinct id in ``groups`` (a group id per sample), in the order of
    each id's first appearance. The seed is not used: the data fixed the partition."""

    groups: np.ndarray = field(repr=False)
    name: ClassVar[str] = "natural"

    def __post_init__(self):
        g = self.groups.detach().cpu().numpy() if isinstance(self.groups, torch.Tensor) else np.asarray(self.groups)
        if g.ndim != 1 or g.size == 0:
            raise ReplicateError(f"groups must be a non-empty 1-D array (a group id per sample), got shape {g.shape}")
        object.__setattr__(self, "groups", g)

    @property
    def clients(self) -> int:
        return len(np.unique(self.groups))

    def assign(self, labels, seed: int) -> list[np.ndarray]:
        n = len(_labels(labels))
        check_seed(seed)
        if n != len(self.groups):
            raise ReplicateError(f"groups has {len(self.groups)} ids but there are {n} samples; give one id per sample")
        _, first, inverse = np.unique(self.groups, return_index=True, return_inverse=True)
        rank = np.empty_like(first)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        client = rank[inverse.reshape(-1)]
        return _cut(np.argsort(client, kind="stable"), np.bincount(client))

    def spec(self) -> dict:
        return {"name": self.name, "clients": self.clients}


def iid(clients: int) -> IID:
    """IID: a seeded permutation cut into ``clients`` near-equal parts (sizes differ by at most one)."""
    return IID(clients)


def shards(clients: int, shards_per_client: int = 2) -> Shards:
    """McMahan et al. 2017 §3 pathological non-IID: sorted-label shards, ``shards_per_client`` per client."""
    return Shards(clients, shards_per_client)


def dirichlet(alpha: float, clients: int, min_size: int = 1) -> Dirichlet:
    """Dirichlet label skew, concentration ``alpha`` (α; Hsu et al. 2019 §3), ≥ ``min_size`` samples a client."""
    return Dirichlet(alpha, clients, min_size)


def quantity_skew(clients: int, sigma: float = 1.0) -> QuantitySkew:
    """Quantity skew (Li et al. 2022): lognormal(0, ``sigma``) client sizes, labels IID."""
    return QuantitySkew(clients, sigma)


def natural(groups) -> Natural:
    """The data's own clients: each distinct id of ``groups`` (one per sample), in order of first appearance."""
    return Natural(groups)


def describe(partition_indices, labels=None, num_classes: int | None = None) -> dict:
    """Clients, samples per client (array and mean / std (ddof=0) / min / max), distinct classes per client
    and the clients × classes count matrix of a partition (``assign``'s result) of ``labels``, or of a
    ``FederatedDataset``'s training clients (``describe(data)``)."""
    if isinstance(partition_indices, FederatedDataset):
        data = partition_indices
        bounds = data.train.offsets.tolist()
        partition_indices = [np.arange(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        labels, num_classes = data.train.y, data.num_classes if num_classes is None else num_classes
    if labels is None:
        raise ReplicateError("describe(indices, labels): give the labels the indices point into")
    y = _labels(labels)
    if len(partition_indices) == 0:
        raise ReplicateError("describe needs at least one client's indices (a partition's assign result)")
    num_classes = int(y.max()) + 1 if num_classes is None else num_classes
    if num_classes <= int(y.max()):
        raise ReplicateError(f"num_classes {num_classes} is too small for label {int(y.max())}; pass at least "
                             f"{int(y.max()) + 1}")
    counts = np.stack([np.bincount(y[p], minlength=num_classes) for p in partition_indices]).astype(np.int64)
    samples = counts.sum(axis=1)
    return {"clients": len(partition_indices), "samples": samples, "samples_mean": float(samples.mean()),
            "samples_std": float(samples.std()), "samples_min": int(samples.min()),
            "samples_max": int(samples.max()), "classes_per_client": (counts > 0).sum(axis=1), "counts": counts}


def plot_label_heatmap(counts, ax=None):
    """A heat map of label counts (``describe(...)["counts"]``, clients × classes): clients across, labels up.
    Draws on ``ax`` (a new figure when None) and returns it."""
    import matplotlib.pyplot as plt  # here: plotting is optional for the data layer
    from matplotlib.ticker import MaxNLocator

    counts = np.asarray(counts)
    if counts.ndim != 2:
        raise ReplicateError(f"counts must be a clients × classes matrix, got shape {counts.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12.0, max(4.0, 0.2 * counts.shape[0])), 3.0), layout="constrained")
    image = ax.imshow(counts.T, aspect="auto", origin="lower", cmap="viridis", interpolation="nearest")
    ax.set_xlabel("client")
    ax.set_ylabel("label")
    for axis in (ax.xaxis, ax.yaxis):  # clients and labels are whole numbers
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.figure.colorbar(image, ax=ax, label="samples")
    return ax


def _arrays(x, y, what: str) -> tuple[np.ndarray, np.ndarray]:
    x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():  # a NaN trains to NaN, silently
        raise ReplicateError(f"{what} inputs hold {int((~np.isfinite(x)).sum())} values that are NaN or infinite")
    y = _labels(y)
    if x.ndim == 0 or len(x) != len(y):
        raise ReplicateError(f"{what}: {len(x) if x.ndim else 0} inputs but {len(y)} labels; give one label per row")
    return x, y


def federate(x, y, partition: Partition, seed: int = 0, test=None, name: str = "given",
             num_classes: int | None = None) -> FederatedDataset:
    """A :class:`FederatedDataset` of (x, y) split by ``partition`` with ``seed``; rows keep their shape
    (images stay (C, H, W)), x becomes float32 and y int64, client after client, each client's rows in
    their given order (``partition.assign(y, seed)`` gives the indices again). ``test``, an optional
    ``(x_test, y_test)``, is pooled as one client. ``meta`` records the partition's spec and the seed."""
    if not isinstance(partition, Partition):
        raise ReplicateError(f"partition must be one of iid(...), shards(...), dirichlet(...), quantity_skew(...), "
                             f"natural(...), got {type(partition).__name__}")
    x, y = _arrays(x, y, "train")
    pools = [y]
    if test is not None:
        if not isinstance(test, (tuple, list)) or len(test) != 2:
            raise ReplicateError("test must be a pair (x_test, y_test)")
        x_test, y_test = _arrays(*test, "test")
        if x_test.shape[1:] != x.shape[1:]:
            raise ReplicateError(f"a test row has shape {x_test.shape[1:]}, a training row {x.shape[1:]}: they must "
                                 "match")
        pools.append(y_test)
    top = max(int(p.max()) for p in pools) + 1
    num_classes = top if num_classes is None else num_classes
    if num_classes < top:
        raise ReplicateError(f"num_classes {num_classes} is too small for label {top - 1}; pass at least {top}")
    parts = partition.assign(y, seed)
    if empty := sum(len(p) == 0 for p in parts):  # a client without a sample has no loss to descend: NaN, not data
        raise ReplicateError(f"{partition} left {empty} of its {len(parts)} clients without a sample; "
                             + ("give min_size=1 or more (the draw is repeated until every client holds that many) "
                                "or use fewer clients" if isinstance(partition, Dirichlet) else "use fewer clients"))
    order = np.concatenate(parts)
    train = Split.from_arrays(np.ascontiguousarray(x[order], dtype=np.float32), y[order], [len(p) for p in parts])
    pooled = None
    if test is not None:
        pooled = Split(x=torch.from_numpy(np.ascontiguousarray(x_test, dtype=np.float32)),
                       y=torch.from_numpy(np.array(y_test, dtype=np.int64)),
                       offsets=torch.tensor([0, len(y_test)], dtype=torch.int64))
    return FederatedDataset(name=name, train=train, test=pooled, num_classes=num_classes,
                            meta={"partition": partition.spec(), "seeds": {"partition": seed}})
