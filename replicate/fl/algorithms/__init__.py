"""Per-round federated maths, one module per algorithm, all on one protocol (``protocol.py``).

``ALGORITHMS`` maps the names a ``RunConfig`` uses to the classes. Each algorithm registers itself where it
is defined (``protocol.register``, with the settings of an example instance), and importing this package
imports each of its modules (``discover``), so adding one is its own module and its hand-worked test: never
the engine's loop, a table, this file or the tests that cover every algorithm.
"""
import importlib
import pkgutil

from replicate.core.errors import ReplicateError
from replicate.fl.algorithms.fedadam import FedAdam
from replicate.fl.algorithms.fedavg import SCHEMES, FedAvg
from replicate.fl.algorithms.fedprox import FedProx
from replicate.fl.algorithms.local_update import LocalUpdate
from replicate.fl.algorithms.protocol import (ALGORITHMS, Algorithm, LocalWork, PlainSGD, Population, RoundContext,
                                               RoundPlan, example, register)
from replicate.fl.algorithms.scaffold import Scaffold
from replicate.fl.algorithms.stem import Stem



def name_of(algorithm) -> str:
    """The registry name of an algorithm's settings object (one of ``ALGORITHMS``' classes)."""
    for name, cls in ALGORITHMS.items():
        if type(algorithm) is cls:
            return name
    raise ReplicateError(f"{algorithm!r} is not a registered algorithm's settings; use one of "
                         + ", ".join(f"{cls.__name__}(...)" for cls in ALGORITHMS.values()))


def discover() -> None:
    """Import every module of this package: each registers what it defines (after ``name_of``, which one
    may import)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


discover()

__all__ = ["ALGORITHMS", "discover", "example", "name_of", "register", "Algorithm", "FedAdam", "FedAvg", "FedProx",
           "LocalUpdate", "LocalWork", "PlainSGD", "Population", "RoundContext", "RoundPlan", "SCHEMES", "Scaffold",
           "Stem"]
