"""Top-level ATen ops of one stacked local step, for every model.

The stacked engine's promise is that clients are a tensor dimension: a local step of K models
issues the same operators (each on K times the data) whatever K is, so on an accelerator its
kernel launches do not grow with the clients. ``step_ops`` counts them with ``torch.profiler``:

- **what is counted**: every ``aten::`` event with no ``aten::`` ancestor — an op called
  from Python (or from ``torch.func``'s transforms) and every op autograd's engine runs for a
  backward node (those sit under ``autograd::engine::evaluate_function: …Backward0`` events,
  which are not ops); ops called *inside* another op (``aten::linear`` → ``aten::addmm``, an
  in-place op's internal copy, the ``select`` views ``aten::unbind`` makes) are not counted
  again. View ops (``view``, ``narrow``, ``transpose``) count like any other: they launch no
  kernel, but each is a dispatcher round trip. A composite op counts once although it may
  launch several kernels, so the count is a lower bound on kernel launches.
- **what a step is**: ``model.grad`` on K stacked models' mini-batches (forward, loss,
  backward, the weight gradients), then the plain SGD update ``w ← w − η·g`` (the
  ``addcmul_`` of ``protocol.descend_``) — the engine's generic step for a plain-SGD algorithm.
  Left out: gathering the mini-batch rows (two ``index_select``, ``SampleProblem.grad``),
  drawing dropout noise (one ``rand``), ``Model.prepare`` (done once per problem) and the
  logistic regression's fused solver (``LogisticRegression.sgd``, its own faster path).
"""
from __future__ import annotations

from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

from replicate.fl.models.base import Model


def top_level(events) -> Counter:
    """Names of the ``aten::`` events with no ``aten::`` ancestor, counted."""
    counts = Counter()
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:
            counts[event.name] += 1
    return counts


def step_ops(model: Model, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, noise=None) -> Counter:
    """Top-level ops (by name) of one local step of the ``flat.shape[0]`` stacked models on their
    batches ``x``, ``y`` (as ``model.grad`` takes them; ``Model.prepare`` already applied)."""
    w = flat.clone()
    lr = torch.full((w.shape[0], 1), 0.1, dtype=w.dtype, device=w.device)
    w.addcmul_(lr, model.grad(w, x, y, None, noise), value=-1.0)  # warm-up: lazy init, caches
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        w.addcmul_(lr, model.grad(w, x, y, None, noise), value=-1.0)
    return top_level(prof.events())
