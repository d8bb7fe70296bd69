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


def _distinct_rows(limits: list[torch.Tensor], b: int, generators: list) -> list[torch.Tensor]:
    """For each run, one row of b distinct positions in [0, limit) per entry of its ``limits``: b draws
    with replacement, then every repeated position redrawn, pass after pass, until no row repeats one.

    The runs share each pass's sorting and comparing (runs as a tensor dimension); the random numbers
    stay each run's own: run i's generator is called exactly as it would be for run i alone (one draw
    of its rows, then one per pass while it still has rows to redraw, the last of them empty), so
    every run's rows are bitwise what it draws alone.
    """
    device = limits[0].device
    counts = [lim.numel() for lim in limits]
    first = [torch.rand((n, b), generator=g, dtype=torch.float64, device=device) for n, g in zip(counts, generators)]
    limits_all = _cat(limits)
    rows = (_cat(first) * limits_all.unsqueeze(1)).long()
    owner = None  # each row's run, once two runs are still redrawing
    active = torch.arange(rows.shape[0], device=device)
    looping = [i for i, n in enumerate(counts) if n]  # runs in their redraw loop (alone: while it has rows)
    while looping:
        sub = rows[active].sort(dim=1).values
        dup = torch.zeros_like(sub, dtype=torch.bool)
        dup[:, 1:] = sub[:, 1:] == sub[:, :-1]
        has_dup = dup.any(dim=1)
        active, sub, dup = active[has_dup], sub[has_dup], dup[has_dup]
        if len(looping) == 1:  # every active row is that run's
            redraw = {looping[0]: active.numel()}
        else:  # one sync for all runs
            if owner is None:
                owner = torch.repeat_interleave(torch.arange(len(limits), device=device),
                                                torch.tensor(counts, device=device))
            redraw = dict(enumerate(torch.bincount(owner[active], minlength=len(limits)).tolist()))
        fresh = _cat([torch.rand((redraw[i], b), generator=generators[i], dtype=torch.float64, device=device)
                      for i in looping])
        rows[active] = torch.where(dup, (fresh * limits_all[active].unsqueeze(1)).long(), sub)
        looping = [i for i in looping if redraw[i]]
    return list(rows.split(counts))


def _cat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


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
    return draw_batch_positions_runs([sizes], [steps], batch_size, [generator])[0]


def draw_batch_positions_runs(sizes: list[torch.Tensor], steps: list[int], batch_size: int,
                              generators: list) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """``draw_batch_positions`` for several runs at once, each from its own generator: the same
    positions as each run alone, the redraw passes of all runs shared (``_distinct_rows``)."""
    b, device = batch_size, sizes[0].device
    redrawn = [n > KEYED_BELOW * b for n in sizes]
    some = [i for i, r in enumerate(redrawn) if bool(r.any())]  # a run alone skips the pass without such clients
    distinct = dict(zip(some, _distinct_rows([sizes[i][redrawn[i]].repeat_interleave(steps[i]) for i in some], b,
                                             [generators[i] for i in some]) if some else []))
    out = []
    for i, (n, s, g) in enumerate(zip(sizes, steps, generators)):
        pos = torch.empty((n.numel(), s, b), dtype=torch.long, device=device)
        small = n < b
        keyed = ~small & (n <= KEYED_BELOW * b)
        if i in distinct:
            pos[redrawn[i]] = distinct[i].view(-1, s, b)
        if bool(keyed.any()):
            pos[keyed] = _uniform_subsets(n[keyed].repeat_interleave(s), b, g).view(-1, s, b)
        if not bool(small.any()):
            out.append((pos, None))
            continue
        ar = torch.arange(b, device=device)
        mask = (ar.unsqueeze(0) < n.unsqueeze(1)) | ~small.unsqueeze(1)
        pos[small] = torch.where(mask[small], ar, 0).unsqueeze(1).expand(-1, s, -1)
        out.append((pos, mask))
    return out


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
    epoch, within = s // per_epoch.unsqueeze(1), s % per_epoch.unsqueeze(1)  # (m, S)
    col = within.unsqueeze(2) * b + torch.arange(b, device=device)  # (m, S, b) column in the permutation
    mask = (col < sizes.view(-1, 1, 1)) & (s < steps.unsqueeze(1)).unsqueeze(2)
    rows = torch.arange(m, device=device).view(-1, 1, 1)
    pos = perm[rows, epoch.clamp(max=max(epochs - 1, 0)).unsqueeze(2), col.clamp(max=max(width - 1, 0))]
    return torch.where(mask, pos, 0), mask


def draw(sizes: torch.Tensor, offsets: torch.Tensor, steps: torch.Tensor, work, generator) -> Batches:
    """A round's ``Batches`` for clients with ``sizes`` (n_j) starting at ``offsets`` in the flat
    split, for ``steps`` (m,) local steps each under ``work`` (a ``LocalWork``)."""
    return draw_runs([(sizes, offsets, steps, generator)], work)[0]


def draw_runs(requests: list[tuple], work) -> list[Batches]:
    """``draw`` for several runs, one ``(sizes, offsets, steps, generator)`` each: each run's batches are
    what it draws alone; independent mini-batches of every run share their redraw passes."""
    b = work.batch_size
    if b is not None and work.unit != "epochs":
        drawn = draw_batch_positions_runs([n for n, _, _, _ in requests], [int(s.max()) for _, _, s, _ in requests],
                                          b, [g for _, _, _, g in requests])
    else:
        drawn = [_positions(n, s, work, g) for n, _, s, g in requests]
    return [Batches((pos + offsets.view(-1, 1, 1)).transpose(0, 1).contiguous(), mask)
            for (pos, mask), (_, offsets, _, _) in zip(drawn, requests)]


def _positions(sizes, steps, work, generator):
    """One run's (positions (m, S, b), mask) for full local batches or epochs."""
    if work.batch_size is None:  # the full local batch every step
        ar = torch.arange(int(sizes.max()), device=sizes.device)
        mask = ar.unsqueeze(0) < sizes.unsqueeze(1)
        return torch.where(mask, ar, 0).unsqueeze(1), None if bool(mask.all()) else mask
    pos, mask = draw_epoch_positions(sizes, steps, work.batch_size, generator)
    return pos, mask.transpose(0, 1).contiguous()
