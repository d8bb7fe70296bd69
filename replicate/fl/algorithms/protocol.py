"""The contract between an algorithm and the engine's round loop.

A federated algorithm is six pure functions over a round's *stacked* clients, in the
spirit of fedjax's ``init``/``apply`` pairs (one client = one row of every tensor):

1. ``server_init(params, population) -> server_state`` — once per run; holds whatever
   persists across rounds: server momentum, control variates, per-client state kept as
   ``(N, ...)`` tensors indexed by client id.
2. ``plan(population, work, seed, round) -> RoundPlan`` — which clients train this round,
   their aggregation weights, their learning-rate scales and how much local work each
   does (stragglers do less), and whether the round is a warm-up. A pure function of
   (seed, round): reruns see the same plan.
3. ``client_init(server_state, params, plan, ctx) -> ClientState`` — the stacked client
   state (``"w"``, the local models, always; anchors, control variates, momentum, ...).
   ``ctx.full_grad(w)`` gives each client's full-batch local gradient (MIME-style
   algorithms and SCAFFOLD's option I use it here, at the server model).
4. ``client_step(state, grad, ctx) -> ClientState`` — one local step. ``grad(w)`` is the
   gradient of each client's local objective on *this step's* mini-batch at the rows of
   ``w``; it may be called more than once (STEM evaluates it at two iterates with the same
   mini-batch). The rate is ``ctx.lr``, always an ``(m, 1)`` tensor of per-client rates.
5. ``client_message(state, params, plan, ctx) -> Message`` — what each client uploads.
6. ``server_step(server_state, params, message, plan, ctx) -> (params, server_state)``.

Every function returns its result; the engine always continues from what ``client_step``
returns (an algorithm may update ``state`` in place and return it, or build a new dict),
on every execution path. The engine runs step 4 up to the largest local step count of the
round and leaves a client's state untouched once it has done its own count
(``RoundContext.steps``).

A *warm-up round* (``RoundPlan.warmup``, copied to ``RoundContext.warmup``) is part of the
contract, not a sentinel: the clients evaluate gradients at the broadcast model without
moving it, and the server forms its initial state from their messages (STEM's round 0,
which builds d_1 from an initial batch of b·I samples per worker).

An algorithm whose client update is plain (proximal) SGD on the model says so through
``plain_sgd`` and lets a problem with a fused solver run the whole local solve at once.

Runs batched together train at their own pace (``engine``): a run whose clients are done steps its server
and begins its next round while the others are still in theirs, so one stack holds rows of runs at other
rounds and local steps, trained a pass at a time. An algorithm whose client step reads the round, the local
step, the round's step counts or its warm-up flag (``RoundContext.round``, ``.step``, ``.steps``, ``.warmup``:
in a pass, ``steps`` are the steps each row takes in it, ``round`` and ``step`` no number where rows differ,
``APART``) declares ``lockstep = True`` and its batches keep in step, every run waiting at each round
boundary for the others (``own_pace``); ``client_init``, ``client_message`` and ``server_step`` see the run's
own round.

An algorithm also declares what a round costs in communication, ``vectors = (up, down)``: how many
model-sized vectors a participating client uploads and downloads a round in the algorithm as its paper
states it (FedAvg (1, 1); SCAFFOLD and STEM (2, 2): a model and a control variate or momentum direction
each way). What the simulation keeps at the server for convenience (STEM's last iterates, which a real
worker keeps itself) is not counted. Budgets in bytes (the arena) read it.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, runtime_checkable

import torch

from replicate.core.checks import check_value, make_plain
from replicate.core.errors import ReplicateError
# the declared plain-SGD update and the step an algorithm's client step descends with (``fl/sgd.py``)
from replicate.fl.sgd import PlainSGD, descend_ as descend_

ClientState = dict[str, torch.Tensor]  # every entry stacked over the round's clients: (m, ...)
Message = dict[str, torch.Tensor]
GradFn = Callable[[torch.Tensor], torch.Tensor]  # (m, P) parameters -> (m, P) local gradients


@dataclass(frozen=True)
class Population:
    """What sampling may look at: the clients' weights p_k = n_k/n and sample counts n_k.

    On the CPU whatever the problem's device, like the sampling streams: plans are drawn on the
    host, so every device trains the same clients, and the engine moves what it needs.
    """

    weights: torch.Tensor  # (N,) float64, p_k
    sizes: torch.Tensor  # (N,) int64, n_k (training samples)

    @property
    def num_clients(self) -> int:
        return self.weights.numel()


@dataclass(frozen=True)
class LocalWork:
    """How much local work a client does per round: ``amount`` steps or epochs of batch b.

    ``epochs``: one epoch is one pass over the client's n_k samples in ⌈n_k/b⌉ mini-batches
    (the last one smaller), as in the FedProx code. ``steps``: ``amount`` independent
    mini-batches (Li et al.'s code). A plan may give a client fewer units (stragglers).
    """

    amount: int  # E
    unit: str = "steps"  # "steps" | "epochs"
    batch_size: int | None = None  # b; None = the full local set every step

    def __post_init__(self):
        from replicate.core.errors import ReplicateError

        if self.unit not in ("steps", "epochs"):
            raise ReplicateError(f"local work is counted in 'steps' or 'epochs', got {self.unit!r}")
        if self.amount < 1:
            raise ReplicateError(f"local {self.unit} (E) must be >= 1, got {self.amount}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ReplicateError(f"batch size must be >= 1 or None (full batch), got {self.batch_size}")
        if self.unit == "epochs" and self.batch_size is None:
            raise ReplicateError("local epochs need a batch size b (an epoch is ⌈n_k/b⌉ steps)")

    def steps(self, sizes: torch.Tensor, units: torch.Tensor | None = None) -> torch.Tensor:
        """Local steps per client (int64, like ``sizes``) for ``units`` of work each (None = ``amount``)."""
        units = torch.full_like(sizes, self.amount) if units is None else units.to(sizes.device, torch.int64)
        if self.unit == "steps":
            return units
        return units * torch.div(sizes + self.batch_size - 1, self.batch_size, rounding_mode="floor")


@dataclass(frozen=True)
class RoundPlan:
    """Aggregation ``w_{t+1} = residual · w_t + Σ_j weights[j] · w_j`` over ``clients``.

    ``lr_scale[j]`` multiplies client j's learning rate (Li et al.'s transformed Scheme II);
    ``work[j]`` is client j's units of local work (None = every client does the full amount).
    ``clients`` are sorted and distinct.
    """

    clients: torch.Tensor  # (m,) int64
    weights: torch.Tensor  # (m,) float64
    residual: float = 0.0
    lr_scale: torch.Tensor | None = None  # (m,) float64, None = 1
    work: torch.Tensor | None = None  # (m,) int64, None = LocalWork.amount for all
    warmup: bool = False  # a warm-up round: clients do not move the model (see the module docstring)

    def aggregate(self, global_flat: torch.Tensor, local_flat: torch.Tensor) -> torch.Tensor:
        w = self.weights.to(local_flat.dtype).to(local_flat.device)
        new = w @ local_flat
        if self.residual:
            new = new + self.residual * global_flat
        return new


@dataclass(frozen=True)
class RoundContext:
    """What a round's client functions may know beyond their state."""

    round: int  # t
    params: torch.Tensor  # (P,) the round's global model w_t, as broadcast; (m, P), each row's, when runs are batched
    steps: torch.Tensor  # (m,) int64, each client's local step count this round
    lr: torch.Tensor  # (m, 1) each client's rate this round, in the parameters' dtype and device
    step: int = 0  # the local step being taken (client_step only; ``APART`` where the rows are at other steps)
    warmup: bool = False  # RoundPlan.warmup
    full_grad: GradFn | None = None  # (m, P) -> each client's full-batch local gradient (client_init)

    def at_step(self, step: int) -> "RoundContext":
        """This context at local step ``step``: ``replace(self, step=step)`` without its checks, which cost
        more than a small problem's whole step (≈ 14 µs against ≈ 20 µs of a quadratic client's gradient step)."""
        ctx = object.__new__(type(self))
        ctx.__dict__.update(self.__dict__, step=step)
        return ctx

    def rows(self, index: torch.Tensor) -> "RoundContext":
        """The context seen by the clients at ``index`` (rows of the round's stacked tensors)."""
        params = self.params  # (rows, P) when runs are batched (``replicate.fl.batching``): select rows too
        return replace(self, steps=self.steps.index_select(0, index.to(self.steps.device)),
                       lr=self.lr.index_select(0, index.to(self.lr.device)),
                       params=params.index_select(0, index.to(params.device)) if params.dim() == 2 else params)

    @classmethod
    def stack(cls, contexts: list["RoundContext"]) -> "RoundContext":
        """The contexts of several runs' rounds as one, their rows in order (the inverse of ``rows``): each row's
        broadcast model, step count and rate; the round and local step where they share one, else ``APART``
        (runs at their own pace, ``engine``)."""
        first = contexts[0]
        rounds, steps_at = {c.round for c in contexts}, {c.step for c in contexts}
        return cls(round=first.round if len(rounds) == 1 else APART,
                   params=torch.cat([c.params.expand(c.steps.numel(), -1) for c in contexts]),
                   steps=torch.cat([c.steps for c in contexts]), lr=torch.cat([c.lr for c in contexts]),
                   step=first.step if len(steps_at) == 1 else APART, warmup=first.warmup)


# Every algorithm by the name a RunConfig gives it, and the settings of one instance of each that exercise its
# options: filled by ``register`` where each algorithm is defined.
ALGORITHMS: dict[str, type] = {}
EXAMPLES: dict[str, dict] = {}


def register(name: str, example: dict):
    """Class decorator: ``name`` is the algorithm's name in a ``RunConfig``, ``example`` the keyword settings of
    one instance that exercises its options. The tests that cover each algorithm (engine against the oracle,
    batched against alone, device placement, CUDA) iterate ``ALGORITHMS`` and train ``example(name)`` where
    they have no case of their own, so an algorithm registered here is covered without editing them."""
    def add(cls):
        known = ALGORITHMS.get(name)
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"two algorithms registered as {name!r}: {known.__name__}, {cls.__name__}")
        ALGORITHMS[name] = cls  # the same class defined again (a cell run twice, a module reloaded) replaces it
        EXAMPLES[name] = dict(example)
        _check_types_first(cls)
        if (cls.__doc__ or "").startswith(cls.__name__ + "("):  # the signature a dataclass writes: help(cls) shows
            cls.__doc__ = getattr(sys.modules.get(cls.__module__), "__doc__", None) or cls.__doc__  # its module's
        return cls
    return add


def _check_types_first(cls) -> None:
    """Every setting given to ``cls`` is checked against its field's plain type (``core.checks``) before the
    class's own checks compare it: ``FedAvg(clients_per_round="10")`` is one line, not a ``TypeError`` from ``<``."""
    init, types = cls.__init__, {f.name: f.type for f in dataclasses.fields(cls)}
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            given = signature.bind(self, *args, **kwargs).arguments
        except TypeError:  # a misspelled setting: Python's own message names it
            given = {}
        for name, value in given.items():
            if name in types:
                check_value(cls.__name__, name, value, types[name])
        init(self, *args, **kwargs)
        make_plain(self)  # NumPy scalars made plain numbers: the settings enter a run's key as JSON

    cls.__init__ = __init__


def example(name: str):
    """The registered example of the algorithm ``name`` (``register``)."""
    return ALGORITHMS[name](**EXAMPLES[name])


def fused_update(algorithm) -> PlainSGD | None:
    """The ``PlainSGD`` a fused solver may run for ``algorithm``: its declaration, when its client step *is*
    that declaration's step (``LocalSGDClients.client_step``); None otherwise, so that an algorithm whose
    class writes a client step of its own is trained by that step on every problem, never by a fused
    solve it might silently differ from."""
    declared = getattr(algorithm, "plain_sgd", None)
    step = getattr(getattr(algorithm, "client_step", None), "__func__", None)  # a wrapper's is its inner's
    return declared if declared is not None and step is LocalSGDClients.client_step else None


def own_pace(algorithm) -> bool:
    """Whether batched runs of ``algorithm`` may each begin a round as soon as their own previous one is done
    (the module docstring): every algorithm but one that declares ``lockstep``."""
    return not getattr(algorithm, "lockstep", False)


class Apart:
    """``RoundContext.step`` (or ``.round``) of a stack whose rows are at other local steps (rounds): runs at their
    own pace. No one number, so an algorithm that reads it without declaring ``lockstep`` fails at the read, not
    silently; only the engine's step arithmetic (``+``) passes it on."""

    def __add__(self, other):
        return self

    __radd__ = __add__
    __hash__ = object.__hash__

    def _refuse(self, *_):
        raise ReplicateError("this algorithm's client step reads the round or local step (RoundContext.round, "
                             ".step) of rows that are at other rounds and steps: declare `lockstep = True` on its "
                             "class (protocol.own_pace)")

    __index__ = __int__ = __float__ = __bool__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


APART = Apart()


def client_settings(algorithm) -> tuple:
    """What runs trained as one batch (``replicate.fl.batching``) must share: the algorithm's class and
    the settings its client half reads, ``client_fields`` (every setting where a class declares none).
    The plan's and the server's settings (K, η_s, momentum, ...) may differ run to run, and so may a
    client setting the algorithm puts in its client state as a column, one row per client (FedProx's μ,
    LocalUpdate's α, STEM's c): its client step then reads the row's own value."""
    names = getattr(type(algorithm), "client_fields", None)
    if names is None and not dataclasses.is_dataclass(algorithm):  # settings unknown: batches only with itself
        return (type(algorithm).__name__, id(algorithm))
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(algorithm))
    return (type(algorithm).__name__, tuple((name, getattr(algorithm, name)) for name in names))


class LocalSGDClients:
    """The client half of every algorithm whose clients run plain SGD from the broadcast model and
    upload their local model (FedAvg, FedProx with its proximal step, FedAdam): inherit it, declare the
    update in ``plain_sgd`` and write the server half. The step is the declaration's (``PlainSGD.step``),
    and a fused solver runs the same declaration (``fused_update``): one statement of the update."""

    vectors = (1, 1)  # the model down, the local model up

    @functools.cached_property  # read every local step: made once per algorithm object
    def plain_sgd(self) -> PlainSGD:
        return PlainSGD()

    def client_init(self, server_state, params, plan, ctx):
        return self.plain_sgd.client_init(params, plan.clients.numel())

    def client_step(self, state, grad, ctx):
        return self.plain_sgd.step(state, grad, ctx)

    def client_message(self, state, params, plan, ctx):
        return {"w": state["w"]}


@runtime_checkable
class Algorithm(Protocol):
    """See the module docstring for the order of calls and what each function sees."""

    plain_sgd: PlainSGD | None

    def server_init(self, params: torch.Tensor, population: Population) -> Any: ...

    def plan(self, population: Population, work: LocalWork, seed: int, round_: int) -> RoundPlan: ...

    def client_init(self, server_state: Any, params: torch.Tensor, plan: RoundPlan,
                    ctx: RoundContext) -> ClientState: ...

    def client_step(self, state: ClientState, grad: GradFn, ctx: RoundContext) -> ClientState: ...

    def client_message(self, state: ClientState, params: torch.Tensor, plan: RoundPlan,
                       ctx: RoundContext) -> Message: ...

    def server_step(self, server_state: Any, params: torch.Tensor, message: Message, plan: RoundPlan,
                    ctx: RoundContext) -> tuple[torch.Tensor, Any]: ...


def server_move(params: torch.Tensor, target: torch.Tensor, server_lr: float) -> torch.Tensor:
    """x ← x + η_s (target − x): a server step of size η_s toward the aggregate (η_s = 1: the aggregate)."""
    if server_lr == 1.0:
        return target
    return params + server_lr * (target - params)
