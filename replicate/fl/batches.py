"""A round's mini-batches for all its clients at once, drawn from one named random stream.

Two ways of counting local work (``LocalWork``): independent mini-batches per step (Li et
al.'s code: each step is ``next(iter(DataLoader(shuffle=True)))``), or epochs that each
pass once over the client's data in ⌈n_k/b⌉ batches, the last one smaller (FedProx's code).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Batches:
    """A round's mini-batches: ``index[s, j]`` are the rows client j uses at step s.

    Steps lead so that each step's (m, b) index is one contiguous block.
    """

    index: torch.Tensor  # (S, m, b) rows into the flat training split
    mask: torch.Tensor | None  # True for real samples: (m, b) for every step, (S, m, b) per step, or None

    def step(self, s: int):
        """Step s's ``(index (m, b), mask (m, b) or None)``; a single drawn step serves every step."""
        s = s % self.index.shape[0]
        return self.index[s], (self.mask[s] if self.mask is not None and self.mask.dim() == 3 else self.mask)


KEYED_BELOW = 4  # clients with n_k <= KEYED_BELOW * b draw subsets by random keys


def _uniform_subsets(limits: torch.Tensor, b: int, generator: torch.Generator) -> torch.Tensor:
    """One uniform b-subset of range(n) per row: the b smallest of n random keys (for small n)."""
    keys = torch.rand((limits.numel(), int(limits.max())), generator=generator, device=limits.device)
    keys.masked_fill_(torch.arange(keys.shape[1], device=limits.device) >= limits.unsqueeze(1), 2.0)
    return keys.topk(b, dim=1, largest=False).indices


def _redraw_repeats(rows, active, limits, generator):
    """Redraw every repeated position of the active rows once; returns the rows still repeating."""
    sub = rows[active].sort(dim=1).values
    dup = torch.zeros_like(sub, dtype=torch.bool)
    dup[:, 1:] = sub[:, 1:] == sub[:, :-1]
    has_dup = dup.any(dim=1)
    active, sub, dup = active[has_dup], sub[has_dup], dup[has_dup]
    fresh = (torch.rand(sub.shape, generator=generator, dtype=torch.float64, device=rows.device)
             * limits[active].unsqueeze(1)).long()
    rows[active] = torch.where(dup, fresh, sub)
    return active


def draw_batch_positions(sizes: torch.Tensor, steps: int, batch_size: int,
                         generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor | None]:
    """For each client, ``steps`` independent uniform subsets of ``min(n_k, b)`` distinct positions.

    This is what ``next(iter(DataLoader(shuffle=True, batch_size=b)))`` gives per step in
    the authors' code. Clients with n_k > 4b draw b positions with replacement and redraw
    repeated ones until none repeat (each redraw repeats with probability below 1/4, so a
    few passes over ever fewer rows suffice); clients with b ≤ n_k ≤ 4b take the b
    smallest of n_k random keys. Both procedures commute with relabelling the positions,
    so each subset is uniform. Clients with n_k < b use their whole local set (masked).
    """
    m, b, device = sizes.numel(), batch_size, sizes.device
    pos = torch.empty((m, steps, b), dtype=torch.long, device=device)
    small = sizes < b
    keyed = ~small & (sizes <= KEYED_BELOW * b)
    redrawn = sizes > KEYED_BELOW * b
    if bool(redrawn.any()):
        limits = sizes[redrawn].repeat_interleave(steps)
        rows = (torch.rand((limits.numel(), b), generator=generator, dtype=torch.float64, device=device)
                * limits.unsqueeze(1)).long()
        active = torch.arange(rows.shape[0], device=device)
        while active.numel():
            active = _redraw_repeats(rows, active, limits, generator)
        pos[redrawn] = rows.view(-1, steps, b)
    if bool(keyed.any()):
        pos[keyed] = _uniform_subsets(sizes[keyed].repeat_interleave(steps), b, generator).view(-1, steps, b)
    if not bool(small.any()):
        return pos, None
    ar = torch.arange(b, device=device)
    mask = (ar.unsqueeze(0) < sizes.unsqueeze(1)) | ~small.unsqueeze(1)
    pos[small] = torch.where(mask[small], ar, 0).unsqueeze(1).expand(-1, steps, -1)
    return pos, mask


def draw_epoch_positions(sizes: torch.Tensor, steps: torch.Tensor, batch_size: int,
                         generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions for epoch-based local work: client j's step s is batch s mod ⌈n_j/b⌉ of its
    epoch ⌊s/⌈n_j/b⌉⌋, each epoch a fresh uniform permutation of its n_j samples; the last
    batch of an epoch holds n_j − b(⌈n_j/b⌉ − 1) samples. Returns (m, S, b) positions and the
    (m, S, b) mask of real samples, S = max(steps); steps past a client's count are all False.
    """
    m, b, device = sizes.numel(), batch_size, sizes.device
    per_epoch = torch.div(sizes + b - 1, b, rounding_mode="floor")  # ⌈n_j/b⌉
    total = int(steps.max()) if m else 0
    epochs = int(torch.div(steps + per_epoch - 1, per_epoch, rounding_mode="floor").max()) if m else 0
    width = int(sizes.max()) if m else 0
    keys = torch.rand((m, epochs, width), generator=generator, device=device)
    keys.masked_fill_(torch.arange(width, device=device) >= sizes.view(-1, 1, 1), 2.0)
    perm = keys.argsort(dim=2)  # (m, epochs, width): real positions first, in random order
    s = torch.arange(total, device=device).unsqueeze(0)  # (1, S)
    epoch, slot = s // per_epoch.unsqueeze(1), s % per_epoch.unsqueeze(1)  # (m, S)
    col = slot.unsqueeze(2) * b + torch.arange(b, device=device)  # (m, S, b) column in the permutation
    mask = (col < sizes.view(-1, 1, 1)) & (s < steps.unsqueeze(1)).unsqueeze(2)
    rows = torch.arange(m, device=device).view(-1, 1, 1)
    pos = perm[rows, epoch.clamp(max=max(epochs - 1, 0)).unsqueeze(2), col.clamp(max=max(width - 1, 0))]
    return torch.where(mask, pos, 0), mask


def draw(sizes: torch.Tensor, offsets: torch.Tensor, steps: torch.Tensor, work, generator) -> Batches:
    """A round's ``Batches`` for clients with ``sizes`` (n_j) starting at ``offsets`` in the flat
    split, for ``steps`` (m,) local steps each under ``work`` (a ``LocalWork``)."""
    b, device = work.batch_size, sizes.device
    if b is None:  # the full local batch every step
        width = int(sizes.max())
        ar = torch.arange(width, device=device)
        mask = ar.unsqueeze(0) < sizes.unsqueeze(1)
        pos = torch.where(mask, ar, 0).unsqueeze(1)
        mask = None if bool(mask.all()) else mask
    elif work.unit == "epochs":
        pos, mask = draw_epoch_positions(sizes, steps, b, generator)
        mask = mask.transpose(0, 1).contiguous()
    else:
        pos, mask = draw_batch_positions(sizes, int(steps.max()), b, generator)
    rows = pos + offsets.view(-1, 1, 1)
    return Batches(rows.transpose(0, 1).contiguous(), mask)
