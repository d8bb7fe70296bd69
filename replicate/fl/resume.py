"""Runs that stop at a round boundary and resume bitwise (a time-limited job, Ctrl-C, a preempted machine).

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


def restore(template, saved, device):
    """A saved server state rebuilt on ``device`` in the form of the run's own, ``template`` (its
    ``server_init``): a tensor of the same shape and dtype, None, or the same frozen dataclass, which a file
    names by class and fields (``runs.checkpoints.decode``). The class is always the run's, never the file's,
    so a checkpoint can only hand back numbers; any other shape is a ``ValueError`` (the run starts over)."""
    if isinstance(saved, dict) and "$dataclass" in saved:
        fields = saved["fields"]
        if not hasattr(template, "__dataclass_fields__") or saved["$dataclass"] != type(template).__name__ \
                or set(fields) != set(template.__dataclass_fields__):
            raise ValueError(f"its server state is a {saved['$dataclass']}, this run's a {type(template).__name__}")
        return replace(template, **{k: restore(getattr(template, k), fields[k], device) for k in fields})
    if isinstance(template, torch.Tensor):
        if not isinstance(saved, torch.Tensor) or saved.shape != template.shape or saved.dtype != template.dtype:
            raise ValueError("its server state does not have this run's shape")
        return saved.to(device)
    if hasattr(template, "__dataclass_fields__") and type(saved) is type(template):  # kept in memory, not a file
        return on_device(saved, device)
    if template is None and saved is None or type(saved) is type(template):
        return saved
    raise ValueError(f"its server state is a {type(saved).__name__}, this run's a {type(template).__name__}")
