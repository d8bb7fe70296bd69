"""Client learning-rate schedules, indexed by communication round."""
from __future__ import annotations

from dataclasses import dataclass

from replicate.core.errors import ReplicateError

KINDS = ("constant", "li2020", "li2020_quadratic", "inverse")


@dataclass(frozen=True)
class LRSchedule:
    """η_r for round r (constant within a round).

    - ``constant``: η0.
    - ``li2020``: η0 / max(r, 1). The authors' code sets lr = η0/(r+1) *after* round r,
      so rounds 0 and 1 both use η0 (spec §2.1; the paper writes η0/(1+t) per step).
    - ``li2020_quadratic``: η0 / (5 + a·r), the schedule fitted exactly to the
      committed data of Li et al. Figure 2 (spec §4), with a = ``decay``.
    - ``inverse``: η0 / (1 + decay·r). With η0 = 2/(μγ) and decay = E/γ this is Li et al.
      Theorem 1's η_t = 2/(μ(γ + t)) at the round's first step t = rE (the engine applies one
      η per round, so the round's later steps use up to (1 + E/γ)× the theorem's η_t).
    """

    kind: str = "constant"
    lr0: float = 0.1
    decay: float = 0.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ReplicateError(f"unknown lr schedule {self.kind!r}; choose one of {', '.join(KINDS)}")
        if not self.lr0 > 0:
            raise ReplicateError(f"learning rate must be positive, got {self.lr0}")
        if self.kind == "inverse" and not self.decay >= 0:
            raise ReplicateError(f"the inverse schedule needs decay >= 0, got {self.decay}")

    def __call__(self, round_: int) -> float:
        if self.kind == "constant":
            return self.lr0
        if self.kind == "li2020":
            return self.lr0 / max(round_, 1)
        if self.kind == "inverse":
            return self.lr0 / (1.0 + self.decay * round_)
        return self.lr0 / (5.0 + self.decay * round_)
