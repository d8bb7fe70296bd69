"""Runs that stop at a round boundary and resume bitwise (issue #36: GPU slots shorter than a run).

Between two rounds a run is its global model, its server state (SCAFFOLD's control variates, STEM's
direction and each worker's last iterate, FedAdam's moments), its history so far and the round it
reached: every random draw is named by (seed, role, round) (``core.rng``), so nothing else is needed
to go on as if never stopped. ``Checkpoints`` is what ``engine.run_batch`` asks at each round boundary;
this base keeps nothing, ``runs.checkpoints`` keeps files beside the run cache.
"""
from __future__ import annotations

from dataclasses import replace

import torch


class Checkpointed(KeyboardInterrupt):
    """Training stopped at a round boundary on request (``Checkpoints.stop``), every run of the batch saved:
    a KeyboardInterrupt, so whatever stops on Ctrl-C stops on it, and rerunning resumes."""


class Checkpoints:
    """Where a batch's runs keep their state between rounds (``index``: the run's place in the batch)."""

    def load(self, index: int) -> dict | None:
        """The run's saved state (``engine._Run.state``), or None: it starts at round 0."""
        return None

    def due(self) -> bool:
        """Whether to save every run now (asked at every round boundary after the first)."""
        return False

    def stop(self) -> bool:
        """Whether to save every run now and stop (``Checkpointed``)."""
        return False

    def save(self, index: int, state: dict) -> None:
        pass

    def end(self, index: int, state: dict) -> None:
        """The run ended: at its last round, or sooner where it stopped at its target or its model turned NaN
        (``state``: before that round's evaluation, as ``save`` takes it). A longer run of the same config may go
        on from here (``runs.checkpoints.continue_as``: successive halving's survivors), since nothing a run
        computes depends on its total rounds; one that ended sooner ends at the same evaluation again."""


def on_device(value, device):
    """A server state (None, a tensor, or a frozen dataclass of tensors) moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if hasattr(value, "__dataclass_fields__"):
        return replace(value, **{k: on_device(getattr(value, k), device) for k in value.__dataclass_fields__})
    return value
