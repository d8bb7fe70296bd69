"""Per-round federated maths, one module per algorithm.

An algorithm provides ``plan(weights, seed, round) -> RoundPlan`` (which clients
train, with which aggregation weights and learning-rate scales) and
``aggregate(global, local, plan) -> new global``. The engine owns the loop.
"""
from replicate.fl.algorithms.base import RoundPlan
from replicate.fl.algorithms.fedavg import SCHEMES, FedAvg
from replicate.fl.algorithms.local_update import LocalUpdate

__all__ = ["RoundPlan", "FedAvg", "LocalUpdate", "SCHEMES"]
