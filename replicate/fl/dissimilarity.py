"""FedProx's dissimilarity: the spread of the devices' full local gradients around their mean.

A metric of a ``SampleProblem`` (FedProx draft §5.4, spec §2.2), kept apart from the problem because only
the FedProx experiments record it (``experiments.fedprox2020.common.dissimilarity``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from replicate.core.errors import ReplicateError

if TYPE_CHECKING:
    from replicate.fl.problems import SampleProblem


@torch.no_grad()
def device_gradient_variance(problem: SampleProblem, flat: torch.Tensor, max_samples: int | None = None,
                             piece: int = 64, budget: int = 1 << 22) -> float:
    """The variance of the devices' local gradients at ``flat``:

        (1/N) Σ_k ‖∇F_k(w) − ∇f(w)‖²,   ∇f(w) = Σ_k n_k ∇F_k(w) / Σ_k n_k,

    an unweighted mean over all N devices around the sample-weighted mean gradient, with
    ∇F_k the full gradient of device k's mean training loss (no regulariser, no clipping).
    This is FedProx's "dissimilarity" (draft §5.4; spec §2.2), as its authors' trainer prints it
    every round.
    ``max_samples`` uses each device's first n'_k = min(n_k, max_samples) samples and
    weights ∇f by n'_k (the authors' LSTMs: 200).

    Vectorised over devices: every device's rows are cut into pieces of at most ``piece``
    rows; a chunk of pieces (at most ``budget`` input elements and ``budget`` stacked
    parameters) is one masked ``grad`` call, and each piece's mean gradient, weighted by
    its rows, is summed into its device's. Devices are processed in groups of whole devices
    and only sums are kept (float64): Σ_k ‖∇F_k‖², Σ_k ∇F_k and Σ_k n_k ∇F_k, so memory
    stays O(chunk + P) whatever N is, and (1/N)(Σ‖∇F_k‖² − 2⟨Σ∇F_k, ∇f⟩ + N‖∇f‖²) is exact
    up to float64 rounding of the float32 gradients.
    """
    device, p = flat.device, flat.numel()
    sizes = problem.sizes.cpu().to(torch.int64)
    if max_samples is not None:
        sizes = sizes.clamp(max=int(max_samples))
    if bool((sizes < 1).any()):
        raise ReplicateError("the gradient variance needs at least one training sample on every device")
    n_dev, weights = sizes.numel(), sizes.to(torch.float64)
    row = max(1, problem.x_prepared[:1].numel())
    per_chunk = max(1, min(budget // (piece * row), budget // max(p, 1)))
    offsets = problem.train.offsets.cpu()

    # Devices in order of size, so a chunk pads its pieces to similar lengths (Sent140: 4 rows
    # a device on median, 44 at most; taken in their own order, 36 -> 23 s on this CPU). The
    # sums below do not depend on the grouping.
    order = torch.argsort(sizes, stable=True)
    pieces = torch.div(sizes + piece - 1, piece, rounding_mode="floor")
    groups, current, filled = [], [], 0  # devices whose pieces fill one chunk
    for k, q in zip(order.tolist(), pieces[order].tolist()):
        if current and filled + q > per_chunk:
            groups.append(torch.tensor(current, device=sizes.device))
            current, filled = [], 0
        current.append(k)
        filled += q
    groups.append(torch.tensor(current, device=sizes.device))

    def gradients(group: torch.Tensor) -> torch.Tensor:
        """(len(group), P) float64: each device's mean-loss gradient on its first n'_k rows."""
        counts = sizes[group]
        q = torch.div(counts + piece - 1, piece, rounding_mode="floor")
        owner = torch.repeat_interleave(torch.arange(group.numel(), device=q.device), q)  # piece -> device in group
        start = (torch.arange(owner.numel(), device=q.device) - (torch.cumsum(q, 0) - q)[owner]) * piece
        length = (counts[owner] - start).clamp(max=piece)
        first_row = offsets[group][owner] + start
        ar = torch.arange(min(piece, int(counts.max())), device=q.device)

        def piece_gradients(sl: slice) -> torch.Tensor:  # (pieces, P): each piece's mean gradient
            mask = ar.unsqueeze(0) < length[sl].unsqueeze(1)
            index = torch.where(mask, first_row[sl].unsqueeze(1) + ar, first_row[sl].unsqueeze(1))
            return problem.grad(flat.unsqueeze(0).expand(mask.shape[0], -1), group[owner[sl]].to(device),
                             (index.to(device), mask.to(device)))

        if owner.numel() == group.numel() <= per_chunk:  # one piece a device: its mean gradient as is
            return piece_gradients(slice(None)).to(torch.float64)
        sums = torch.zeros(group.numel(), p, dtype=torch.float64, device=device)
        for lo in range(0, owner.numel(), per_chunk):
            sl = slice(lo, lo + per_chunk)
            g = piece_gradients(sl)
            rows = length[sl].to(device, torch.float64).unsqueeze(1)
            sums.index_add_(0, owner[sl].to(device), g.to(torch.float64) * rows)
        return sums / counts.to(device, torch.float64).unsqueeze(1)

    w = weights.to(device)
    squares, total = 0.0, torch.zeros(p, dtype=torch.float64, device=device)
    weighted = torch.zeros(p, dtype=torch.float64, device=device)
    for group in groups:
        grads = gradients(group)
        squares += float(grads.square().sum())
        total += grads.sum(0)
        weighted += w[group.to(device)] @ grads
    mean = weighted / w.sum()
    value = (squares - 2 * float(total @ mean) + n_dev * float(mean @ mean)) / n_dev
    return max(value, 0.0)
