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
models), ``static`` (stacked with one shape a round: a finished client's rows keep computing and
are discarded, so a model's step can be replayed from a CUDA graph: ``core.cuda_graphs``) or ``sequential`` (one client after another through the same algorithm code, which
is faster for large neural models on a CPU). A plain-SGD algorithm, whose client step is its
``plain_sgd`` declaration's (``protocol.fused_update``), may hand the whole local solve to a model's
fused solver (``fused=True``, the logistic regression's): the same declared update either way.

Runs batched together (``run_batch``) are rows too, and go at their own pace (``RunOptions.pace``): a run whose
clients are done takes its server step and begins its next round while the others are still in theirs, so a
batch lasts as long as its longest run alone, not the sum of every round's longest (``batching.own_pace_steps``).
"""
from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from replicate.core import rng
from replicate.core.numerics import device_numerics
from replicate.core.threads import threads
from replicate.core.errors import ReplicateError
from replicate.fl import batching
from replicate.fl.sgd import LocalObjective
from replicate.fl.algorithms import protocol
from replicate.fl.algorithms.protocol import Algorithm, LocalWork, RoundContext, fused_update
from replicate.fl.problems import Problem
from replicate.fl.resume import Checkpointed, Checkpoints, restore
from replicate.fl.schedules import LRSchedule

EXECUTIONS = ("stacked", "static", "sequential", "auto")
PACES = ("own", "lockstep")
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
    pace: str = "own"  # batched runs: "own", each begins its next round when its clients are done; "lockstep"
    progress: bool = False
    desc: str | None = None

    def __post_init__(self):
        if self.rounds < 1:
            raise ReplicateError(f"rounds must be >= 1, got {self.rounds}")
        if self.execution not in EXECUTIONS:
            raise ReplicateError(f"execution must be one of {', '.join(EXECUTIONS)}, got {self.execution!r}")
        if self.pace not in PACES:
            raise ReplicateError(f"pace must be one of {', '.join(PACES)}, got {self.pace!r}")


@dataclass(frozen=True)
class Trainer:
    """How a round's local steps are computed: ``train(problem, algorithm, state, ctx, clients, batches,
    objective, noise, execution)`` and ``full_gradients(problem, clients, objective)`` for
    ``RoundContext.full_grad``. The oracle supplies its own (``replicate.fl.oracle.SEQUENTIAL``)."""

    train: Callable
    full_gradients: Callable
    fuses: bool = True  # may hand plain-SGD rounds to a problem's fused solver


@dataclass(frozen=True)
class RunSpec:
    """One run of a batch (``run_batch``): what may differ between runs trained together. Its
    algorithm may differ from the others' only outside its client half (``protocol.client_settings``)."""

    algorithm: Algorithm
    schedule: LRSchedule
    seed: int = 0
    rounds: int | None = None  # None: the options' rounds
    stop: Callable | None = None  # stop(row) -> bool, as ``run``'s


def run(problem: Problem, algorithm: Algorithm, work: LocalWork, schedule: LRSchedule,
        options: RunOptions | None = None, *, trainer: Trainer | None = None, extra_metrics=None, stop=None,
        return_params: bool = False, checkpoints: Checkpoints | None = None, **settings):
    """Train and return the per-round history (and, with ``return_params``, the final parameters).

    ``options`` or its fields as keywords (``rounds=…, seed=…``). Hooks:
    ``extra_metrics(problem, params, round) -> dict`` adds columns to every evaluated row;
    ``stop(row) -> bool`` (the row holds its ``round``) ends training at the first evaluated row it accepts (e.g. a target loss
    reached), which is then the last row: rounds-to-target sweeps need no more.
    """
    options = replace(options, **settings) if options is not None else RunOptions(**settings)
    (out,) = run_batch(problem, [RunSpec(algorithm, schedule, options.seed, options.rounds, stop)], work, options,
                       trainer=trainer, extra_metrics=extra_metrics, return_params=return_params, checkpoints=checkpoints)
    return out


def run_batch(problem: Problem, runs: list[RunSpec], work: LocalWork, options: RunOptions | None = None, *,
              trainer: Trainer | None = None, extra_metrics=None, return_params: bool = False,
              checkpoints: Checkpoints | None = None, **settings) -> list:
    """``run`` for several runs at once, trained as one stack of clients (``replicate.fl.batching``):
    a list of what ``run`` returns, one per ``RunSpec``, each the same as that run alone up to float
    rounding. ``options`` gives what the runs share (objective, execution, evaluation, progress).
    ``checkpoints``: each run resumes from its saved state and is saved at the round boundaries it asks
    for; a run resumed joins the others at its round, bitwise the run uninterrupted where its rows compute bitwise
    as the run alone, else to float rounding (at their own pace a resumed batch stacks its rows with other rows
    than before: tests/test_resume.py)."""
    options = replace(options, **settings) if options is not None else RunOptions(**settings)
    if not runs:
        return []
    shared = {protocol.client_settings(spec.algorithm) for spec in runs}
    if len(shared) > 1:
        raise ReplicateError("runs batched together must share their algorithm's client settings; got "
                             + "; ".join(map(str, sorted(shared))))
    trainer = trainer or STACKED
    execution = preferred_execution(problem) if options.execution == "auto" else options.execution
    # Tiny problems (the quadratics: a 21 × 21 bmm per step) run single-threaded: waking a second thread per
    # op cost 34× on a busy 2-core machine (0.19 s vs 6.4 s for 20 rounds of E = 100, Li et al. Fig 2).
    with threads(1 if problem.single_threaded else None), device_numerics(problem.device):
        return _run(problem, runs, work, options, execution, trainer, extra_metrics, return_params,
                    checkpoints or Checkpoints())


class _Run:
    """A run in flight: its global model w_t (``flat``), server state and history rows."""

    def __init__(self, spec: RunSpec, problem, population, default_rounds: int):
        self.spec, self.algorithm, self.schedule, self.seed = spec, spec.algorithm, spec.schedule, spec.seed
        self.rounds = spec.rounds or default_rounds
        self.flat = problem.init(spec.seed)
        self.server = spec.algorithm.server_init(self.flat, population)
        self.rows, self.done, self.next = [], False, 0  # next: the round it begins next (a resumed run: its round)
        self.part: batching.Part | None = None  # its round in training
        self.rows_before = 0  # its history's length when that round began (before the round's evaluation)

    def resume(self, saved: dict | None) -> None:
        """Go on from a saved state; one that does not fit this run (another model's shape, another server
        state) is said so and the run starts over."""
        if saved is None:
            return
        device = self.flat.device
        try:
            flat = saved["flat"]
            if not isinstance(flat, torch.Tensor) or flat.shape != self.flat.shape or flat.dtype != self.flat.dtype:
                raise ValueError("its model does not have this run's shape")
            server = restore(self.server, saved["server"], device)
        except (KeyError, ValueError) as exc:
            warnings.warn(f"a saved state does not fit this run ({exc}): the run starts over", stacklevel=2)
            return
        self.flat, self.server, self.rows, self.next = flat.to(device), server, saved["rows"], saved["round"]
        self.done = saved.get("done", False)

    def checkpoint(self) -> dict:
        """What a resume needs: at the round boundary it stands at, or, in a round, the one that round began at
        (the clients' work in it is redone on resume: every draw is named by its round)."""
        if self.part is None:
            return self.state(self.next)
        return {**self.state(self.next - 1), "rows": self.rows[:self.rows_before]}  # model, server: still round r's

    def state(self, r: int) -> dict:
        """All a resume needs, before round r's evaluation and training."""
        return {"round": r, "flat": self.flat, "server": self.server, "rows": list(self.rows), "done": self.done}


def _begin(run: _Run, problem, population, sizes, work, trainer, objective, r) -> batching.Part | None:
    """Run ``run``'s round r up to its client state: plan, rates, step counts (None: nobody trains). Its
    mini-batches are drawn after, with every run's at once (``_draw``)."""
    algorithm, flat, device = run.algorithm, run.flat, run.flat.device
    plan = algorithm.plan(population, work, run.seed, r)
    clients = plan.clients.to(device)
    if not clients.numel():  # nobody trains (every client straggled and was dropped)
        return None
    lr = torch.full((clients.numel(),), run.schedule(r), dtype=torch.float64, device=device)
    if plan.lr_scale is not None:
        lr = lr * plan.lr_scale.to(device)
    steps = work.steps(sizes[plan.clients.cpu()], plan.work)  # on the host (``sizes`` are): no wait for the device
    full_grad = trainer.full_gradients(problem, clients, objective)
    ctx = RoundContext(round=r, params=flat, steps=steps.to(device), lr=lr.to(flat.dtype).unsqueeze(1),
                       warmup=plan.warmup, full_grad=full_grad)
    state = algorithm.client_init(run.server, flat, plan, ctx)
    return batching.Part(run, plan, ctx, clients, None, state, run.seed, most=int(steps.max()))


def _draw(parts: list[batching.Part], problem, work) -> None:
    """The parts' mini-batches, each of its round r from its run's stream (seed, "batches", r), drawn together. The
    stream is made only by a problem that draws (a quadratic's clients take full gradients): making it costs
    more than the rest of such a round's host work."""
    requests = [(p.clients, p.ctx.steps, functools.partial(rng.generator, p.seed, "batches", p.ctx.round))
                for p in parts]
    for part, batches in zip(parts, problem.draw_batches(requests, work)):
        part.batches = batches


def absorbed(flat: torch.Tensor) -> bool:
    """Whether a run has diverged for good: every parameter NaN. NaN is absorbing for every algorithm here
    (each new model is made from the old one by products and sums: w ← decay·w − η·g, averages, server
    moves), so it stays all NaN, and its metrics, a function of the model alone, repeat round after round."""
    return bool(torch.isnan(flat).all())


def _fill(run: _Run, r: int, eval_every: int) -> None:
    """The rest of an absorbed run's history without training it: its last row at every later evaluation
    round (the stop hook applied as it would be), the final model's row last. Bitwise what training it to
    the end records (tests/test_engine.py); a diverged run of a tuning grid costs its rounds up to here."""
    last = run.rows[-1]
    for later in range(r + eval_every, run.rounds, eval_every):
        run.rows.append({**last, "round": later, "lr": run.schedule(later)})
        if run.spec.stop is not None and run.spec.stop(run.rows[-1]):
            return
    run.rows.append({**last, "round": run.rounds, "lr": run.schedule(run.rounds)})


def _run(problem, specs, work, options, execution, trainer, extra_metrics, return_params, checkpoints):
    """The round loop of every run of the batch. Each pass: the runs at a round boundary are evaluated and begin
    their next round (``boundary``), then every run's clients in a round train together for as many local steps as
    the first of those rounds still needs (``_train``). At their own pace runs never wait for each other; in
    lockstep (``RunOptions.pace``, an algorithm that reads the round's step or warm-up flag, or a fused solver,
    which trains whole rounds) a pass is one round of every run, a run resumed further on joining at its round."""
    objective, eval_every = options.objective, options.eval_every
    plain = fused_update(specs[0].algorithm)  # one client half for all (run_batch checked)
    solver = problem.fused_sgd if options.fused and trainer.fuses and plain is not None else None
    own = options.pace == "own" and solver is None and protocol.own_pace(specs[0].algorithm)
    population = problem.population()
    runs = [_Run(spec, problem, population, options.rounds) for spec in specs]
    for index, run in enumerate(runs):
        run.resume(checkpoints.load(index))
    sizes = population.sizes.cpu()

    def evaluate(run, r):
        extra = extra_metrics(problem, run.flat, r) if extra_metrics is not None else {}
        run.rows.append({"round": r, "lr": run.schedule(r), **problem.evaluate(run.flat), **extra})

    def boundary(run):
        """``run`` before its round r = ``run.next``: its evaluation, then round r begun (or the run done)."""
        r, before = run.next, len(run.rows)
        if r == run.rounds:  # the final model's row
            run.done = True
            if eval_every is not None:
                evaluate(run, r)
        elif eval_every is not None and r % eval_every == 0:
            evaluate(run, r)
            run.done = run.spec.stop is not None and run.spec.stop(run.rows[-1])
            if not run.done and extra_metrics is None and absorbed(run.flat):
                _fill(run, r, eval_every)
                run.done = True
        if run.done:  # its state before this evaluation: a longer run of it may go on from here (or end here too)
            checkpoints.end(runs.index(run), {**run.state(r), "rows": run.rows[:before], "done": False})
        else:  # round r begun (None: nobody trains in it, and the run stands at round r + 1)
            run.part = _begin(run, problem, population, sizes, work, trainer, objective, r)
            run.rows_before, run.next = before, r + 1

    bar = tqdm(total=max(run.rounds for run in runs), desc=options.desc, disable=not options.progress, leave=False,
               mininterval=1.0)
    boundary_passed = min(run.next for run in runs) > 0  # a batch starting at round 0 has nothing to save yet
    while True:
        if boundary_passed and (checkpoints.due() or checkpoints.stop()):
            for index, run in enumerate(runs):  # a finished run too: its rows are not stored until the batch returns
                checkpoints.save(index, run.checkpoint())
            if checkpoints.stop():
                raise Checkpointed(f"stopped at round {_reached(runs)}, the runs in flight saved")
        boundary_passed = True
        waiting = [run for run in runs if run.part is None and not run.done]
        if not own and waiting:  # in lockstep the runs at the batch's earliest round go on; one resumed later waits
            waiting = [run for run in waiting if run.next == min(w.next for w in waiting)]
        for run in waiting:
            boundary(run)
            while own and run.part is None and not run.done:  # nobody trained in its round: on to the next
                boundary(run)
        if fresh := [run.part for run in waiting if run.part is not None]:
            _draw(fresh, problem, work)
        parts = [run.part for run in runs if run.part is not None]
        if not parts and all(run.done for run in runs):
            break
        if parts:
            _train(problem, parts, min(p.left for p in parts) if own else None, solver, plain, trainer, objective,
                   execution)
        bar.update(_reached(runs) - bar.n)
    bar.close()
    histories = [pd.DataFrame(run.rows) for run in runs]
    return [(h, run.flat.detach().cpu()) for h, run in zip(histories, runs)] if return_params else histories


def _reached(runs) -> int:
    """The round every run still training has reached (the longest run's last once all are done)."""
    return min((run.next for run in runs if not run.done), default=max(run.rounds for run in runs))


def _train(problem, parts, steps, solver, plain, trainer, objective, execution) -> None:
    """The parts' clients take their next ``steps`` local steps together (None: the rest of their rounds); a part
    whose round is then done sends its clients' message and its run takes its server step."""
    if steps != 0:  # 0: a part's clients have no step to take this round (every one straggled to none)
        round_ = batching.merge(parts, problem, steps)
        state, ctx = round_.state, round_.ctx
        if solver is not None and round_.batches is not None:  # the same update, one fused solve (PlainSGD)
            state["w"] = solver(ctx.params, round_.clients, ctx.steps, ctx.lr.squeeze(1), round_.batches,
                                objective, plain, runs=round_.runs)
        else:
            state = trainer.train(problem, parts[0].run.algorithm, state, ctx, round_.clients, round_.batches,
                                  objective, round_.noise, execution)
        for part, rows in zip(parts, round_.split(state)):
            part.state = rows
    taken = steps if steps is not None else max(p.left for p in parts)
    for part in parts:
        part.done += taken
        if part.left <= 0:
            run, algorithm = part.run, part.run.algorithm
            message = algorithm.client_message(part.state, run.flat, part.plan, part.ctx)
            run.flat, run.server = algorithm.server_step(run.server, run.flat, message, part.plan, part.ctx)
            run.part = None


STACKED = Trainer(train_clients, full_gradients)
