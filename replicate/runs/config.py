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
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import ALGORITHMS, LocalWork
from replicate.fl.schedules import LRSchedule

_SYNTHETIC = re.compile(r"^synthetic\(([0-9.]+),\s*([0-9.]+)\)$")


@dataclass(frozen=True)
class RunConfig:
    dataset: str  # "synthetic(1,1)", "synthetic_iid", "mnist_balanced", "mnist_unbalanced", "quadratic", "given"
    data_seed: int | None = None  # partition seed; None = the builder's documented default
    num_clients: int | None = None  # N for synthetic sets, the first N writers of femnist; None = builder default
    model: str = "logistic"  # "logistic", "mlp", "cnn", "lenet", "conv_dropout", "char_lstm" (Shakespeare), "sent_lstm" (Sent140)
    hidden: int | None = None  # width of the model's hidden layer / LSTM; None = the model's (authors' code)
    algorithm: str = "fedavg"  # a name of replicate.fl.algorithms.ALGORITHMS
    scheme: str = "scheme1"  # FedAvg's sampling and averaging scheme (Li et al. §3.3)
    sampling: str = "uniform"  # FedProx: "uniform" (final code) or "proportional" (draft Algorithm 2)
    clients_per_round: int | None = 10  # K (None = every client: SCAFFOLD, LocalUpdate)
    local_steps: int | None = 50  # E, in SGD steps (the authors' num_epoch × 10)
    local_epochs: int | None = None  # E, in epochs of ⌈n_k/b⌉ steps (FedProx); set local_steps=None
    batch_size: int | None = 64  # b; None = full local gradient
    client_lr: float = 0.1  # η0
    lr_schedule: str = "li2020"  # see replicate.fl.schedules
    lr_decay: float = 0.0  # a in η0/(5 + a·r)
    weight_decay: float = 1e-4  # λ
    clip_norm: float | None = 60.0
    prox_mu: float = 0.0  # μ (FedProx), α (LocalUpdate)
    straggler_fraction: float = 0.0  # d: FedProx keeps stragglers' partial work, FedAvg drops them
    server_lr: float = 1.0  # η_s (η_g of SCAFFOLD, η of LocalUpdate)
    server_momentum: float = 0.0  # β (LocalUpdate's ServerOpt)
    nesterov: bool = False
    momentum_c: float = 1.0  # c of STEM's momentum weight a = min{1, c·η²}
    message_coefficients: tuple[float, ...] | None = None  # a of LocalUpdate; None = 1_K
    rounds: int = 200  # T/E
    seed: int = 0  # init, sampling, mini-batch, straggler and dropout streams derive from it by role
    eval_every: int = 1
    execution: str = "stacked"  # "stacked", "sequential" (same maths) or "auto" (engine.preferred_execution)

    def __post_init__(self):
        if (self.local_steps is None) == (self.local_epochs is None):
            raise ReplicateError("set exactly one of local_steps and local_epochs "
                                 f"(got local_steps={self.local_steps}, local_epochs={self.local_epochs})")
        if self.rounds < 1:
            raise ReplicateError(f"rounds must be >= 1, got {self.rounds}")
        if self.execution not in engine.EXECUTIONS:
            raise ReplicateError(f"execution must be one of {', '.join(engine.EXECUTIONS)}, got {self.execution!r}")
        self.build_algorithm()  # every setting is checked here, before any data is loaded or run
        self.work()
        self.objective()
        LRSchedule(self.lr_schedule, self.client_lr, self.lr_decay)

    def build_algorithm(self):
        """The algorithm this config names, from the registry, with its placement-named settings."""
        if self.algorithm not in ALGORITHMS:
            raise ReplicateError(f"unknown algorithm {self.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
        settings = {
            "fedavg": dict(scheme=self.scheme, clients_per_round=self.clients_per_round, server_lr=self.server_lr,
                           straggler_fraction=self.straggler_fraction),
            "fedprox": dict(prox_mu=self.prox_mu, clients_per_round=self.clients_per_round, sampling=self.sampling,
                            straggler_fraction=self.straggler_fraction, server_lr=self.server_lr),
            "scaffold": dict(clients_per_round=self.clients_per_round, server_lr=self.server_lr),
            "stem": dict(momentum_c=self.momentum_c),
            "local_update": dict(server_lr=self.server_lr, a=self.message_coefficients, momentum=self.server_momentum,
                                 nesterov=self.nesterov, clients_per_round=self.clients_per_round,
                                 prox_mu=self.prox_mu),
        }[self.algorithm]
        if self.algorithm == "fedavg" and self.prox_mu:
            raise ReplicateError("prox_mu (μ) needs algorithm='fedprox' (FedAvg has no proximal term)")
        if self.algorithm == "stem" and self.clients_per_round is not None:
            raise ReplicateError("stem runs every client every round (full participation): set clients_per_round=None")
        if self.algorithm in ("fedavg", "fedprox") and self.clients_per_round is None:
            raise ReplicateError(f"{self.algorithm} needs clients_per_round (K)")
        return ALGORITHMS[self.algorithm](**settings)

    def work(self) -> LocalWork:
        if self.local_epochs is not None:
            return LocalWork(self.local_epochs, "epochs", self.batch_size)
        return LocalWork(self.local_steps, "steps", self.batch_size)

    def objective(self) -> engine.LocalObjective:
        return engine.LocalObjective(self.weight_decay, self.clip_norm)

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


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
    return data.load(name, **seed, **clients)  # a builder without num_clients refuses it by name


def build(config: RunConfig, device=None, problem=None):
    """(problem, algorithm, local work, lr schedule, local objective) for a config.

    ``problem`` supplies the federated problem of a ``dataset="given"`` config (e.g. a
    quadratic built from a random spectrum); every other dataset is built from its name.
    """
    device = device or engine.default_device()
    if problem is not None or config.dataset == "given":
        if problem is None or config.dataset != "given":
            raise ReplicateError("pass problem=... exactly when the config says dataset='given'")
    elif config.dataset == "quadratic":
        from replicate.data.quadratic import li2020_counterexample

        problem = problems.QuadraticFederatedProblem(li2020_counterexample(), device=device)
    else:
        ds = dataset(config.dataset, config.data_seed, config.num_clients)
        model = models.for_dataset(config.model, ds, hidden=config.hidden)
        problem = problems.SampleProblem(ds, model, device=device)
    schedule = LRSchedule(config.lr_schedule, config.client_lr, config.lr_decay)
    return problem, config.build_algorithm(), config.work(), schedule, config.objective()
