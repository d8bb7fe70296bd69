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
        if len({r.pull is None for r in runs}) > 1:  # a zero pull would add +0: not what a run without one computes
            raise ReplicateError("runs with and without a proximal term train in separate batches "
                                 "(their algorithms' client_settings differ)")
        starts = w.split([r.size for r in runs])
        self.pull_term = None if runs[0].pull is None else torch.cat([r.pull_term(s) for r, s in zip(runs, starts)])
        self.masked = torch.tensor([r.masked for r in runs], device=w.device)[self.run_of]
        # a run's baddbmm form: its decay as the GEMM's beta (a float) or multiplied first (a tensor)
        self.forms = ["multiply" if torch.is_tensor(r.decay) else r.decay for r in runs]
        self._rows_key, self._rows = None, None

    def _select(self, rows):
        """Per-row tensors and per-run row counts for the rows still working (cached while they stay)."""
        if rows is None:
            return self.lr, self.decay, self.pull_term, self.masked, self.run_of, [r.size for r in self.runs]
        if self._rows_key is not rows:
            run_of = self.run_of.index_select(0, rows)
            pick = [None if t is None else t.index_select(0, rows)
                    for t in (self.lr, self.decay, self.pull_term, self.masked)]
            counts = torch.bincount(run_of, minlength=len(self.runs)).tolist()
            self._rows_key, self._rows = rows, (*pick, run_of, counts)
        return self._rows

    def __call__(self, w, x, onehot, mask, row_norms, *, clip_norm, rows=None) -> None:
        lr, decay, pull_term, masked, run_of, counts = self._select(rows)
        spans = _spans(counts)
        cpu = w.device.type == "cpu"
        logits = torch.cat([torch.bmm(_own(w[lo:hi]), _own(x[lo:hi]).transpose(1, 2)) for lo, hi in spans]) \
            if cpu else None  # each run's GEMM on its own block, as alone (_own); on CUDA one GEMM
        g = gradient_weights(w, x, onehot, mask, masked, logits=logits)
        clipped = [False] * len(counts)
        if clip_norm is not None:
            hits = torch.zeros(len(counts), device=w.device).index_add_(0, run_of,
                                                                        may_clip(g, row_norms, clip_norm).float())
            clipped = (hits > 0).tolist()
        lo = 0
        for kind, size in _slices(counts, clipped, self.forms):
            hi = lo + size
            ws, gs, xs = w[lo:hi], g[lo:hi], x[lo:hi]
            if kind == "explicit":
                def update(w_, g_, x_, a, b):
                    return explicit_(w_, g_, x_, lr[a:b], decay[a:b], clip_norm)
            elif kind == "multiply":
                ws.mul_(decay[lo:hi])
                def update(w_, g_, x_, a, b):
                    return w_.baddbmm_(g_, x_, alpha=-1.0)
            else:  # the decay as beta, a float shared by the slice's runs
                def update(w_, g_, x_, a, b, beta=kind):
                    return w_.baddbmm_(g_, x_, beta=beta, alpha=-1.0)
            if kind != "explicit":
                gs.mul_(lr[lo:hi])
            if not cpu:  # CUDA: the slice's one GEMM
                update(ws, gs, xs, lo, hi)
            for a, b in [span for span in spans if lo <= span[0] < hi] if cpu else []:
                _in_own_block(update, w[a:b], g[a:b], x[a:b], a, b)
            lo = hi
        if pull_term is not None:
            w.add_(pull_term)


ALIGN = 64  # bytes: where the CPU allocator starts every tensor (c10's gAlignment, enough for AVX-512)


def _own(t: torch.Tensor) -> torch.Tensor:
    """A run's contiguous block ``t`` of a stacked tensor at the address alignment it has as a tensor of its
    own, as its run alone holds it: ``t`` itself when it starts on an ``ALIGN`` boundary, else a copy.

    Why: a BLAS may pick its kernel by the operands' addresses (MKL's sgemm on an AVX2 CPU rounds a
    transposed-B product ``bmm(w, xᵀ)`` differently when ``w`` is not 16-byte aligned), and in a stack a run
    whose rows follow another run's starts wherever those rows end (``lo × C(d+1) × 4`` bytes in)."""
    return t if t.data_ptr() % ALIGN == 0 else t.clone()


def _in_own_block(update, w, g, x, a, b) -> None:
    """``update(w, g, x, a, b)`` in place on a run's rows ``w``, every operand placed as alone (``_own``)."""
    w_own = _own(w)
    update(w_own, _own(g), _own(x), a, b)
    if w_own is not w:
        w.copy_(w_own)


def _spans(counts: list[int]) -> list[tuple[int, int]]:
    """(lo, hi) rows of each run that still has rows, in row order."""
    out, lo = [], 0
    for count in counts:
        if count:
            out.append((lo, lo + count))
        lo += count
    return out


def _slices(counts: list[int], clipped: list[bool], forms: list) -> list[tuple]:
    """(kind, rows) of consecutive runs that compute alike: "explicit" (clipping may act), else the run's
    baddbmm form, "multiply" (per-row rates) or the float decay they share as beta; runs with no rows left
    are skipped."""
    out: list[list] = []
    for count, clip, form in zip(counts, clipped, forms):
        if not count:
            continue
        kind = "explicit" if clip else form
        if out and out[-1][0] == kind:
            out[-1][1] += count
        else:
            out.append([kind, count])
    return [tuple(s) for s in out]
