"""The round loop, with all of a round's sampled clients trained together.

Clients are a tensor dimension: the m sampled clients' states are stacked tensors and every local step is a
handful of batched operations, so the only Python loops are over rounds and local steps. The algorithm owns
the maths (``replicate.fl.algorithms.protocol``); ``_run`` is the loop, in the order of the mathematics, for
round r of each run:

1. evaluate the global model w_r (a row of its history; a run ends at its last round, its target, or NaN);
2. plan the round: its clients, weights and local work (``algorithm.plan``), rates and step counts;
3. client init (``algorithm.client_init``), then the round's mini-batches, drawn from (seed, "batches", r);
4. local steps: every client its own number of ``algorithm.client_step`` (``fl.local_steps``: the one
   interface behind which the fused, stacked, static and sequential accelerators sit);
5. the clients' message (``algorithm.client_message``) and the server step (``algorithm.server_step``);
6. checkpoint at a round boundary when due (``fl.resume``).

``replicate.fl.oracle`` runs the same rounds client by client with autograd; tests check the two agree for
every algorithm. Runs batched together (``run_batch``) are rows too, and go at their own pace
(``RunOptions.pace``): a run whose clients are done takes its server step and begins its next round while the
others are still in theirs, so a batch lasts as long as its longest run alone (``batching.own_pace_steps``).
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from replicate.core import rng
from replicate.core.errors import ReplicateError
from replicate.core.numerics import device_numerics
from replicate.core.threads import threads
from replicate.fl import batching
from replicate.fl.algorithms import protocol
from replicate.fl.algorithms.protocol import Algorithm, LocalWork, RoundContext, fused_update
from replicate.fl.local_steps import (EXECUTIONS, STACKED, Trainer, full_gradients, local_steps,
                                      preferred_execution, train_clients)
from replicate.fl.problems import Problem
from replicate.fl.resume import Checkpointed, Checkpoints, restore
from replicate.fl.schedules import LRSchedule
from replicate.fl.sgd import LocalObjective

PACES = ("own", "lockstep")


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
    execution: str = "stacked"  # "stacked", "static", "sequential" or "auto" (local_steps.preferred_execution)
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
    ``stop(row) -> bool`` (the row holds its ``round``) ends training at the first evaluated row it accepts (e.g. a
    target loss reached), which is then the last row: rounds-to-target sweeps need no more.
    """
    options = replace(options, **settings) if options is not None else RunOptions(**settings)
    (out,) = run_batch(problem, [RunSpec(algorithm, schedule, options.seed, options.rounds, stop)], work, options,
                       trainer=trainer, extra_metrics=extra_metrics, return_params=return_params,
                       checkpoints=checkpoints)
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
    """Round r of ``run`` planned and its clients initialised (steps 2-3; None: nobody trains in it). Its
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


@dataclass
class _Batch:
    """What every run of a batch shares in the loop: the problem, the local work, how clients train and evaluate."""

    problem: Problem
    work: LocalWork
    trainer: Trainer
    objective: LocalObjective
    execution: str
    eval_every: int | None
    extra_metrics: Callable | None
    checkpoints: Checkpoints
    runs: list

    def __post_init__(self):
        self.population = self.problem.population()
        self.sizes = self.population.sizes.cpu()

    def evaluate(self, run: _Run) -> None:
        """Step 1 for ``run`` at its round r = ``run.next``: the row of w_r where due, and whether the run ends
        here (its last round, its stop hook, or a model all NaN, whose rows repeat: ``_fill``)."""
        r, before = run.next, len(run.rows)
        due = self.eval_every is not None and (r == run.rounds or r % self.eval_every == 0)
        if due:
            extra = self.extra_metrics(self.problem, run.flat, r) if self.extra_metrics is not None else {}
            run.rows.append({"round": r, "lr": run.schedule(r), **self.problem.evaluate(run.flat), **extra})
        run.done = r == run.rounds or due and run.spec.stop is not None and run.spec.stop(run.rows[-1])
        if due and not run.done and self.extra_metrics is None and absorbed(run.flat):
            _fill(run, r, self.eval_every)
            run.done = True
        if run.done:  # its state before this evaluation: a longer run of it may go on from here (or end here too)
            self.checkpoints.end(self.runs.index(run), {**run.state(r), "rows": run.rows[:before], "done": False})
        run.rows_before = before

    def begin(self, run: _Run) -> None:
        """Steps 2-3 for ``run``'s round r: planned and begun (``run.part``; None: nobody trains, and the run
        stands at round r + 1)."""
        r = run.next
        run.part = _begin(run, self.problem, self.population, self.sizes, self.work, self.trainer, self.objective, r)
        run.next = r + 1

    def train(self, parts: list[batching.Part], steps: int | None, solver) -> None:
        """Step 4: the parts' clients take their next ``steps`` local steps together, as one stack of rows (None:
        the rest of their rounds; ``batching.merge``)."""
        if steps != 0:  # 0: a part's clients have no step to take this round (every one straggled to none)
            round_ = batching.merge(parts, self.problem, steps)
            state = local_steps(self.problem, parts[0].run.algorithm, round_, self.trainer, self.objective,
                                self.execution, solver)
            for part, rows in zip(parts, round_.split(state)):
                part.state = rows
        taken = steps if steps is not None else max(p.left for p in parts)
        for part in parts:
            part.done += taken

    def save(self) -> None:
        """Step 6: every run's state (a finished one's too: its rows are not stored until the batch returns)."""
        for index, run in enumerate(self.runs):
            self.checkpoints.save(index, run.checkpoint())


def _server_step(part: batching.Part) -> None:
    """Step 5 for a run whose clients are done: their message, then the server's step to w_{r+1}."""
    run, algorithm = part.run, part.run.algorithm
    message = algorithm.client_message(part.state, run.flat, part.plan, part.ctx)
    run.flat, run.server = algorithm.server_step(run.server, run.flat, message, part.plan, part.ctx)
    run.part = None


def _run(problem, specs, work, options, execution, trainer, extra_metrics, return_params, checkpoints):
    """The round loop of every run of the batch (the module docstring's steps 1-6). Each pass: the runs at a round
    boundary are evaluated and begin their next round, then every run's clients in a round train together for as
    many local steps as the first of those rounds still needs, and the runs whose clients are done take their
    server step. At their own pace runs never wait for each other; in lockstep (``RunOptions.pace``, an algorithm
    that reads the round's step or warm-up flag, or a fused solver, which trains whole rounds) a pass is one round
    of every run, a run resumed further on joining at its round."""
    plain_sgd = fused_update(specs[0].algorithm)  # one client half for all (run_batch checked)
    solver = problem.fused_sgd if options.fused and trainer.fuses and plain_sgd is not None else None
    own = options.pace == "own" and solver is None and protocol.own_pace(specs[0].algorithm)
    population = problem.population()
    runs = [_Run(spec, problem, population, options.rounds) for spec in specs]
    for index, run in enumerate(runs):
        run.resume(checkpoints.load(index))
    batch = _Batch(problem, work, trainer, options.objective, execution, options.eval_every, extra_metrics,
                   checkpoints, runs)
    # disable=None: no bar where stderr is not a terminal (a job's log file); a terminal and a notebook keep it
    bar = tqdm(total=max(run.rounds for run in runs), desc=options.desc, disable=None if options.progress else True,
               leave=False, mininterval=1.0)
    boundary_passed = min(run.next for run in runs) > 0  # a batch starting at round 0 has nothing to save yet
    while True:
        if boundary_passed and (checkpoints.due() or checkpoints.stop()):  # 6. checkpoint
            batch.save()
            if checkpoints.stop():
                raise Checkpointed(f"stopped at round {_reached(runs)}, the runs in flight saved")
        boundary_passed = True
        waiting = [run for run in runs if run.part is None and not run.done]
        if not own and waiting:  # in lockstep the runs at the batch's earliest round go on; one resumed later waits
            waiting = [run for run in waiting if run.next == min(w.next for w in waiting)]
        for run in waiting:
            while True:
                batch.evaluate(run)  # 1. evaluate w_r
                if run.done:
                    break
                batch.begin(run)  # 2-3. plan round r, client init
                if run.part is not None or not own:  # at its own pace, a round nobody trains in is passed at once
                    break
        if fresh := [run.part for run in waiting if run.part is not None]:
            _draw(fresh, problem, work)  # 3. the round's mini-batches, every run's at once
        parts = [run.part for run in runs if run.part is not None]
        if not parts and all(run.done for run in runs):
            break
        if parts:
            batch.train(parts, min(p.left for p in parts) if own else None, solver)  # 4. local steps
            for part in parts:
                if part.left <= 0:
                    _server_step(part)  # 5. client message, server step
        bar.update(_reached(runs) - bar.n)
    bar.close()
    histories = [pd.DataFrame(run.rows) for run in runs]
    return [(h, run.flat.detach().cpu()) for h, run in zip(histories, runs)] if return_params else histories


def _reached(runs) -> int:
    """The round every run still training has reached (the longest run's last once all are done)."""
    return min((run.next for run in runs if not run.done), default=max(run.rounds for run in runs))


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


__all__ = ["EXECUTIONS", "PACES", "STACKED", "LocalObjective", "RunOptions", "RunSpec", "Trainer", "absorbed",
           "full_gradients", "preferred_execution", "run", "run_batch", "train_clients"]
