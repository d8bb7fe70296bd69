"""The linear model's fused SGD step for several runs batched as one stack of rows (``fl/batching``),
computing every row bitwise as its run alone computes it.

Alone, a run's fused step (``linear_step.sgd_step``) takes one of two forms, chosen for the whole run:
at a step where clipping may act on any of its clients, every client's gradient is formed explicitly
and clipped; otherwise the decay and the update are one ``baddbmm`` — with the decay as the GEMM's
``beta`` when all the run's clients share one rate, which rounds differently from multiplying first.
So a row's arithmetic depends on its own run, not only on itself. This step keeps each run's choice:
per step it takes every run's clip decision (one reduction over its rows), then walks the rows in
slices of consecutive runs that compute alike — all explicit ones together, baddbmm ones by their
shared ``beta`` — so seeds of one setting are one slice and the loop is over distinct coefficients,
never over clients. Elementwise factors (rates, decays, pulls) are per-row columns equal to the
floats a run alone multiplies by. Mini-batch weights follow each run's own mask rule
(``linear_step.gradient_weights``). ``tests/test_batched_runs.py`` checks bitwise equality.
"""
from __future__ import annotations

import torch

from replicate.core.errors import ReplicateError
from replicate.fl import sgd
from replicate.fl.models.linear_step import explicit_, gradient_weights, may_clip


class Step:
    """``step(w, x, onehot, mask, row_norms, clip_norm=…, rows=None)`` for the runs' rows (``sgd.RunRows``)."""

    def __init__(self, w: torch.Tensor, runs: list[sgd.RunRows]):
        self.runs = runs
        sizes = torch.tensor([r.size for r in runs], device=w.device)
        self.run_of = torch.repeat_interleave(torch.arange(len(runs), device=w.device), sizes)  # (K,) each row's run
        self.lr = torch.cat([r.column(r.lr, w) for r in runs])  # (K, 1, 1)
        self.decay = torch.cat([r.column(r.decay, w) for r in runs])
        pulls = [r.pull_rate for r in runs]
        if len({p is None for p in pulls}) > 1:  # a zero pull would add +0: not what a run without one computes
            raise ReplicateError("runs with and without a proximal term train in separate batches "
                                 "(their algorithms' client_settings differ)")
        self.pull = None if pulls[0] is None else w * torch.cat([r.column(p, w) for r, p in zip(runs, pulls)])
        self.masked = torch.tensor([r.masked for r in runs], device=w.device)[self.run_of]
        # a run's baddbmm form: its decay as the GEMM's beta (a float) or multiplied first (a tensor)
        self.beta = [None if torch.is_tensor(r.decay) else r.decay for r in runs]
        self._rows_key, self._rows = None, None

    def _select(self, rows):
        """Per-row tensors and per-run row counts for the rows still working (cached while they stay)."""
        if rows is None:
            return self.lr, self.decay, self.pull, self.masked, self.run_of, [r.size for r in self.runs]
        if self._rows_key is not rows:
            run_of = self.run_of.index_select(0, rows)
            pick = [None if t is None else t.index_select(0, rows) for t in (self.lr, self.decay, self.pull, self.masked)]
            counts = torch.bincount(run_of, minlength=len(self.runs)).tolist()
            self._rows_key, self._rows = rows, (*pick, run_of, counts)
        return self._rows

    def __call__(self, w, x, onehot, mask, row_norms, *, clip_norm, rows=None) -> None:
        lr, decay, pull, masked, run_of, counts = self._select(rows)
        g = gradient_weights(w, x, onehot, mask, masked)
        clipped = [False] * len(counts)
        if clip_norm is not None:
            hits = torch.zeros(len(counts), device=w.device).index_add_(0, run_of, may_clip(g, row_norms, clip_norm).float())
            clipped = (hits > 0).tolist()
        lo = 0
        for kind, size in _slices(counts, clipped, self.beta):
            hi = lo + size
            ws, gs, xs = w[lo:hi], g[lo:hi], x[lo:hi]
            if kind == "explicit":
                explicit_(ws, gs, xs, lr[lo:hi], decay[lo:hi], clip_norm)
            elif kind == "multiply":
                ws.mul_(decay[lo:hi]).baddbmm_(gs.mul_(lr[lo:hi]), xs, alpha=-1.0)
            else:  # the decay as beta, a float shared by the slice's runs
                ws.baddbmm_(gs.mul_(lr[lo:hi]), xs, beta=kind, alpha=-1.0)
            lo = hi
        if pull is not None:
            w.add_(pull)


def _slices(counts: list[int], clipped: list[bool], beta: list) -> list[tuple]:
    """(kind, rows) of consecutive runs that compute alike: "explicit" (clipping may act), "multiply"
    (per-row rates) or the float beta they share; runs with no rows left are skipped."""
    out: list[list] = []
    for count, clip, b in zip(counts, clipped, beta):
        if not count:
            continue
        kind = "explicit" if clip else ("multiply" if b is None else b)
        if out and out[-1][0] == kind:
            out[-1][1] += count
        else:
            out.append([kind, count])
    return [tuple(s) for s in out]
