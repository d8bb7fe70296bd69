"""A training run as one frozen dataclass, and how to build it.

Flow (as in the notebooks): ``parameters`` cell → ``RunConfig(...)`` → ``run(config)``.
A run config composes the algorithm's own frozen dataclass (``FedAvg(scheme=…)``,
``FedProx(prox_mu=…)``, ``LocalUpdate(alpha=…)``, …: its settings, named as in its paper,
checked by it) with what every run has: data, model, local work, client rate and schedule,
local objective, rounds and seed. Defaults are neutral (constant rate, no weight decay, no
clipping); a paper's conventions are a preset its experiments pass, e.g. Li et al.'s
``LI2020_OBJECTIVE`` (their schedule, λ = 1e-4, clipping at 60).
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import re
from dataclasses import dataclass, field

import torch

from replicate.core import settings
from replicate.core.checks import check_fields, check_seed
from replicate.fl import engine
from replicate.fl import models
from replicate.fl import problems
from replicate.core.errors import ReplicateError
from replicate.data.federated import FederatedDataset
from replicate.fl.algorithms import ALGORITHMS, FedAvg, LocalWork, name_of
from replicate.fl.models.module import as_model
from replicate.fl.schedules import FORMER_NAMES, LRSchedule

DEFAULT_LOCAL_STEPS = 50
_RECORDED = contextvars.ContextVar("recorded", default=False)  # a config read back (``from_dict``), not made
_SYNTHETIC = re.compile(r"^synthetic\(([0-9.]+),\s*([0-9.]+)\)$")


@dataclass(frozen=True)
class RunConfig:
    # a registered dataset's name ("synthetic(1,1)", "mnist_balanced", "quadratic", …, ``data.available()``),
    # "given" (``build``'s problem), or a FederatedDataset of one's own (``data.federate``: cached under
    # its contents' name, ``runs.own``)
    dataset: str | FederatedDataset
    data_seed: int | None = None  # partition seed; None = the builder's documented default
    num_clients: int | None = None  # N for synthetic sets, the first N writers of femnist; None = builder default
    # a preset's name ("logistic", "mlp", "cnn", "lenet", "lenet5", "conv_dropout", "char_lstm", "sent_lstm"), or
    # a torch.nn.Module of one's own (``fl.models.module``; cached under its contents' name, ``runs.own``)
    model: str | torch.nn.Module | models.Model = "logistic"
    hidden: int | None = None  # width of the model's hidden layer / LSTM; None = the model's (authors' code)
    algorithm: object = field(default_factory=FedAvg)  # an algorithm's settings: an instance of an ALGORITHMS class
    local_steps: int | None = None  # E, in SGD steps (Li et al.: the authors' num_epoch × 10); 50 when neither is set
    local_epochs: int | None = None  # E, in epochs of ⌈n_k/b⌉ steps (FedProx); one of the two, never both
    batch_size: int | None = 64  # b; None = full local gradient
    client_lr: float = 0.1  # η0 (γ of Charles & Konečný, η of STEM)
    lr_schedule: str = "constant"  # see replicate.fl.schedules
    lr_decay: float = 0.0  # the schedule's decay constant (a in η0/(5 + a·r), ...)
    weight_decay: float = 0.0  # λ, added to every local gradient
    clip_norm: float | None = None  # clip each local loss gradient's norm (Li et al.'s code: 60)
    rounds: int = 200  # T/E
    seed: int = 0  # init, sampling, mini-batch, straggler and dropout streams derive from it by role
    eval_every: int = 1
    execution: str = "stacked"  # "stacked", "sequential" (same maths) or "auto" (engine.preferred_execution)

    def __post_init__(self):
        check_fields(self)  # each plain field's type first: rounds=2.5 or client_lr="0.1" is one line
        check_seed(self.seed)
        if self.data_seed is not None:
            check_seed(self.data_seed, "data_seed")
        if not isinstance(self.dataset, (str, FederatedDataset)):
            raise ReplicateError(f"dataset must be a dataset's name or a FederatedDataset (replicate.federate(x, y, "
                                 f"partition)), got {type(self.dataset).__name__}")
        if isinstance(self.dataset, FederatedDataset) and (self.data_seed, self.num_clients) != (None, None):
            raise ReplicateError("data_seed and num_clients choose a registered dataset's partition; a "
                                 "FederatedDataset is already partitioned: leave them unset")
        if not isinstance(self.model, (str, torch.nn.Module, models.Model)):
            raise ReplicateError(f"model must be a preset's name or a torch.nn.Module, got {type(self.model).__name__}")
        if self.local_steps is None and self.local_epochs is None:
            object.__setattr__(self, "local_steps", DEFAULT_LOCAL_STEPS)  # recorded, and so keyed, as given
        if (self.local_steps is None) == (self.local_epochs is None):
            raise ReplicateError("set exactly one of local_steps and local_epochs "
                                 f"(got local_steps={self.local_steps}, local_epochs={self.local_epochs})")
        if self.rounds < 1 or self.eval_every < 1:
            raise ReplicateError(f"rounds and eval_every must be >= 1, got {self.rounds} and {self.eval_every}")
        if self.num_clients is not None and self.num_clients < 1:
            raise ReplicateError(f"num_clients must be >= 1, got {self.num_clients}")
        if isinstance(self.dataset, str) and not _RECORDED.get():
            given = {"seed": self.data_seed, "num_clients": self.num_clients}
            required = [p for p in check_dataset_name(self.dataset) if given.get(p) is None]
            if required:
                raise ReplicateError(f"dataset {self.dataset!r} needs {', '.join(required)}, which a run config "
                                     "cannot give: build it with replicate.data.load(...) and pass the dataset")
        if self.dataset == "quadratic" and (self.data_seed, self.num_clients) != (None, None):
            raise ReplicateError("dataset 'quadratic' is Li et al.'s fixed counterexample: leave data_seed and "
                                 "num_clients unset")
        if self.dataset == "quadratic" and (self.batch_size is not None or self.local_steps is None):
            raise ReplicateError("dataset 'quadratic': its clients take full gradients, so a run gives local_steps "
                                 f"and batch_size=None (got batch_size={self.batch_size!r}, "
                                 f"local_steps={self.local_steps!r})")
        if isinstance(self.model, str) and not _RECORDED.get():
            models.check_preset(self.model, self.hidden)
        if self.execution not in engine.EXECUTIONS:
            raise ReplicateError(f"execution must be one of {', '.join(engine.EXECUTIONS)}, got {self.execution!r}")
        name_of(self.algorithm)  # a registered algorithm's settings (each checks its own in __post_init__)
        self.work()  # every setting is checked here, before any data is loaded or run
        self.objective()
        LRSchedule(self.lr_schedule, self.client_lr, self.lr_decay)

    @property
    def cacheable(self) -> bool:
        """Whether the run cache can name this run as it stands: its dataset and model are named. ``cache.run``
        names a dataset or a ``torch.nn.Module`` of one's own by its contents first (``runs.own.named``)."""
        return isinstance(self.dataset, str) and isinstance(self.model, str)

    @property
    def dataset_name(self) -> str:
        return self.dataset if isinstance(self.dataset, str) else self.dataset.name

    @property
    def algorithm_name(self) -> str:
        return name_of(self.algorithm)

    @property
    def clients_per_round(self) -> int | None:
        """K of the algorithm (None: every client), for cost estimates and labels."""
        return getattr(self.algorithm, "clients_per_round", None)

    def work(self) -> LocalWork:
        if self.local_epochs is not None:
            return LocalWork(self.local_epochs, "epochs", self.batch_size)
        return LocalWork(self.local_steps, "steps", self.batch_size)

    def schedule(self) -> LRSchedule:
        return LRSchedule(self.lr_schedule, self.client_lr, self.lr_decay)

    def objective(self) -> engine.LocalObjective:
        return engine.LocalObjective(self.weight_decay, self.clip_norm)

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    def with_algorithm(self, **changes) -> "RunConfig":
        """This config with some of its algorithm's settings changed."""
        return self.replace(algorithm=dataclasses.replace(self.algorithm, **changes))

    def to_dict(self) -> dict:
        """Every field as JSON-ready values; the algorithm as ``{"name": …, **its settings}``; a dataset or
        model of one's own as its description (never a cache key: ``cacheable``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["dataset"], out["model"] = (self.dataset_name,
                                        self.model if isinstance(self.model, str) else repr(self.model))
        out["algorithm"] = {"name": self.algorithm_name, **dataclasses.asdict(self.algorithm)}
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "RunConfig":
        """The inverse of ``to_dict`` (unknown keys, e.g. a cache sidecar's timings, are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        named = dict(values.get("algorithm") or {})
        if named.get("name") not in ALGORITHMS:
            raise ReplicateError(f"unknown algorithm {named.get('name')!r} in a recorded config; this code knows "
                                 + ", ".join(ALGORITHMS))
        algorithm = ALGORITHMS[named.pop("name")](**{k: tuple(v) if isinstance(v, list) else v
                                                      for k, v in named.items()})
        fields = {k: v for k, v in values.items() if k in known and k != "algorithm"}
        if fields.get("lr_schedule") in FORMER_NAMES:  # recorded before the schedules were renamed
            fields["lr_schedule"] = FORMER_NAMES[fields["lr_schedule"]]
        token = _RECORDED.set(True)  # names this process need not know: a builder of one's own not imported here
        try:
            return cls(**fields, algorithm=algorithm)
        finally:
            _RECORDED.reset(token)

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


@functools.lru_cache(maxsize=64)
def check_dataset_name(name: str) -> tuple[str, ...]:
    """Refuse a dataset name that ``dataset`` cannot build, before any data loads (a dataset of one's own named by
    its contents, ``NAME@digest`` of ``runs.own``, is a cache name: not checked); the parameters its builder needs."""
    from replicate import data

    if name in ("given", "quadratic") or "@" in name or _SYNTHETIC.match(name):
        return ()
    if name == "synthetic":
        raise ReplicateError("dataset 'synthetic' takes its (α, β) in its name: e.g. dataset='synthetic(1,1)'")
    if name not in data.available():
        raise ReplicateError(f"unknown dataset {name!r}: a run names synthetic(α,β), quadratic or a registered "
                             "dataset (replicate.datasets()); for arrays of your own or a partition of your choice, "
                             "pass replicate.federate(x, y, partition) or replicate.load_dataset(name, partition=...)")
    return tuple(p for p, default in data.parameters(name).items() if default is inspect.Parameter.empty)


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


def run_device() -> torch.device:
    """Where runs compute, and so which cache entries they read: the ``REPLICATE_DEVICE`` setting, else CUDA when
    present. Decided here, in the run layer, and handed to the engine as an argument: the engine reads no setting."""
    return torch.device(settings.current().device or ("cuda" if torch.cuda.is_available() else "cpu"))


def build(config: RunConfig, device=None, problem=None):
    """(problem, algorithm, local work, lr schedule, local objective) for a config.

    ``problem`` supplies the federated problem of a ``dataset="given"`` config (e.g. a
    quadratic built from a random spectrum); every other dataset is built from its name.
    """
    device = device or run_device()
    if not config.cacheable and config.dataset != "given":  # a dataset or a model of one's own
        ds = config.dataset if not isinstance(config.dataset, str) else dataset(config.dataset, config.data_seed,
                                                                                 config.num_clients)
        model = models.for_dataset(config.model, ds, hidden=config.hidden) if isinstance(config.model, str) \
            else as_model(config.model)
        problem = problems.SampleProblem(ds, model, device=device)
    elif problem is not None or config.dataset == "given":
        if problem is None or config.dataset != "given":
            raise ReplicateError("pass problem=... exactly when the config says dataset='given'")
    elif config.dataset == "quadratic":
        from replicate.data.quadratic import li2020_counterexample

        problem = problems.QuadraticFederatedProblem(li2020_counterexample(), device=device)
    else:
        ds = dataset(config.dataset, config.data_seed, config.num_clients)
        model = models.for_dataset(config.model, ds, hidden=config.hidden)
        problem = problems.SampleProblem(ds, model, device=device)
    return problem, config.algorithm, config.work(), config.schedule(), config.objective()
