"""Per-round federated maths, one module per algorithm, all on one protocol (``protocol.py``).

``ALGORITHMS`` maps the names a ``RunConfig`` uses to the classes; adding an algorithm
touches its module, this table and its tests, never the engine's loop.
"""
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms.fedadam import FedAdam
from replicate.fl.algorithms.fedavg import SCHEMES, FedAvg
from replicate.fl.algorithms.fedprox import FedProx
from replicate.fl.algorithms.local_update import LocalUpdate
from replicate.fl.algorithms.protocol import (Algorithm, LocalWork, PlainSGD, Population, RoundContext,
                                               RoundPlan)
from replicate.fl.algorithms.scaffold import Scaffold
from replicate.fl.algorithms.stem import Stem

ALGORITHMS = {"fedavg": FedAvg, "fedprox": FedProx, "scaffold": Scaffold, "local_update": LocalUpdate, "stem": Stem,
              "fedadam": FedAdam}


def name_of(algorithm) -> str:
    """The registry name of an algorithm's settings object (one of ``ALGORITHMS``' classes)."""
    for name, cls in ALGORITHMS.items():
        if type(algorithm) is cls:
            return name
    raise ReplicateError(f"{algorithm!r} is not a registered algorithm's settings; use one of "
                         + ", ".join(f"{cls.__name__}(...)" for cls in ALGORITHMS.values()))

__all__ = ["ALGORITHMS", "name_of", "Algorithm", "FedAdam", "FedAvg", "FedProx", "LocalUpdate", "LocalWork", "PlainSGD",
           "Population", "RoundContext", "RoundPlan", "SCHEMES", "Scaffold", "Stem"]
