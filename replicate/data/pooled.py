"""Centralised datasets by name, to be partitioned (``load_dataset("mnist", partition=dirichlet(0.1, 100))``).

The papers' own federated datasets are registered builders (``replicate.data.load``); a study of partitions
starts instead from a pooled dataset and a partition of one's choice (``data.partitions``). Images keep their
shape, ``(C, H, W)`` float32 in [0, 1], so a convolutional ``torch.nn.Module`` takes them as they are; the
official test split is pooled as one client (evaluation only).

A partition that runs cite by name is registered as a builder here, so that its runs are cached like the
papers' (keyed by the full config): ``mnist_dirichlet0.1`` and ``mnist_dirichlet1`` are MNIST under Dirichlet
label skew (Hsu, Qi & Brown 2019, §3) at α = 0.1 and α = 1, 100 clients of at least 10 samples each, drawn with
partition seed 0 (``data_seed`` draws another), the official test split pooled.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from replicate.core.errors import ReplicateError
from replicate.data import registry
from replicate.data.federated import FederatedDataset
from replicate.data.partitions import Partition, federate


def _mnist():
    from replicate.data.mnist import load_mnist

    m = load_mnist()
    scale = (np.arange(256) / 255).astype(np.float32)  # exactly float32(x / 255)
    return (scale[m.train_images][:, None], m.train_labels.astype(np.int64),
            scale[m.test_images][:, None], m.test_labels.astype(np.int64), 10)


def _cifar10():
    from replicate.data.cifar import cifar10

    c = cifar10()
    scale = (np.arange(256) / 255).astype(np.float32)
    return (scale[c.train_x].transpose(0, 3, 1, 2), c.train_y.astype(np.int64),
            scale[c.test_x].transpose(0, 3, 1, 2), c.test_y.astype(np.int64), 10)


POOLED = {"mnist": _mnist, "cifar10": _cifar10}


DIRICHLET_CLIENTS = 100  # N, as Li et al.'s and STEM's MNIST partitions
DIRICHLET_MIN_SIZE = 10  # every client holds at least this many samples (the draw is repeated until it does)
DIRICHLET_SEED = 0  # the partition's seed, fixed: every run of the named set reads the same clients


def dirichlet_name(alpha: float) -> str:
    """The registered name of MNIST under Dirichlet(α) label skew: ``mnist_dirichlet0.1``, ``mnist_dirichlet1``."""
    return f"mnist_dirichlet{alpha:g}"


def _register_dirichlet(alpha: float) -> None:
    from replicate.data.partitions import dirichlet

    name = dirichlet_name(alpha)

    @registry.builder(name, reads=("mnist",))
    def build(seed: int = DIRICHLET_SEED) -> FederatedDataset:
        data = load_dataset("mnist", partition=dirichlet(alpha, DIRICHLET_CLIENTS, DIRICHLET_MIN_SIZE), seed=seed)
        return dataclasses.replace(data, name=name, meta={
            **data.meta, "paper": "Hsu, Qi & Brown 2019, §3 (Dirichlet label skew); per class, as Li et al. 2022",
            "source": "MNIST IDX files: 60,000 train / 10,000 test (pooled, evaluation only)",
            "features": "x/255 as (1, 28, 28) float32 images in [0, 1]"})

    build.__name__ = build.__qualname__ = name.replace(".", "_")
    build.__doc__ = (f"MNIST under Dirichlet(α = {alpha:g}) label skew (Hsu et al. 2019): {DIRICHLET_CLIENTS} clients "
                     f"of at least {DIRICHLET_MIN_SIZE} samples, partition seed ``seed`` ({DIRICHLET_SEED}: the "
                     "registered set); the official test split pooled.")


for _alpha in (0.1, 1.0):
    _register_dirichlet(_alpha)


def load_dataset(name: str, partition: Partition | None = None, seed: int = 0, **params) -> FederatedDataset:
    """A federated dataset: a pooled one (``POOLED``: mnist, cifar10) cut by ``partition`` with ``seed``, or,
    without a partition, a registered builder's (``replicate.data.load(name, **params)``: the papers' own)."""
    if partition is None:
        from replicate import data

        if name in POOLED and name not in registry.BUILDERS:
            raise ReplicateError(f"{name!r} is a pooled dataset: give it a partition, e.g. "
                                 f"load_dataset({name!r}, partition=partitions.dirichlet(0.1, clients=100))")
        return data.load(name, **params)
    if name not in POOLED:
        raise ReplicateError(f"no pooled dataset {name!r} to partition; choose one of {', '.join(POOLED)}, or "
                             "federate(x, y, partition) arrays of your own")
    if params:
        raise ReplicateError(f"a partitioned {name!r} takes no {', '.join(sorted(params))}: the partition says it")
    from replicate.data.partitions import Partition

    if not isinstance(partition, Partition):  # before the data loads
        raise ReplicateError(f"partition must be one of partitions.iid(...), shards(...), dirichlet(...), "
                             f"quantity_skew(...), natural(...), got {partition!r}")
    x, y, x_test, y_test, classes = POOLED[name]()
    return federate(x, y, partition, seed=seed, test=(x_test, y_test), name=name, num_classes=classes)


__all__ = ["POOLED", "dirichlet_name", "load_dataset"]
