"""Federated datasets by name: ``load("synthetic", alpha=1, beta=1)`` → :class:`FederatedDataset`.

Importing this package imports each of its modules (``discover``), so every builder registers itself where it
is defined (``replicate.data.registry``) and a new dataset needs no import line here (the imports below are the
package's API); it reads no data: builders load files only when called. Files are staged by
:func:`replicate.data.store.fetch` (``python -m replicate data fetch NAME``).
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Callable

from replicate.core.errors import ReplicateError
from replicate.data import registry
from replicate.data.federated import FederatedDataset, Split
from replicate.data.leaf import femnist, load_leaf
from replicate.data.letters import emnist_star, femnist_fedprox
from replicate.data.mnist import load_mnist, mnist_balanced, mnist_fedprox, mnist_unbalanced
from replicate.data import partitions
from replicate.data.partitions import federate
from replicate.data.quadratic import QuadraticClients, li2020_counterexample
from replicate.data.shards import cifar10_stem_high, cifar10_stem_moderate, mnist_stem
from replicate.data.stats import table1_statistics
from replicate.data.store import fetch
from replicate.data.synthetic import synthetic, synthetic_iid
from replicate.data.tff import shakespeare_tff


@registry.builder("synthetic")  # "synthetic(α,β)" in a run config (replicate.runs.config.dataset)
def _synthetic(alpha: float, beta: float, num_clients: int = 100, seed: int = 0) -> FederatedDataset:
    return synthetic(alpha, beta, num_clients, iid=False, seed=seed)


_BUILDERS = registry.BUILDERS  # every builder, registered where it is defined (``replicate.data.registry``)


def available() -> list[str]:
    """Names accepted by :func:`load`."""
    return list(_BUILDERS)


def parameters(name: str) -> dict[str, object]:
    """``{parameter: default}`` of dataset ``name``; required ones map to ``inspect.Parameter.empty``."""
    return {p.name: p.default for p in inspect.signature(_builder(name)).parameters.values()}


def load(name: str, **params) -> FederatedDataset:
    """Build dataset ``name`` (see :func:`available`) with keyword ``params``."""
    accepted = parameters(name)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ReplicateError(
            f"dataset {name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"valid: {', '.join(accepted) or 'none'}")
    missing = [p for p, default in accepted.items()
               if default is inspect.Parameter.empty and p not in params]
    if missing:
        raise ReplicateError(f"dataset {name!r} needs {', '.join(map(repr, missing))}")
    return _BUILDERS[name](**params)


def _builder(name: str) -> Callable[..., FederatedDataset]:
    try:
        return _BUILDERS[name]
    except (KeyError, TypeError):
        raise ReplicateError(f"unknown dataset {name!r}; valid: {', '.join(_BUILDERS)}") from None


__all__ = [
    "FederatedDataset", "QuadraticClients", "Split", "available", "discover", "emnist_star", "femnist",
    "femnist_fedprox", "federate", "fetch", "li2020_counterexample", "load", "load_leaf", "load_mnist",
    "mnist_balanced", "mnist_fedprox", "mnist_stem", "mnist_unbalanced", "parameters", "partitions",
    "cifar10_stem_high", "cifar10_stem_moderate", "shakespeare_tff", "synthetic", "synthetic_iid", "table1_statistics",
]


def discover() -> None:
    """Import every module of this package: each registers the builders it defines. Called last, so a module
    may import anything this package defines (``load``, ``registry``) at its top."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


discover()
