"""Per-round federated maths, one module per algorithm, all on one protocol (``protocol.py``).

``ALGORITHMS`` maps the names a ``RunConfig`` uses to the classes; adding an algorithm
touches its module, this table and its tests, never the engine's loop.
"""
from replicate.fl.algorithms.fedavg import SCHEMES, FedAvg
from replicate.fl.algorithms.fedprox import FedProx
from replicate.fl.algorithms.local_update import LocalUpdate
from replicate.fl.algorithms.protocol import (Algorithm, LocalWork, PlainSGD, Population, RoundContext,
                                               RoundPlan)
from replicate.fl.algorithms.scaffold import Scaffold
from replicate.fl.algorithms.stem import Stem

ALGORITHMS = {"fedavg": FedAvg, "fedprox": FedProx, "scaffold": Scaffold, "local_update": LocalUpdate, "stem": Stem}

__all__ = ["ALGORITHMS", "Algorithm", "FedAvg", "FedProx", "LocalUpdate", "LocalWork", "PlainSGD",
           "Population", "RoundContext", "RoundPlan", "SCHEMES", "Scaffold", "Stem"]
