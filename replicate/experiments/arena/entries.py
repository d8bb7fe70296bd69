"""Who competes in the arena, what each may tune, and what a round of each costs.

An ``Entry`` is one algorithm as its paper states it: a registered algorithm (``fl.algorithms.ALGORITHMS``) with
its fixed settings and its search space, one ``Range`` per hyperparameter (the client rate always; FedProx's μ,
STEM's c, the server rate and momentum of LocalUpdate and FedAdam). Every entry gets the same number of trials:
points drawn from its ranges by a stream named (seed, "tuning", trial, the entry's name), the same on every machine.
A user's algorithm joins as ``path/to/file.py:Name`` (``user_entry``): its class registered with
``fl.algorithms.register``, tuned over the client rate and the ranges its class declares in ``arena_space``
(field → ``(low, high)``, log-uniform, or ``(low, high, "linear")``), its round cost read from its ``vectors``.

Budgets (``rounds``): every entry gets the rounds that cost what ``budget`` rounds of FedAvg cost, counted in
- ``rounds``: communication rounds;
- ``bytes``: model-sized vectors a participating client sends and receives a round (``vectors``, owned by each
  algorithm: FedAvg 1 + 1, SCAFFOLD and STEM 2 + 2, so they get half the rounds);
- ``samples``: samples a client reads a round, local steps × batch size for every entry here (STEM's round 0
  reads its initial batch of b·I samples and counts as a round; its second gradient per step reuses the step's
  samples, so it is not charged).
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass, field

import numpy as np

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.experiments.arena.yours import imported
from replicate.fl.algorithms import ALGORITHMS

BUDGET_KINDS = ("rounds", "bytes", "samples")


@dataclass(frozen=True)
class Range:
    """A hyperparameter's range: log-uniform (rates, μ, c) or uniform (momentum)."""

    low: float
    high: float
    log: bool = True

    def draw(self, u: float) -> float:
        """The value at quantile ``u`` ∈ [0, 1), rounded to 3 significant digits (readable, and one cache key)."""
        value = (math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low))) if self.log
                 else self.low + u * (self.high - self.low))
        return float(f"{value:.3g}")

    def at_edge(self, value: float, share: float = 0.1) -> bool:
        """Whether ``value`` lies in the range's lowest or highest ``share`` (on its scale): the best may lie
        beyond the range searched."""
        if self.log:
            u = (math.log(value) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        else:
            u = (value - self.low) / (self.high - self.low)
        return u < share or u > 1 - share


RATE = Range(1e-3, 1.0)


@dataclass(frozen=True)
class Entry:
    """One competitor: ``algorithm`` (a registry name), its fixed ``settings`` and its ``space`` (hyperparameter →
    Range; ``client_lr`` is the run's client rate, every other name a field of the algorithm's settings)."""

    algorithm: str
    settings: dict = field(default_factory=dict)
    space: dict = field(default_factory=lambda: {"client_lr": RATE})
    schedule: str = "constant"  # STEM's rate diminishes per epoch (its eq. 2): "epoch_cube_root"
    sampled: dict = field(default_factory=dict)  # settings that replace ``settings`` where a round samples K < N

    def samples(self) -> bool:
        """Whether the algorithm can sample clients (STEM has every worker take part every round)."""
        return "clients_per_round" in {f.name for f in dataclasses.fields(ALGORITHMS[self.algorithm])}

    def make(self, clients: int, partial: bool = False, **tuned):
        """The algorithm's settings object with ``clients`` taking part a round (all of them unless ``partial``:
        then K sampled uniformly without replacement, the same K for every entry)."""
        cls = ALGORITHMS[self.algorithm]
        taking_part = {"clients_per_round": clients} if self.samples() else {}
        settings = self.settings | (self.sampled if partial else {})
        return cls(**(taking_part | settings | {k: v for k, v in tuned.items() if k != "client_lr"}))

    def vectors(self) -> tuple[int, int]:
        return tuple(getattr(ALGORITHMS[self.algorithm], "vectors", (1, 1)))


ENTRIES: dict[str, Entry] = {
    "FedAvg": Entry("fedavg", {"scheme": "full"}, sampled={"scheme": "weighted"}),  # sampled: FedProx's FedAvg
    "FedProx": Entry("fedprox", {}, {"client_lr": RATE, "prox_mu": Range(1e-3, 1.0)}),
    "SCAFFOLD-I": Entry("scaffold", {"option": "I"}),
    "SCAFFOLD-II": Entry("scaffold", {"option": "II"}),
    "STEM": Entry("stem", {}, {"client_lr": Range(1e-2, 1.0), "momentum_c": Range(1.0, 1e4)}, "epoch_cube_root"),
    "LocalUpdate heavy-ball": Entry("local_update", {}, {"client_lr": RATE, "server_lr": Range(0.1, 3.0),
                                                          "momentum": Range(0.0, 0.95, log=False)}),
    "LocalUpdate Nesterov": Entry("local_update", {"nesterov": True},
                                  {"client_lr": RATE, "server_lr": Range(0.1, 3.0),
                                   "momentum": Range(0.0, 0.95, log=False)}),
    "FedAdam": Entry("fedadam", {}, {"client_lr": RATE, "server_lr": Range(1e-3, 0.3)}),
}


def trials(name: str, entry: Entry, count: int, seed: int = 0) -> list[dict]:
    """``count`` points of the entry's space, trial t drawn from the stream (seed, "tuning", t, crc32(name))."""
    points = []
    for t in range(count):
        stream = np.random.default_rng(rng.seed_for(seed, "tuning", t, zlib.crc32(name.encode())))
        u = stream.random(len(entry.space))
        points.append({key: space.draw(float(v)) for (key, space), v in zip(entry.space.items(), u)})
    return points


def cost(entry: Entry, kind: str, local_steps: int, batch_size: int) -> float:
    """What one round of ``entry`` costs a participating client, in the unit of ``kind``."""
    if kind == "rounds":
        return 1.0
    if kind == "bytes":
        return float(sum(entry.vectors()))  # model-sized vectors: × 4 P bytes in float32
    if kind == "samples":
        return float(local_steps * batch_size)
    raise ReplicateError(f"budget kind must be one of {', '.join(BUDGET_KINDS)}, got {kind!r}")


def rounds(entry: Entry, kind: str, budget: int, local_steps: int, batch_size: int) -> int:
    """The rounds of ``entry`` that cost what ``budget`` rounds of FedAvg cost (at least one)."""
    reference = Entry("fedavg", {"scheme": "full"})
    spend = budget * cost(reference, kind, local_steps, batch_size)
    return max(1, math.floor(spend / cost(entry, kind, local_steps, batch_size) + 1e-9))


def user_entry(spec: str) -> tuple[str, Entry]:
    """``path/to/file.py:Name``: the file imported as a module (its folder put on ``sys.path``, so worker
    processes import it too) and its class ``Name``, which must be registered (``fl.algorithms.register``)."""
    file, cls = imported(spec, "user_algorithm", "ClassName")
    name = spec.rpartition(":")[2]
    registered = [key for key, value in ALGORITHMS.items() if value is cls]
    if not registered:
        raise ReplicateError(f"{file}:{name} is not registered: decorate it with "
                             "@replicate.fl.algorithms.register(\"its_name\", example={...})")
    return name, Entry(registered[0], {}, {"client_lr": RATE} | _declared_space(cls, f"{file}:{name}"))


def _declared_space(cls, where: str) -> dict:
    """A user's class's ``arena_space``: each of its settings' fields → ``(low, high)`` searched log-uniformly,
    or ``(low, high, "linear")`` uniformly; every entry is checked here, before anything runs."""
    declared = getattr(cls, "arena_space", None) or {}
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    space = {}
    for key, value in dict(declared).items():
        if key not in fields:
            raise ReplicateError(f"{where}: arena_space names {key!r}, not a field of its settings "
                                 f"({', '.join(sorted(fields)) or 'none'})")
        parts = tuple(value) if isinstance(value, (tuple, list)) and len(value) in (2, 3) else (None, None, "?")
        low, high, scale = (parts + (None,))[:3]
        log = scale in (None, "log")
        if scale not in (None, "log", "linear") or not all(isinstance(v, (int, float)) for v in (low, high)) \
                or not low < high or (log and low <= 0):
            raise ReplicateError(f"{where}: arena_space[{key!r}] must be (low, high) with 0 < low < high, or "
                                 f"(low, high, \"linear\") with low < high; got {value!r}")
        space[key] = Range(float(low), float(high), log)
    return space


__all__ = ["BUDGET_KINDS", "ENTRIES", "Entry", "Range", "cost", "rounds", "trials", "user_entry"]
