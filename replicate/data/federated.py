"""The federated dataset: one flat array per split plus per-client offsets.

Keeping every client's samples in one contiguous tensor (client k owns rows
``offsets[k]:offsets[k+1]``) lets the engine gather a whole round's mini-batches
with a single index operation on one device, instead of walking a list of
per-client objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from replicate.core.errors import ReplicateError


def offsets_of(sizes) -> np.ndarray:
    """The int64 offsets ``[0, n_0, n_0 + n_1, ...]`` of clients holding ``sizes`` samples, in order."""
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(sizes)
    return offsets


def size_statistics(name: str, sizes) -> dict:
    """Devices, samples, and the mean and std (ddof = 0) of the samples per device."""
    sizes = np.asarray(sizes, dtype=np.float64)
    return {"dataset": name, "devices": int(sizes.size), "samples": int(sizes.sum()), "mean": float(sizes.mean()),
            "std": float(sizes.std())}


@dataclass(frozen=True)
class Split:
    """Samples of all clients, concatenated client after client."""

    x: torch.Tensor  # (n_total, *feature_shape): float32 features, or int64 token ids (the text sets)
    y: torch.Tensor  # (n_total,), int64
    offsets: torch.Tensor  # (num_clients + 1,), int64; offsets[0] == 0

    def __post_init__(self):
        if self.x.shape[0] != self.y.shape[0]:
            raise ReplicateError(f"split has {self.x.shape[0]} inputs but {self.y.shape[0]} labels")
        if self.offsets.ndim != 1 or int(self.offsets[0]) != 0 or int(self.offsets[-1]) != self.y.shape[0]:
            raise ReplicateError("split offsets must start at 0 and end at the number of samples")
        if bool((self.offsets[1:] < self.offsets[:-1]).any()):
            raise ReplicateError("split offsets must be non-decreasing")

    @classmethod
    def from_clients(cls, xs, ys) -> "Split":
        """Concatenate per-client arrays (numpy or torch) into one split."""
        x = torch.as_tensor(np.concatenate([np.asarray(a, dtype=np.float32) for a in xs]))
        y = torch.as_tensor(np.concatenate([np.asarray(a, dtype=np.int64) for a in ys]))
        return cls(x=x, y=y, offsets=torch.from_numpy(offsets_of([len(a) for a in ys])))

    @classmethod
    def from_arrays(cls, x: np.ndarray, y: np.ndarray, sizes) -> "Split":
        """A split of numpy ``x`` and ``y`` already concatenated client after client, clients holding ``sizes``
        rows in order. The arrays are shared, not copied or cast: inputs that are not float32 (token ids) stay
        as they are."""
        return cls(x=torch.from_numpy(x), y=torch.from_numpy(y), offsets=torch.from_numpy(offsets_of(sizes)))

    @property
    def num_clients(self) -> int:
        return self.offsets.numel() - 1

    @property
    def sizes(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def client(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
        return self.x[lo:hi], self.y[lo:hi]

    def to(self, device) -> "Split":
        return Split(self.x.to(device), self.y.to(device), self.offsets.to(device))


@dataclass(frozen=True)
class FederatedDataset:
    """A named federated dataset; ``test`` may pool all clients (one offset pair)."""

    name: str
    train: Split
    test: Split | None
    num_classes: int
    meta: dict = field(default_factory=dict)

    def __repr__(self) -> str:  # its arrays are large: what they are, not their values
        test = "no test split" if self.test is None else f"{len(self.test.y):,} test samples"
        return (f"FederatedDataset({self.name!r}: {self.num_clients} clients, {len(self.train.y):,} training samples, "
                f"{test}, {self.num_classes} classes)")

    @property
    def num_clients(self) -> int:
        return self.train.num_clients

    @property
    def num_features(self) -> int:
        return int(np.prod(self.train.x.shape[1:]))

    def weights(self) -> torch.Tensor:
        """p_k = n_k / n over training samples (float64)."""
        sizes = self.train.sizes.to(torch.float64)
        return sizes / sizes.sum()

    def statistics(self, split: str = "train") -> dict:
        """Table-style statistics: devices, samples, mean and std (ddof=0) per device."""
        part = {"train": self.train, "test": self.test}.get(split)
        if part is None:
            raise ReplicateError(f"dataset {self.name!r} has no {split!r} split; use 'train' or 'test'")
        return size_statistics(self.name, part.sizes.numpy())

    def first(self, n: int) -> "FederatedDataset":
        """The first ``n`` clients only, train and (per-client) test: a smaller federation."""
        if not 1 <= n <= self.num_clients:
            raise ReplicateError(f"dataset {self.name!r}: num_clients must be between 1 and {self.num_clients}, "
                                 f"got {n}")
        if self.test is None or self.test.num_clients != self.num_clients:
            raise ReplicateError(f"dataset {self.name!r} has no per-client test split to cut with its clients")

        def cut(part: Split) -> Split:
            end = int(part.offsets[n])
            return Split(part.x[:end], part.y[:end], part.offsets[:n + 1].clone())
        return FederatedDataset(self.name, cut(self.train), cut(self.test), self.num_classes,
                                {**self.meta, "users": self.meta.get("users", ())[:n], "first_clients": n})

    def to(self, device) -> "FederatedDataset":
        return FederatedDataset(self.name, self.train.to(device),
                                None if self.test is None else self.test.to(device),
                                self.num_classes, self.meta)
