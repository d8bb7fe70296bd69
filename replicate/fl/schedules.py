"""Client learning-rate schedules, indexed by communication round."""
from __future__ import annotations

import math
from dataclasses import dataclass

from replicate.core.errors import ReplicateError

KINDS = ("constant", "harmonic", "shifted_inverse", "inverse", "epoch_cube_root")
# The names these kinds had before they were named by their mathematics (they named the papers that use them):
# recorded configs (cache sidecars, the committed ledger) still spell them so, and the cache keys hash them
# (runs/keys.py), so that every run computed under the old name keeps its entry
FORMER_NAMES = {"li2020": "harmonic", "li2020_quadratic": "shifted_inverse", "stem": "epoch_cube_root"}


@dataclass(frozen=True)
class LRSchedule:
    """η_r for round r (constant within a round).

    Fields are named as ``RunConfig`` names them (η0 ``client_lr``, the decay a ``lr_decay``).

    - ``constant``: η0.
    - ``harmonic``: η0 / max(r, 1). Li et al.'s: their code sets lr = η0/(r+1) *after* round r,
      so rounds 0 and 1 both use η0 (spec §2.1; the paper writes η0/(1+t) per step).
    - ``shifted_inverse``: η0 / (5 + a·r), with a = ``lr_decay``: the schedule fitted exactly to the
      committed data of Li et al. Figure 2 (spec §4).
    - ``inverse``: η0 / (1 + a·r). With η0 = 2/(μγ) and a = E/γ this is Li et al.
      Theorem 1's η_t = 2/(μ(γ + t)) at the round's first step t = rE (the engine applies one
      η per round, so the round's later steps use up to (1 + E/γ)× the theorem's η_t).
    - ``epoch_cube_root``: η0 / (w + σ²·e)^{1/3} with w = σ² = 1 and e = 1 + ⌊r·a⌋ the epoch of round r
      (a = epochs per round, b·I/n_k): STEM's eq. (2), "diminished in each epoch" (§4), with
      η0 = κ̄; w and σ² are PROPOSED (spec STEM §6.5).
    """

    kind: str = "constant"  # RunConfig.lr_schedule
    client_lr: float = 0.1  # η0: RunConfig.client_lr (one name for the quantity from a config to here)
    lr_decay: float = 0.0  # a: RunConfig.lr_decay

    def __post_init__(self):
        if self.kind not in KINDS:
            hint = f" (now called {FORMER_NAMES[self.kind]!r})" if self.kind in FORMER_NAMES else ""
            raise ReplicateError(f"unknown lr schedule {self.kind!r}{hint}; choose one of {', '.join(KINDS)}")
        if not self.client_lr > 0:
            raise ReplicateError(f"learning rate must be positive, got {self.client_lr}")
        if self.kind in ("inverse", "epoch_cube_root") and not self.lr_decay >= 0:
            raise ReplicateError(f"the {self.kind} schedule needs decay >= 0, got {self.lr_decay}")

    def __call__(self, round_: int) -> float:
        if self.kind == "constant":
            return self.client_lr
        if self.kind == "harmonic":
            return self.client_lr / max(round_, 1)
        if self.kind == "inverse":
            return self.client_lr / (1.0 + self.lr_decay * round_)
        if self.kind == "epoch_cube_root":
            return self.client_lr / (2.0 + math.floor(self.lr_decay * round_)) ** (1.0 / 3.0)
        return self.client_lr / (5.0 + self.lr_decay * round_)
