"""Runs as a tensor dimension: one round of several runs trained as one stack of clients.

Clients are already rows of stacked tensors; runs of a sweep that share the problem, the
algorithm's client half and the local-work shape add rows, not loops. Each run plans its
round, draws its mini-batches and builds its client state from its own random streams
(``Part``: exactly what a run alone would do); ``merge`` stacks the runs' rows into one
``Round`` (client states, rates, step counts, mini-batches, the broadcast model of each row),
the engine trains that round with one batched gradient per local step, and ``Round.split``
hands each run its rows back for its own message and server step. A batch of one run is
passed through untouched, so a single run computes exactly what it always did.

Agreement with one-by-one runs: the same operations on the same rows. ``Round.runs`` tells a fused
solver each run's rows and whether its own mini-batches had a mask (runs of unequal local work or full
local batches of unequal width are padded to the widest, the padding masked), so the logistic model's
solver computes every row bitwise as its run alone (``fl/models/fused_runs.py``); kernels of another
batch shape (convolutions, the LSTM) may sum in another order. ``tests/test_batched_runs.py`` checks both.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms.protocol import ClientState, LocalWork, Population, RoundContext, RoundPlan, fused_update
from replicate.fl.batches import Batches


@dataclass
class Part:
    """One run's share of a round: its plan, context, clients, mini-batches and client state."""

    run: Any  # the engine's per-run record (algorithm, seed, model, server state, history)
    plan: RoundPlan
    ctx: RoundContext
    clients: torch.Tensor  # (m,) on the problem's device
    batches: Batches | None
    state: ClientState
    seed: int
    most: int = 0  # its busiest client's local steps this round
    done: int = 0  # the local steps its clients have taken so far (``merge``'s ``steps`` at a time)

    @property
    def left(self) -> int:
        return self.most - self.done

    def ahead(self, steps: int | None) -> "Part":
        """This part from the local step it reached, for at most ``steps`` more (None: the rest of its round):
        its step counts less those done and its mini-batches from there (``done`` stays, naming the steps' noise)."""
        if self.done == 0 and (steps is None or steps >= self.most):
            return self
        end = None if steps is None else self.done + steps
        ctx = replace(self.ctx, steps=(self.ctx.steps - self.done).clamp(0, steps), step=self.done)
        batches = self.batches
        if batches is not None and batches.index.shape[0] > 1:  # one drawn step serves every step: as it is
            mask = batches.mask[self.done:end] if batches.mask is not None and batches.mask.dim() == 3 else batches.mask
            batches = Batches(batches.index[self.done:end], mask)
        return replace(self, ctx=ctx, batches=batches)


@dataclass
class Round:
    """The merged round: rows of every part, in part order (``split`` undoes ``merge``)."""

    ctx: RoundContext  # params: (P,) for one run, (rows, P) — each row's broadcast model — for several
    clients: torch.Tensor
    batches: Batches | None
    state: ClientState
    noise: Callable | None  # noise(s, batch): step s's dropout noise for every row, or None
    sizes: list[int] = field(default_factory=list)  # rows per part
    masked: list[bool] = field(default_factory=list)  # per part: its own mini-batches had a mask
    plain_sgd: list = field(default_factory=list)  # per part: its algorithm's ``plain_sgd`` (``fused_update``)

    @property
    def runs(self) -> list[tuple]:
        """Each part's (rows, masked, plain_sgd), for a fused solver (``SampleProblem.local_sgd``): its own
        declared update, so its rows keep their own μ."""
        return list(zip(self.sizes, self.masked, self.plain_sgd))

    def split(self, state: ClientState) -> list[ClientState]:
        if len(self.sizes) == 1:
            return [state]
        pieces = {k: v.split(self.sizes) for k, v in state.items()}
        return [{k: pieces[k][i] for k in state} for i in range(len(self.sizes))]


def round_steps(algorithm, population: Population, work: LocalWork, seed: int, rounds: int) -> torch.Tensor:
    """(rounds,) int64: the local steps a run's round takes, one after another — its busiest client's, since a
    stacked round lasts until its last client is done (0 where nobody trains). From the algorithm's own plan
    and the work's step count, as the engine draws them (``engine._begin``), so stragglers and sampling laws
    count as they train; nothing is trained. The steps of a batch of runs are their per-round maximum
    (``batch_steps``): runs of one seed sample the same clients, so they cost what one of them costs."""
    out = torch.zeros(rounds, dtype=torch.int64)
    for r in range(rounds):
        plan = algorithm.plan(population, work, seed, r)
        if plan.clients.numel():
            out[r] = work.steps(population.sizes[plan.clients.cpu()], plan.work).max()
    return out


def batch_steps(lengths: list[torch.Tensor]) -> int:
    """Sequential local steps of runs trained as one batch in lockstep (``round_steps`` each): every round lasts as
    long as its longest run's; a run that has ended adds nothing."""
    rounds = max(t.numel() for t in lengths)
    stacked = torch.stack([torch.nn.functional.pad(t, (0, rounds - t.numel())) for t in lengths])
    return int(stacked.max(0).values.sum())


def own_pace_steps(lengths: list[torch.Tensor]) -> int:
    """Sequential local steps of the same runs at their own pace (the engine's default): each
    begins its next round as soon as its own clients are done, so the batch lasts as long as its longest run alone."""
    return max(int(t.sum()) for t in lengths)


def merge(parts: list[Part], problem, steps: int | None = None) -> Round:
    """Stack the parts' rows into one round (one part: itself, unchanged), each from the local step it reached,
    for the next ``steps`` local steps (None: the rest of every part's round; ``Part.ahead``)."""
    parts = [p.ahead(steps) for p in parts]
    sizes = [p.clients.numel() for p in parts]
    masked = [p.batches is not None and p.batches.mask is not None for p in parts]
    noise = _noise(parts, problem, sizes)
    plain_sgd = [fused_update(p.run.algorithm) for p in parts]
    if len(parts) == 1:
        p = parts[0]
        return Round(p.ctx, p.clients, p.batches, p.state, noise, sizes, masked, plain_sgd)
    first = parts[0]
    keys = first.state.keys()
    if any(p.state.keys() != keys or p.ctx.warmup != first.ctx.warmup for p in parts):
        raise ReplicateError("runs batched together must build the same client state and warm-up rounds; "
                             "batch only runs whose algorithms share their client settings")
    ctx = RoundContext.stack([p.ctx for p in parts])  # at their own pace, rounds and steps may differ
    state = {k: torch.cat([p.state[k] for p in parts]) for k in keys}
    return Round(ctx, torch.cat([p.clients for p in parts]), merge_batches([p.batches for p in parts]), state,
                 noise, sizes, masked, plain_sgd)


def merge_batches(parts: list[Batches | None]) -> Batches | None:
    """One ``Batches`` for the runs' rows side by side: steps and widths padded to the largest,
    padding masked out (it is never a live row's sample: a run drew as many steps as its rows take)."""
    if all(b is None for b in parts):
        return None
    if any(b is None for b in parts):
        raise ReplicateError("runs batched together must all draw mini-batches or none")
    steps = max(b.index.shape[0] for b in parts)
    width = max(b.index.shape[2] for b in parts)
    if all(b.mask is None and b.index.shape[0] == steps and b.index.shape[2] == width for b in parts):
        return Batches(torch.cat([b.index for b in parts], dim=1), None)
    index, mask = [], []
    for b in parts:
        s, m, w = b.index.shape
        idx = b.index if s == steps else _pad_steps(b.index, steps)
        real = _full_mask(b, s, m, w)
        real = real if s == steps else torch.cat([real, real.new_zeros((steps - s, m, w))]) if s > 1 \
            else real.expand(steps, -1, -1)  # a single drawn step serves every step (Batches.step)
        if w < width:  # pad with the row's first sample, masked out
            idx = torch.cat([idx, idx[:, :, :1].expand(-1, -1, width - w)], dim=2)
            real = torch.cat([real, real.new_zeros((steps, m, width - w))], dim=2)
        index.append(idx)
        mask.append(real)
    mask = torch.cat(mask, dim=1)
    return Batches(torch.cat(index, dim=1), None if bool(mask.all()) else mask)


def _pad_steps(index: torch.Tensor, steps: int) -> torch.Tensor:
    s = index.shape[0]
    if s == 1:
        return index.expand(steps, -1, -1)
    return torch.cat([index, index[:1].expand(steps - s, -1, -1)])


def _full_mask(b: Batches, s: int, m: int, w: int) -> torch.Tensor:
    if b.mask is None:
        return torch.ones((s, m, w), dtype=torch.bool, device=b.index.device)
    if b.mask.dim() == 2:
        return b.mask.unsqueeze(0).expand(s, -1, -1)
    return b.mask


def _noise(parts: list[Part], problem, sizes: list[int]):
    """Step s's dropout noise: each run's rows from its own stream (seed, "dropout", round, step), its round and
    step its own (``Part.done`` steps into the round)."""
    def draw(p: Part, s: int, batch):
        return problem.dropout_noise(batch, rng.seed_for(p.seed, "dropout", p.ctx.round, p.done + s))

    if len(parts) == 1:
        return lambda s, batch: draw(parts[0], s, batch)
    bounds = [0, *itertools.accumulate(sizes)]

    def noise(s, batch):
        index, mask = batch
        pieces = []
        for p, lo, hi in zip(parts, bounds, bounds[1:]):
            width = p.batches.index.shape[2]  # each run's noise has its own batch's shape, as alone
            piece = draw(p, s, (index[lo:hi, :width], None if mask is None else mask[lo:hi, :width]))
            if piece is None:
                return None  # one problem: no run has dropout
            if width < index.shape[1]:
                piece = torch.cat([piece, piece.new_zeros((hi - lo, index.shape[1] - width, *piece.shape[2:]))], 1)
            pieces.append(piece)
        return torch.cat(pieces)

    return noise
