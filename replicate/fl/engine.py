"""The round loop, with all of a round's sampled clients trained together.

Clients are a tensor dimension: the m sampled clients' states are stacked tensors and
every local step is a handful of batched operations (gather the m mini-batches, one
batched gradient, one update), so the only Python loops are over rounds and local steps.
The algorithm owns the maths (``replicate.fl.algorithms.protocol``); this loop only
samples, draws batches, calls the algorithm, and leaves a client alone once it has done
its own number of local steps. ``replicate.fl.oracle`` runs the same rounds client by
client with autograd; tests check the two agree for every algorithm.

How a round's clients execute is a strategy, not a second implementation of the maths:
``stacked`` (all at once; ``torch.func.vmap`` or a model's own batched path for neural
models) or ``sequential`` (one client after another through the same algorithm code, which
is faster for large neural models on a CPU). A plain-SGD algorithm (``Algorithm.plain_sgd``)
may hand the whole local solve to a model's fused solver (``fused=True``, the logistic
regression's).
"""
from __future__ import annotations

import contextlib

from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from replicate.core import paths, rng
from replicate.core.errors import ReplicateError
from replicate.fl import sgd
from replicate.fl.algorithms.protocol import Algorithm, LocalWork, RoundContext
from replicate.fl.problems import Problem
from replicate.fl.schedules import LRSchedule

EXECUTIONS = ("stacked", "sequential", "auto")


def preferred_execution(problem) -> str:
    """The measured rule behind ``execution="auto"``: stacked everywhere except for large neural
    models on a CPU, where a client loop is faster; the model decides (``Model.cpu_execution``).

    Measured on this project's 2-core CPU (10 clients, batch 10): the FEMNIST CNN under
    ``torch.func.vmap`` 0.61× a client loop, a 22 k-parameter CNN over 100 clients 1.74×; the
    Shakespeare 2 × 256 LSTM batched 117 ms vs 24-32 ms per client on PyTorch's fused kernel,
    Sent140's small LSTM on 25 words 5.1 vs 7.8 ms (``lstm`` module; remeasured after the LSTM's
    hand-written backward, one thread: Shakespeare 80 vs 45 ms, Sent140 5.9 vs 6.8 ms). On CUDA the stacked path
    is the point of the design.
    """
    if torch.device(problem.device).type == "cuda":
        return "stacked"
    return problem.cpu_execution()


@dataclass(frozen=True)
class LocalObjective:
    """What every client's gradient includes besides its loss (Li et al.'s local solver)."""

    weight_decay: float = 0.0  # λ, added to the gradient as λw (inside the optimiser)
    clip_norm: float | None = None  # clip the loss gradient's norm before weight decay

    def __post_init__(self):
        if self.weight_decay < 0:
            raise ReplicateError(f"weight decay (λ) must be >= 0, got {self.weight_decay}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ReplicateError(f"clip_norm must be positive or None, got {self.clip_norm}")

    def gradient(self, loss_grad: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """clip(∇f(w)) + λw, in place on ``loss_grad``."""
        if self.clip_norm is not None:
            sgd.clip_(loss_grad, self.clip_norm)
        if self.weight_decay:
            loss_grad.add_(w, alpha=self.weight_decay)
        return loss_grad


def default_device() -> torch.device:
    """Where runs compute (and which cache entries they read): ``REPLICATE_DEVICE``, else CUDA when present."""
    return torch.device(paths.run_device() or ("cuda" if torch.cuda.is_available() else "cpu"))


def train_clients(problem, algorithm, state, ctx: RoundContext, clients, batches, objective: LocalObjective,
                  seed: int, execution: str = "stacked"):
    """Run every client's local steps (``ctx.steps``) from ``state``; a finished client is left as it is.

    ``stacked``: one group of all m clients; ``sequential``: m groups of one, through the same
    algorithm code. Within a group, the clients still working at step s are the active rows.
    """
    m = clients.numel()
    groups = [None] if execution == "stacked" else [torch.tensor([j], device=clients.device) for j in range(m)]
    for group in groups:
        rows = torch.arange(m, device=clients.device) if group is None else group
        sub = state if group is None else _select(state, group)
        sub_ctx = ctx if group is None else ctx.rows(group)
        for s in range(int(sub_ctx.steps.max())):
            batch = None if batches is None else batches.step(s)
            noise = None if batch is None else problem.dropout_noise(
                batch, rng.generator(seed, "dropout", ctx.round, s, device=clients.device))
            live = sub_ctx.steps > s
            if bool(live.all()):
                sub = _step(problem, algorithm, sub, replace(sub_ctx, step=s), clients, batch, noise, objective, rows)
                continue
            local = live.nonzero().squeeze(1)  # rows of ``sub`` still working
            moved = _step(problem, algorithm, _select(sub, local), replace(sub_ctx.rows(local), step=s), clients,
                          batch, noise, objective, rows.index_select(0, local))
            sub = {k: v.index_copy(0, local, moved[k]) for k, v in sub.items()}
        state = sub if group is None else {k: v.index_copy(0, group, sub[k]) for k, v in state.items()}
    return state


def _select(state, index):
    return {k: v.index_select(0, index) for k, v in state.items()}


def _step(problem, algorithm, state, ctx, clients, batch, noise, objective, rows):
    """One local step of the clients at ``rows`` (rows of the round's stacked tensors); returns their state."""
    every = rows.numel() == clients.numel()  # all of the round's clients: no gather needed
    if not every:
        clients = clients.index_select(0, rows)
        batch = None if batch is None else (batch[0].index_select(0, rows),
                                            None if batch[1] is None else batch[1].index_select(0, rows))
        noise = None if noise is None else noise.index_select(0, rows)

    def grad(w):
        return objective.gradient(problem.grad(w, clients, batch, noise), w)

    return algorithm.client_step(state, grad, ctx)


def full_gradients(problem, clients, objective: LocalObjective):
    """``RoundContext.full_grad``: each client's local-objective gradient on its whole training set."""
    def full_grad(w):
        return objective.gradient(problem.grad(w, clients, problem.full_batch(clients)), w)

    return full_grad


@dataclass(frozen=True)
class RunOptions:
    """How ``run`` trains, besides the problem, the algorithm, the local work and the rate schedule.

    Row r of the history holds the global model's metrics before round r (row ``rounds`` = the
    final model), as the authors' code logs them, for every ``eval_every``-th round; ``None``
    evaluates nothing (an empty history: benchmarks time training alone). ``execution`` and
    ``fused`` choose how clients run (module docstring), never what they compute.
    """

    rounds: int
    seed: int = 0
    objective: LocalObjective = LocalObjective()
    eval_every: int | None = 1
    execution: str = "stacked"  # "stacked", "sequential" or "auto" (preferred_execution)
    fused: bool = True  # let a problem's fused solver run plain-SGD rounds
    progress: bool = False
    desc: str | None = None

    def __post_init__(self):
        if self.rounds < 1:
            raise ReplicateError(f"rounds must be >= 1, got {self.rounds}")
        if self.execution not in EXECUTIONS:
            raise ReplicateError(f"execution must be one of {', '.join(EXECUTIONS)}, got {self.execution!r}")


@dataclass(frozen=True)
class Trainer:
    """How a round's local steps are computed: ``train(problem, algorithm, state, ctx, clients, batches,
    objective, seed, execution)`` and ``full_gradients(problem, clients, objective)`` for
    ``RoundContext.full_grad``. The oracle supplies its own (``replicate.fl.oracle.SEQUENTIAL``)."""

    train: Callable
    full_gradients: Callable
    fuses: bool = True  # may hand plain-SGD rounds to a problem's fused solver


def run(problem: Problem, algorithm: Algorithm, work: LocalWork, schedule: LRSchedule,
        options: RunOptions | None = None, *, trainer: Trainer | None = None, extra_metrics=None, stop=None,
        return_params: bool = False, **settings):
    """Train and return the per-round history (and, with ``return_params``, the final parameters).

    ``options`` or its fields as keywords (``rounds=…, seed=…``). Hooks:
    ``extra_metrics(problem, params, round) -> dict`` adds columns to every evaluated row;
    ``stop(row) -> bool`` (the row holds its ``round``) ends training at the first evaluated row it accepts (e.g. a target loss
    reached), which is then the last row: rounds-to-target sweeps need no more.
    """
    options = replace(options, **settings) if options is not None else RunOptions(**settings)
    trainer = trainer or STACKED
    execution = preferred_execution(problem) if options.execution == "auto" else options.execution
    with _threads(1 if problem.single_threaded else None):
        return _run(problem, algorithm, work, schedule, options, execution, trainer, extra_metrics, stop,
                    return_params)


@contextlib.contextmanager
def _threads(count: int | None):
    """Run with ``count`` intra-op threads, restoring the caller's setting afterwards. Tiny problems
    (the quadratics: a 21 × 21 bmm per step) run single-threaded: waking a second thread per op
    cost 34× on a busy 2-core machine (0.19 s vs 6.4 s for 20 rounds of E = 100, Li et al. Fig 2)."""
    before = torch.get_num_threads()
    if count is not None:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _run(problem, algorithm, work, schedule, options, execution, trainer, extra_metrics, stop, return_params):
    seed, objective, eval_every = options.seed, options.objective, options.eval_every
    solver = problem.fused_sgd if options.fused and trainer.fuses and algorithm.plain_sgd is not None else None
    population = problem.population()
    flat = problem.init(seed)
    device = flat.device
    server = algorithm.server_init(flat, population)
    sizes = population.sizes.to(device)
    rows = []

    def evaluate(r):
        extra = extra_metrics(problem, flat, r) if extra_metrics is not None else {}
        rows.append({"round": r, "lr": schedule(r), **problem.evaluate(flat), **extra})

    for r in tqdm(range(options.rounds), desc=options.desc, disable=not options.progress, leave=False,
                  mininterval=1.0):
        if eval_every is not None and r % eval_every == 0:
            evaluate(r)
            if stop is not None and stop(rows[-1]):
                break
        plan = algorithm.plan(population, work, seed, r)
        clients = plan.clients.to(device)
        if not clients.numel():  # nobody trains (every client straggled and was dropped)
            continue
        lr = torch.full((clients.numel(),), schedule(r), dtype=torch.float64, device=device)
        if plan.lr_scale is not None:
            lr = lr * plan.lr_scale.to(device)
        steps = work.steps(sizes[clients], plan.work)
        full_grad = trainer.full_gradients(problem, clients, objective)
        ctx = RoundContext(round=r, params=flat, steps=steps, lr=lr.to(flat.dtype).unsqueeze(1),
                           warmup=plan.warmup, full_grad=full_grad)
        batches = problem.draw_batches(clients, steps, work, rng.generator(seed, "batches", r, device=device))
        state = algorithm.client_init(server, flat, plan, ctx)
        if solver is not None and batches is not None:  # the same update, one fused solve (PlainSGD)
            state["w"] = solver(flat, clients, steps, ctx.lr.squeeze(1), batches, objective, algorithm.plain_sgd)
        else:
            state = trainer.train(problem, algorithm, state, ctx, clients, batches, objective, seed, execution)
        message = algorithm.client_message(state, flat, plan, ctx)
        flat, server = algorithm.server_step(server, flat, message, plan, ctx)
    else:
        if eval_every is not None:
            evaluate(options.rounds)
    history = pd.DataFrame(rows)
    return (history, flat.detach().cpu()) if return_params else history


STACKED = Trainer(train_clients, full_gradients)
