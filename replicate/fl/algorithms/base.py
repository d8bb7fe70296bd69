"""What a round's sampling decides, in one structure shared by all algorithms."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RoundPlan:
    """Aggregation ``w_{t+1} = residual · w_t + Σ_j weights[j] · w_j`` over ``clients``.

    ``lr_scale[j]`` multiplies client j's learning rate (Li et al.'s transformed
    Scheme II); ``clients`` are sorted and distinct.
    """

    clients: torch.Tensor  # (m,) int64
    weights: torch.Tensor  # (m,) float64
    residual: float = 0.0
    lr_scale: torch.Tensor | None = None  # (m,) float64, None = 1

    def aggregate(self, global_flat: torch.Tensor, local_flat: torch.Tensor) -> torch.Tensor:
        w = self.weights.to(local_flat.dtype).to(local_flat.device)
        new = w @ local_flat
        if self.residual:
            new = new + self.residual * global_flat
        return new
