"""Centralised datasets by name, to be partitioned (``load_dataset("mnist", partition=dirichlet(0.1, 100))``).

The papers' own federated datasets are registered builders (``replicate.data.load``); a study of partitions
starts instead from a pooled dataset and a partition of one's choice (``data.partitions``). Images keep their
shape, ``(C, H, W)`` float32 in [0, 1], so a convolutional ``torch.nn.Module`` takes them as they are; the
official test split is pooled as one client (evaluation only).
"""
from __future__ import annotations

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
    x, y, x_test, y_test, classes = POOLED[name]()
    return federate(x, y, partition, seed=seed, test=(x_test, y_test), name=name, num_classes=classes)


__all__ = ["POOLED", "load_dataset"]
