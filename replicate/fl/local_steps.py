"""How a round's clients take their local steps: one interface, several accelerators.

``local_steps`` is the one call the round loop makes (``fl.engine``): every client of the round, from its
client state, takes its own number of local steps (``RoundContext.steps``) of its algorithm's ``client_step``,
a finished client left as it is. How they compute is chosen by a rule stated once (``accelerator``), never
what they compute:

- ``fused``: a plain-SGD algorithm (its client step is its ``plain_sgd`` declaration's,
  ``protocol.fused_update``) on a problem with a fused solver (the logistic regression's, the quadratic's) hands
  the whole local solve to it: the same declared update, in one call per round;
- ``stacked``: all m clients at once, one batched gradient a step (``torch.func.vmap``, or a model's own batched
  path), the clients still working at step s the active rows;
- ``static``: stacked with one shape a round (a finished client's rows keep computing and are discarded), so a
  model's step can be replayed from a CUDA graph (``core.cuda_graphs``);
- ``sequential``: one client after another through the same algorithm code, which is faster for large neural
  models on a CPU.

``replicate.fl.oracle`` is the plain loop they are each tested against: one client at a time, autograd, no
stacking (tests/test_algorithms.py iterates the registry).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch

from replicate.fl.algorithms.protocol import RoundContext
from replicate.fl.sgd import LocalObjective

EXECUTIONS = ("stacked", "static", "sequential", "auto")
# cuBLAS's condition for deterministic GEMMs; it must be set before the process's first CUDA GEMM
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def preferred_execution(problem) -> str:
    """The rule behind ``execution="auto"``: on a CPU, the model decides (``Model.cpu_execution``: a client loop
    for large neural models, where it measured faster than one stacked step, BENCHMARKS.md); on CUDA the stacked
    path, the point of the design, with one shape a round (``static``) for a model whose step replays from a CUDA
    graph (``Model.graphed``: the LSTMs, launch-bound): a finished client's rows then keep computing, which costs
    the device little where the step is bound by launches."""
    if torch.device(problem.device).type == "cuda":
        return "static" if getattr(getattr(problem, "model", None), "graphed", False) else "stacked"
    return problem.cpu_execution()


def train_clients(problem, algorithm, state, ctx: RoundContext, clients, batches, objective: LocalObjective,
                  noise=None, execution: str = "stacked"):
    """Run every client's local steps (``ctx.steps``) from ``state``; a finished client is left as it is.

    ``stacked``: one group of all m clients; ``sequential``: m groups of one, through the same
    algorithm code. Within a group, the clients still working at step s are the active rows.
    ``static``: one group, every row computed at every step and a finished client's new rows
    discarded (``torch.where``: its state stays bitwise what it was), so the step keeps one shape.
    ``noise(s, batch)`` draws step s's dropout noise for all m rows (``batching.Round.noise``; None:
    no dropout).
    """
    m, static = clients.numel(), execution == "static"
    groups = [None] if execution != "sequential" else [torch.tensor([j], device=clients.device) for j in range(m)]
    for group in groups:
        rows = torch.arange(m, device=clients.device) if group is None else group
        sub = state if group is None else _select(state, group)
        sub_ctx = ctx if group is None else ctx.rows(group)
        steps = sub_ctx.steps.cpu()  # read once a round: no device-to-host wait inside the local steps
        working = sub_ctx.steps.to(clients.device) if static else None  # the same on the device, for the masks
        fewest, most = (int(n) for n in steps.aminmax())  # before step ``fewest`` every client works
        first = ctx.step  # the round's local step these steps start from (``batching.Part.ahead``)
        for s in range(most):
            batch = None if batches is None else batches.step(s)
            step_noise = None if batch is None or noise is None else noise(s, batch)
            everyone = s < fewest
            if everyone or static:
                before = None if everyone else {k: v.clone() for k, v in sub.items()}  # steps update in place
                sub = _step(problem, algorithm, sub, sub_ctx.at_step(first + s), clients, batch, step_noise, objective,
                            rows, static)
                if before is not None:
                    keep = working > s
                    sub = {k: torch.where(keep.view(-1, *[1] * (v.dim() - 1)), v, before[k]) for k, v in sub.items()}
                continue
            local = (steps > s).nonzero().squeeze(1).to(clients.device)  # rows of ``sub`` still working
            moved = _step(problem, algorithm, _select(sub, local), sub_ctx.rows(local).at_step(first + s), clients,
                          batch, step_noise, objective, rows.index_select(0, local))
            for k, v in sub.items():  # in place, as steps update: a copy of every row would cost O(m) a step
                v.index_copy_(0, local, moved[k])
        if group is None:
            state = sub
        else:
            for k, v in state.items():
                v.index_copy_(0, group, sub[k])
    return state


def _select(state, index):
    return {k: v.index_select(0, index) for k, v in state.items()}


def _step(problem, algorithm, state, ctx, clients, batch, noise, objective, rows, static=False):
    """One local step of the clients at ``rows`` (rows of the round's stacked tensors); returns their state.
    ``static``: the step has the round's one shape, so the problem may replay its gradient from a CUDA graph."""
    every = rows.numel() == clients.numel()  # all of the round's clients: no gather needed
    if not every:
        clients = clients.index_select(0, rows)
        batch = None if batch is None else (batch[0].index_select(0, rows),
                                            None if batch[1] is None else batch[1].index_select(0, rows))
        noise = None if noise is None else noise.index_select(0, rows)

    def grad(w):
        return objective.gradient(problem.grad(w, clients, batch, noise, static=static), w)

    return algorithm.client_step(state, grad, ctx)


def full_gradients(problem, clients, objective: LocalObjective):
    """``RoundContext.full_grad``: each client's local-objective gradient on its whole training set."""
    def full_grad(w):
        return objective.gradient(problem.grad(w, clients, problem.full_batch(clients)), w)

    return full_grad


@dataclass(frozen=True)
class Trainer:
    """How a round's local steps are computed: ``train(problem, algorithm, state, ctx, clients, batches,
    objective, noise, execution)`` and ``full_gradients(problem, clients, objective)`` for
    ``RoundContext.full_grad``. The oracle supplies its own (``replicate.fl.oracle.SEQUENTIAL``)."""

    train: Callable
    full_gradients: Callable
    fuses: bool = True  # may hand plain-SGD rounds to a problem's fused solver


STACKED = Trainer(train_clients, full_gradients)


def local_steps(problem, algorithm, round_, trainer: Trainer, objective: LocalObjective, execution: str,
                solver=None):
    """Every client of the merged round ``round_`` (``batching.Round``) takes its local steps of ``algorithm``;
    their new client state. ``solver`` (``problem.fused_sgd``, or None) runs them in one fused solve of each run's
    declared update (``Round.runs``) where the rule allows (``accelerator``); else ``trainer`` (the engine's, or the
    oracle's) steps them with the algorithm's own ``client_step``, by ``execution``."""
    state, ctx = round_.state, round_.ctx
    if accelerator(solver, round_, execution) == "fused":
        state["w"] = solver(ctx.params, round_.clients, ctx.steps, ctx.lr, round_.batches, objective,
                            runs=round_.runs)
        return state
    return trainer.train(problem, algorithm, state, ctx, round_.clients, round_.batches, objective, round_.noise,
                         execution)


def accelerator(solver, round_, execution: str) -> str:
    """The rule, stated once: the fused solver where there is one and it takes the round — a model's solver fuses
    mini-batch steps (a full-batch round has nothing for it to fuse), the quadratic's full-gradient steps
    (``full_batch``) — else the execution asked for (``preferred_execution`` behind "auto")."""
    takes = solver is not None and (round_.batches is not None or getattr(solver, "full_batch", False))
    return "fused" if takes else execution
