"""Time the vectorized engine against the sequential oracle on fixed workloads, same run.

Workloads:
- synthetic(1,1): 100 clients, softmax regression 60 → 10, E = 20 local SGD steps,
  b = 24, Scheme I with K = 10 and K = 100 clients per round.
- mnist unbalanced: 100 clients, softmax regression 784 → 10, E = 100 steps, b = 64,
  Scheme I with K = 30, the setting of Li et al.'s Figure 1a whose large-E runs dominate
  the paper profile; skipped when MNIST is not staged.
- FedProx with 90% stragglers: synthetic(1,1) with 30 devices, E = 20 epochs of b = 10,
  K = 10, μ = 1; 9 of 10 clients stop after 1–19 epochs (unequal local work).

Three solvers get identical round plans and mini-batch draws: the engine with the linear
model's fused solver (the plain-SGD algorithms' opt-in), the engine's generic per-step
gradient path (what non-linear models use), and the sequential autograd oracle. Metrics
evaluation is excluded (``eval_every=None``) so only training is timed.

The FedProx LSTMs (real data, skipped when not staged, and the Shakespeare model on random windows of
its shape, which any machine can time without the dataset) have no fused solver: the engine stacked (the model's
batched recurrence over clients, weight gradients formed once per layer), static (the same with one
shape a round; on a GPU the step replays from a CUDA graph), the engine's client loop (PyTorch's fused
LSTM kernel, one device at a time) and the oracle, FedProx with K = 10, b = 10; medians of 4 repeats of
2 rounds. These timings move between bench runs more than the others (measured: five runs on an idle
machine spread Sent140's oracle up to twofold), so read the LSTM ratios to ±50%.

Kernel launches: the top-level ATen ops of one stacked local step of every model preset at 10 and
1,000 stacked models (counted on the CPU whatever ``--device`` says; the FEMNIST CNNs and the LSTMs
at reduced widths, which leave the count unchanged), and for the LSTMs the ops per time step and
layer: 10 (7 forward, 3 backward, written by hand), against 31 for the recurrence under autograd.

The sections after these (STEM on CIFAR-10, runs as a tensor dimension, dropout noise, own pace) describe
their workloads where they are printed (their modules' docstrings).
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import torch

from replicate.fl import engine
from replicate.fl import oracle
from replicate.core.machine import describe
from replicate.core.errors import ReplicateError
from replicate.fl import models, problems
from replicate.fl.algorithms import FedAvg, FedProx
from replicate.fl.algorithms.protocol import fused_update
from replicate.fl.models import opcount
from replicate.runs.config import RunConfig, build, run_device

WORKLOADS = {
    "synthetic(1,1), E=20, b=24": (
        RunConfig(dataset="synthetic(1,1)", algorithm=FedAvg("scheme1"), local_steps=20, batch_size=24, client_lr=0.1,
                  lr_schedule="harmonic", weight_decay=1e-4, clip_norm=60.0), (10, 100)),
    "mnist unbalanced, E=100, b=64": (
        RunConfig(dataset="mnist_unbalanced", algorithm=FedAvg("scheme1"), local_steps=100, batch_size=64,
                  client_lr=0.1, lr_schedule="harmonic", weight_decay=1e-4, clip_norm=60.0), (30,)),
    "FedProx 90% stragglers, synthetic(1,1) N=30, E=20 epochs, b=10": (
        RunConfig(dataset="synthetic(1,1)", num_clients=30, algorithm=FedProx(1.0, straggler_fraction=0.9),
                  local_steps=None, local_epochs=20, batch_size=10, client_lr=0.01,
                  lr_schedule="constant", weight_decay=0.0, clip_norm=None), (10,)),
}
SHAKESPEARE_SHAPED = "Shakespeare-shaped LSTM 2×256 (random 80-character windows), 5 steps"
LSTM_WORKLOADS = {
    "Shakespeare LSTM 2×256, 5 steps": RunConfig(
        dataset="shakespeare", model="char_lstm", algorithm=FedProx(0.001, 10, sampling="uniform"),
        local_steps=5, batch_size=10, client_lr=0.8, lr_schedule="constant",
        weight_decay=0.0, clip_norm=None),
    "Sent140 LSTM 2×100 (frozen embedding), 20 steps": RunConfig(
        dataset="sent140", model="sent_lstm", algorithm=FedProx(0.01, 10, sampling="uniform"),
        local_steps=20, batch_size=10, client_lr=0.3, lr_schedule="constant",
        weight_decay=0.0, clip_norm=None),
    # the Shakespeare step's shapes without its data (a machine without the dataset times it too: its time does not
    # depend on which characters the windows hold): 10 clients of 200 random 80-character windows
    SHAKESPEARE_SHAPED: RunConfig(
        dataset="given", model="char_lstm", algorithm=FedProx(0.001, 10, sampling="uniform"),
        local_steps=5, batch_size=10, client_lr=0.8, lr_schedule="constant", weight_decay=0.0, clip_norm=None),
}
# static: one shape a round, the step replayed from a CUDA graph on a GPU (on a CPU the stacked step
# with finished clients' rows kept, which these equal-step workloads never have)
LSTM_SOLVERS = {"stacked": {"execution": "stacked"}, "static": {"execution": "static"},
                "client loop": {"execution": "sequential"}, "oracle": {"trainer": oracle.SEQUENTIAL}}
SOLVERS = {
    "fused": {},
    "generic": {"fused": False},
    "oracle": {"trainer": oracle.SEQUENTIAL},
}


def _shakespeare_shaped(device):
    """The FedProx Shakespeare model (80 characters, embed 8, 2 × 256) on 10 clients of random windows."""
    from replicate.data.federated import FederatedDataset, Split

    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 80, (2000, 80), generator=g), torch.randint(0, 80, (2000,), generator=g)
    split = Split(x=x, y=y, offsets=torch.arange(0, 2001, 200))
    model = models.CharLSTM(80, **models._LSTM_PRESETS["char_lstm"])
    return problems.SampleProblem(FederatedDataset("shakespeare-shaped", split, None, 80), model, device=device)


def _built(config: RunConfig, device):
    return build(config, device=device, problem=_shakespeare_shaped(device) if config.dataset == "given" else None)


def median_s(call, repeats: int, device) -> float:
    """Median wall seconds of ``call(i)`` for i = 1..``repeats``, after ``call(0)`` warms up; a GPU is
    synchronised after each call, so that its queued kernels count."""
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        call(i)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def _seconds_per_round(solver: dict, config: RunConfig, rounds: int, repeats: int, device) -> float:
    problem, algorithm, work, schedule, objective = _built(config, device)
    return median_s(lambda seed: engine.run(problem, algorithm, work, schedule, objective=objective, rounds=rounds,
                                            seed=seed, eval_every=None, **solver), repeats, device) / rounds


def _timed(name: str, solver: str, seconds: float) -> None:
    """Each solver's time on stderr as soon as it is measured: a run cut off by a time limit
    still leaves the rows it reached (the tables come only at the end of a section)."""
    print(f"  timed {name}: {solver} {seconds:.4f} s/round", file=sys.stderr, flush=True)


def run(rounds: int = 5, repeats: int = 3, device=None, workloads=None) -> list[dict]:
    """One row per (workload, K): seconds per round of each solver and the ratios.

    The solvers alternate within each (workload, K), so a change in machine load between
    them shows up in all of them. The oracle runs a quarter of the engine's rounds.
    """
    device = torch.device(device) if device else run_device()
    results = []
    for name, (base, ks) in (workloads or WORKLOADS).items():
        try:
            build(base, device=device)
        except ReplicateError as exc:
            print(f"skipping {name}: {exc}")
            continue
        for k in ks:
            config = base.with_algorithm(clients_per_round=k)
            row = {"workload": name, "K": k}
            for solver, fn in SOLVERS.items():
                n = max(1, rounds // 4) if solver == "oracle" else rounds
                row[f"{solver}_s_per_round"] = _seconds_per_round(fn, config, n, repeats, device)
                _timed(f"{name}, K={k}", solver, row[f"{solver}_s_per_round"])
            row["speedup"] = row["oracle_s_per_round"] / row["fused_s_per_round"]
            row["fused_gain"] = row["generic_s_per_round"] / row["fused_s_per_round"]
            results.append(row)
    return results


def lstm_run(rounds: int = 2, repeats: int = 4, device=None) -> list[dict]:
    """One row per LSTM workload: seconds per round stacked, static (graphed on a GPU), client by client
    and in the oracle, and which engine execution ``execution="auto"`` picks on this device."""
    device = torch.device(device) if device else run_device()
    results = []
    for name, config in LSTM_WORKLOADS.items():
        try:
            problem = _built(config, device)[0]
        except ReplicateError as exc:
            print(f"skipping {name}: {exc}")
            continue
        row = {"workload": name, "auto": engine.preferred_execution(problem)}
        for solver, fn in LSTM_SOLVERS.items():
            row[solver] = _seconds_per_round(fn, config, rounds, repeats, device)
            _timed(name, solver, row[solver])
        auto = row["client loop" if row["auto"] == "sequential" else row["auto"]]
        row["speedup"], row["stacked_gain"] = row["oracle"] / auto, row["client loop"] / row["stacked"]
        row["graph_gain"] = row["stacked"] / row["static"]
        results.append(row)
    return results


def lstm_table(results: list[dict]) -> str:
    return _markdown(["workload", "stacked s/round", "static s/round", "client loop s/round", "oracle s/round",
                      "auto picks", "engine (auto) vs oracle", "stacked vs client loop", "static vs stacked"],
                     [[r["workload"], f"{r['stacked']:.3f}", f"{r['static']:.3f}", f"{r['client loop']:.3f}",
                       f"{r['oracle']:.3f}", r["auto"], f"{r['speedup']:.2f}×", f"{r['stacked_gain']:.2f}×",
                       f"{r['graph_gain']:.2f}×"] for r in results])


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])


def gemm_peak_gflops(n: int = 1024, repeats: int = 5, device=None) -> float:
    """This machine's single-precision GEMM rate on one large square product (a practical peak)."""
    device = torch.device(device) if device else run_device()
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    return 2 * n ** 3 / median_s(lambda _: a @ b, repeats, device) / 1e9


# Which work each aten op of the fused linear solver is (the rest: softmax, scaling, clipping bound).
STEP_PARTS = {"aten::index_select": "gather mini-batches", "aten::bmm": "logits (bmm)",
              "aten::baddbmm_": "update (baddbmm)"}


def step_profile(config: RunConfig, steps: int = 40, device="cpu") -> dict:
    """Where one round's local steps spend their time (CPU): ms per step, the GEMMs' GFLOP/s,
    and each part's share of the profiled op time."""
    from torch.profiler import profile

    from replicate.core import rng

    problem, algorithm, work, schedule, objective = build(config.replace(local_steps=steps), device=device)
    population = problem.population()
    plan = algorithm.plan(population, work, 0, 0)
    flat = problem.init(0)
    counts = work.steps(population.sizes[plan.clients], plan.work)
    batches = problem.draw_batches([(plan.clients, counts, rng.generator(0, "batches", 0))], work)[0]

    if problem.fused_sgd is None or fused_update(algorithm) is None:
        raise ReplicateError(f"step_profile times a fused local solve: {config.model} with {config.algorithm_name} "
                             "has none")

    def solve():
        return problem.fused_sgd(flat, plan.clients, counts, torch.full((counts.numel(),), 0.1), batches, objective,
                                 fused_update(algorithm))

    solve()  # warm-up
    start = time.perf_counter()
    solve()
    seconds = (time.perf_counter() - start) / steps  # timed without the profiler's overhead
    with profile() as prof:
        solve()
    times = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(times.values())
    shares = {part: 0.0 for part in STEP_PARTS.values()} | {"other ops": 0.0}
    for op, t in times.items():
        shares[STEP_PARTS.get(op, "other ops")] += t / total
    m, b = plan.clients.numel(), work.batch_size
    d, c = problem.x_prepared.shape[1], problem.y_prepared.shape[1]
    return {"clients": m, "ms_per_step": seconds * 1e3,
            "gemm_gflops": 4 * m * b * d * c / seconds / 1e9, "shares": shares}


PROFILED = "mnist unbalanced, E=100, b=64"  # the workload whose step is broken down


def profile_table(device=None) -> str:
    """Markdown: the fused step of ``PROFILED`` broken down, against this machine's GEMM peak."""
    device = torch.device(device) if device else run_device()
    config, (k, *_) = WORKLOADS[PROFILED]
    if device.type != "cpu":
        return "(step breakdown: CPU only)"
    try:
        p = step_profile(config.with_algorithm(clients_per_round=k))
    except ReplicateError as exc:
        return f"(step breakdown skipped: {exc})"
    peak = gemm_peak_gflops()
    rows = [f"Fused step of '{PROFILED}', K = {k} ({p['clients']} distinct clients): "
            f"{p['ms_per_step']:.2f} ms per step; its two GEMMs run at {p['gemm_gflops']:.0f} GFLOP/s, "
            f"{p['gemm_gflops'] / peak:.0%} of this machine's {peak:.0f} GFLOP/s on a 1024² product "
            "(the class dimension, C = 10, is too narrow for a GEMM's full rate).", "",
            "| part of the step | share of op time |", "|---|---|"]
    rows += [f"| {part} | {share:.0%} |" for part, share in p["shares"].items()]
    return "\n".join(rows)


def describe_machine(device=None) -> str:
    device = torch.device(device) if device else run_device()
    load = f", load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores" if hasattr(os, "getloadavg") else ""
    return (f"{device.type} ({describe(device)}), {torch.get_num_threads()} threads, "
            f"python {platform.python_version()}{load} (read at the start: other work on the machine slows the "
            "timings; ratios within one run compare like with like)")


def table(results: list[dict]) -> str:
    return _markdown(["workload", "K", "engine (fused) s/round", "engine (generic step) s/round", "oracle s/round",
                      "engine vs oracle", "fused vs generic"],
                     [[r["workload"], r["K"], f"{r['fused_s_per_round']:.4f}", f"{r['generic_s_per_round']:.4f}",
                       f"{r['oracle_s_per_round']:.4f}", f"{r['speedup']:.1f}×", f"{r['fused_gain']:.2f}×"]
                      for r in results])


# ---- top-level ops per local step -----------------------------------------------------------------

# Every model preset, built as its preset (layers, loss, options) at the widths given: the FEMNIST CNNs
# and the LSTMs narrowed so that 1,000 stacked copies fit this machine (a count does not depend on
# widths: every op is the same op on a wider tensor). The image models see 28×28 MNIST/EMNIST-shaped
# inputs, the LSTMs sequences of OP_STEPS tokens; 2 samples per model.
OP_MODELS = {
    "logistic (MNIST 784 → 10)": lambda: models.LogisticRegression(784, 10),
    "mlp (784 → 32 → 10)": lambda: models.MLP(784, 10),
    "lenet (STEM MNIST, preset widths)": lambda: models.CNN((1, 28, 28), 10, **models._CNN_PRESETS["lenet"]),
    "cnn (FEMNIST; channels 4, 8, dense 16)": lambda: models.CNN((1, 28, 28), 62, channels=(4, 8), hidden=16),
    "conv_dropout (FEMNIST; channels 4, 8, dense 16)": lambda: models.ConvDropout((1, 28, 28), 62, channels=(4, 8),
                                                                                 hidden=16),
    "char_lstm (Shakespeare; embed 8, 2 × 16)": lambda: models.CharLSTM(
        80, **(models._LSTM_PRESETS["char_lstm"] | dict(hidden=16))),
    "char_lstm_tff (TFF Shakespeare; embed 8, 2 × 16)": lambda: models.CharLSTM(
        90, **(models._LSTM_PRESETS["char_lstm_tff"] | dict(hidden=16))),
    "sent_lstm (Sent140; embed 12, 2 × 8, dense 30)": lambda: models.CharLSTM(
        100, num_classes=2, **(models._LSTM_PRESETS["sent_lstm"] | dict(embed=12, hidden=8))),
}
OP_STEPS, OP_BATCH = (4, 8), 2  # LSTM sequence lengths (the per-time-step count is their difference)


def step_inputs(model, k: int, steps: int = OP_STEPS[0], batch: int = OP_BATCH, seed: int = 0):
    """K stacked models (distinct rows) and a mini-batch each, as ``model.grad`` takes them."""
    g = torch.Generator().manual_seed(seed)
    flat = model.init(g).unsqueeze(0) + 0.01 * torch.randn(k, model.num_params, generator=g)
    noise = None
    if isinstance(model, models.CharLSTM):
        x = torch.randint(0, model.vocab_size, (k, batch, steps), generator=g)
        y = torch.randint(0, model.num_classes, (k, batch, steps) if model.loss_kind == "token" else (k, batch),
                          generator=g)
        return flat, x, y, noise
    shape = getattr(model, "in_shape", None) or (model.d,)
    classes = getattr(model, "num_classes", None) or model.c
    x = torch.randn(k * batch, *shape, generator=g)
    y = torch.randint(0, classes, (k * batch,), generator=g)
    x, y = model.prepare(x, y, classes)
    if model.dropout:
        noise = torch.rand(k, batch, *model.dropout_shape, generator=g)
    return flat, x.view(k, batch, *x.shape[1:]), y.view(k, batch, *y.shape[1:]), noise


def step_op_counts(name: str, ks=(10, 1000)) -> dict:
    """Top-level ops of one local step of ``OP_MODELS[name]`` at each K (``opcount.step_ops``), and
    for an LSTM the ops per time step and layer (from two sequence lengths at the first K)."""
    model = OP_MODELS[name]()
    row = {"model": name, "params": model.num_params}
    for k in ks:
        row[k] = sum(opcount.step_ops(model, *step_inputs(model, k)).values())
    if isinstance(model, models.CharLSTM):
        short, long = (sum(opcount.step_ops(model, *step_inputs(model, ks[0], steps)).values()) for steps in OP_STEPS)
        row["per_step_layer"] = (long - short) / (OP_STEPS[1] - OP_STEPS[0]) / model.layers
    return row


def op_table(ks=(10, 1000)) -> str:
    rows = [step_op_counts(name, ks) for name in OP_MODELS]
    per = [f"{r['per_step_layer']:g}" if "per_step_layer" in r else "" for r in rows]
    return (f"Top-level ATen ops of one stacked local step (forward, loss, backward, update; "
            f"``replicate/fl/models/opcount.py`` says what counts), {OP_BATCH} samples per model, LSTM sequences "
            f"of {OP_STEPS[0]} tokens:\n\n"
            + _markdown(["model", "parameters per model"] + [f"ops, {k:,} models" for k in ks]
                        + ["LSTM ops per time step and layer"],
                        [[r["model"], f"{r['params']:,}"] + [r[k] for k in ks] + [p] for r, p in zip(rows, per)]))
