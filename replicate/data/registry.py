"""Every federated dataset by name, registered where its builder is defined.

``@builder("name", reads=("store", ...))`` puts a function into ``BUILDERS`` (what ``replicate.data.load``
builds) with the staged datasets (``replicate.data.store`` entries, ``data fetch NAME``) whose files it
reads; nothing else lists the builders, so a new dataset is its builder (docs/extending.md), and
``replicate.experiments.requirements`` derives from ``READS`` which downloads a figure needs.
"""
from __future__ import annotations

from typing import Callable

from replicate.core.errors import ReplicateError

BUILDERS: dict[str, Callable] = {}
READS: dict[str, tuple[str, ...]] = {}  # builder name → the staged datasets it reads (none: generated)


def builder(name: str, reads: tuple[str, ...] = ()):
    """Register the decorated function as dataset ``name``, reading the staged datasets ``reads``. The same
    function defined again (a notebook cell run twice, a module reloaded) replaces its first definition."""
    def register(function: Callable) -> Callable:
        known = BUILDERS.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (function.__module__, function.__qualname__):
            raise ReplicateError(f"dataset {name!r} is registered twice ({BUILDERS[name].__module__} and "
                                 f"{function.__module__})")
        BUILDERS[name], READS[name] = function, tuple(reads)
        return function
    return register
