"""A training run as one frozen dataclass of flat scalars, and how to build it.

Flow (as in the notebooks): ``parameters`` cell → ``RunConfig(...)`` → ``run(config)``.
Names carry their placement (``client_lr``-style) and the paper's symbol in a comment.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from replicate.fl import engine
from replicate.fl import models
from replicate.fl import problems
from replicate.fl.algorithms import FedAvg
from replicate.core.errors import ReplicateError
from replicate.fl.schedules import LRSchedule

_SYNTHETIC = re.compile(r"^synthetic\(([0-9.]+),\s*([0-9.]+)\)$")


@dataclass(frozen=True)
class RunConfig:
    dataset: str  # "synthetic(1,1)", "synthetic_iid", "mnist_balanced", "mnist_unbalanced", "quadratic"
    data_seed: int | None = None  # partition seed; None = the builder's documented default
    num_clients: int | None = None  # N for synthetic sets; None = builder default (100)
    model: str = "logistic"
    scheme: str = "scheme1"
    clients_per_round: int = 10  # K
    local_steps: int = 50  # E, in SGD steps (the authors' num_epoch × 10)
    batch_size: int | None = 64  # b; None = full local gradient
    lr: float = 0.1  # η0
    lr_schedule: str = "li2020"  # see replicate.fl.schedules
    lr_decay: float = 0.0  # a in η0/(5 + a·r)
    weight_decay: float = 1e-4  # λ
    clip_norm: float | None = 60.0
    prox_mu: float = 0.0  # μ (FedProx)
    rounds: int = 200  # T/E
    seed: int = 0  # init, sampling and mini-batch streams derive from it by role
    eval_every: int = 1

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


def for_profile(cls, profile: str, overrides: dict):
    """A figure config at ``profile`` ("paper" = the dataclass defaults, "smoke" = ``cls.smoke()``),
    with ``overrides`` checked against its fields."""
    if profile not in ("smoke", "paper"):
        raise ReplicateError(f"profile must be 'smoke' or 'paper', got {profile!r}")
    base = cls() if profile == "paper" else cls.smoke()
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ReplicateError(f"{cls.__name__} has no parameter(s) {unknown}; valid: {', '.join(names)}")
    return dataclasses.replace(base, **overrides)


def make(**params) -> RunConfig:
    """``RunConfig(**params)`` with a readable error for misspelled parameters."""
    unknown = sorted(set(params) - set(RunConfig.fields()))
    if unknown:
        raise ReplicateError(f"unknown run parameter(s) {unknown}; valid: {', '.join(RunConfig.fields())}")
    return RunConfig(**params)


@functools.lru_cache(maxsize=8)
def dataset(name: str, data_seed: int | None, num_clients: int | None):
    """Build (once per process) the federated dataset a config names."""
    from replicate import data

    seed = {} if data_seed is None else {"seed": data_seed}
    clients = {} if num_clients is None else {"num_clients": num_clients}
    match = _SYNTHETIC.match(name)
    if match:
        return data.load("synthetic", alpha=float(match[1]), beta=float(match[2]), **clients, **seed)
    if name == "synthetic_iid":
        return data.load("synthetic_iid", **clients, **seed)
    return data.load(name, **seed)


def build(config: RunConfig, device=None):
    """(problem, algorithm, client update, lr schedule) for a config."""
    device = device or engine.default_device()
    if config.dataset == "quadratic":
        from replicate.data.quadratic import li2020_counterexample

        problem = problems.QuadraticFederatedProblem.li2020(li2020_counterexample(), device=device)
    else:
        ds = dataset(config.dataset, config.data_seed, config.num_clients)
        model = models.build(config.model, ds.num_features, ds.num_classes)
        problem = problems.SampleProblem(ds, model, device=device)
    algorithm = FedAvg(config.scheme, config.clients_per_round)
    update = engine.ClientUpdate(steps=config.local_steps, batch_size=config.batch_size,
                                 weight_decay=config.weight_decay, clip_norm=config.clip_norm,
                                 prox_mu=config.prox_mu)
    schedule = LRSchedule(config.lr_schedule, config.lr, config.lr_decay)
    return problem, algorithm, update, schedule
