"""What each GPU-scale figure's paper profile still costs on a device, from the committed run ledger.

``python -m replicate figures --estimate [--device cuda]`` prints it; ``report --work`` records it in
``figures/gpu_work.json``, which REPLICATION.md renders. A unit (``UNITS``) is a figure of ``work.FIGURES``, a
FedProx figure split by its LSTM panels. Tuning runs are looked up in the ledger by key; a final run counts as done
when the ledger holds a run equal to its template on every field the tuning does not set (``TUNED``). A run's cost
is its sequential local steps times the median seconds a step of its model and dataset took in the ledger on this
device kind; without such a timing it is *modelled* (``_modelled``): a lower bound, or for a step a GPU replays
from a CUDA graph an estimate, likely high (``graphed_estimate``). Run-seconds become wall seconds over the
concurrency measured on the ledger's pieces. A run with a checkpoint in this machine's cache counts from the round
it reached.
"""
from __future__ import annotations

import functools
import json
import statistics
from dataclasses import dataclass

from replicate.core import paths
from replicate.core.fileio import atomic_write_text
from replicate.experiments import work
from replicate.fl import models
from replicate.runs import cache, checkpoints, ledger
from replicate.runs.config import RunConfig

OP_SECONDS = 8e-6  # host dispatch + launch of one op on the GPU machine (measured: 3.5-6.5 µs + launch)
# FEMNIST's dropout noise a step: the 22 ops core.counter_rng.uniform dispatches (counted with a
# TorchDispatchMode; 16 launch kernels), computed on the device rather than drawn on one host core and
# copied (by far the slower way)
NOISE_OPS = 22
# Seconds a gradient step measured on CUDA outside the ledger: STEM's stacked CIFAR-10 round, 0.9 s at
# (b, I) = (8, 61) on an H100 (docs/BENCHMARKS.cuda.md), two gradients a step
REFERENCE_S = {"lenet5": 0.9 / 61 / 2}
# Where no CUDA timing exists, a step costs at least its arithmetic: one client's gradient FLOPs at the run's
# mini-batch (gpu_work.json's ``gflop_per_client_step``, ``work.flops_per_step``) times the clients a round, at
# DEVICE_FLOPS, a sustained fp32 rate assumed for an H100/H200 (PROPOSED: ≈ 40 % of the H100 SXM's 67 TFLOP/s
# dense fp32). Dispatch alone prices Charles & Konečný's Figure 6 at 3.2 device-minutes; with its arithmetic, 23.4.
DEVICE_FLOPS = 25e12
# The fields the figures tune (rates, STEM's c, FedProx's μ): a final run's template matches a run of the
# ledger that equals it on every other field, its seed included
TUNED = {"client_lr", "lr_decay", "algorithm.server_lr", "algorithm.momentum_c", "algorithm.prox_mu"}


@dataclass(frozen=True)
class Unit:
    key: str  # the figure (``work.FIGURES`` key) whose runs these are
    datasets: tuple[str, ...] | None = None  # None: all of the figure's

    @property
    def label(self) -> str:
        return self.key + (f" [{', '.join(self.datasets)}]" if self.datasets else "")

    def overrides(self) -> dict:
        """The figure's --set that computes only this unit's runs."""
        return {"datasets": list(self.datasets)} if self.datasets else {}


UNITS: tuple[Unit, ...] = (
    Unit("khanduri2021/fig5"), Unit("khanduri2021/fig2"), Unit("khanduri2021/fig3"), Unit("khanduri2021/fig4"),
    Unit("charles2021/fig12", ("femnist",)),
    Unit("fedprox2020/fig2", ("sent140",)), Unit("fedprox2020/fig3", ("sent140",)),
    Unit("fedprox2020/stragglers", ("sent140",)),
    Unit("charles2021/fig13"),
    Unit("fedprox2020/fig2", ("shakespeare",)), Unit("fedprox2020/fig3", ("shakespeare",)),
    Unit("fedprox2020/stragglers", ("shakespeare",)),
    Unit("charles2021/fig6"),
)  # FedProx Figure 4 is Figure 3's runs; Figure 12's seed-0 runs are among Figure 13's tuning runs


@dataclass
class Progress:
    unit: Unit
    tuning: tuple[int, int]  # (done, of)
    final: tuple[int, int]
    spent_s: float  # run-seconds of the done runs, as recorded
    left: dict  # run key (a final run's: its template's) → run-seconds projected, for the runs left
    measured: bool  # the projection rests on this device's own runs (else modelled)
    resumed: int = 0  # runs left that resume from a checkpoint this machine holds (counted from its round)
    round_s: float = 0.0  # seconds of one round of its shortest-round run left, its stack alone (``round_seconds``)
    # keys of the runs left whose cost is the op-by-op dispatch of a step the GPU replays from a CUDA graph
    # (``graphed_estimate``): likely high, not a bound
    graphed: frozenset = frozenset()
    round_graphed: bool = False  # whether ``round_s`` is such an estimate (its run's, alone)

    @property
    def left_s(self) -> float:
        return sum(self.left.values())

    @property
    def done(self) -> bool:
        return self.tuning[0] == self.tuning[1] and self.final[0] == self.final[1]


def _figure(key: str) -> work.Figure:
    return next(f for f in work.FIGURES if f.key == key)


def _epoch_steps() -> dict[str, float]:
    """Dataset, b → one epoch in sequential steps: the busiest sampled client's (``work``'s round_epoch_steps),
    over every figure (each unit prices its own figure's, ``_row``)."""
    return {name: steps for row in _work_rows() for name, steps in row["round_epoch_steps"].items()}


def _row(key: str) -> dict:
    """The committed gpu_work.json row of a unit's figure."""
    figure = _figure(key).figure
    return next(row for row in _work_rows() if row["figure"] == figure)


def _work_rows() -> list[dict]:
    """The committed gpu_work.json's rows (``experiments.work``), read once per file."""
    return _read_rows(paths.figures_dir() / work.FILE)


@functools.lru_cache(maxsize=4)
def _read_rows(path) -> list[dict]:
    return json.loads(path.read_text())["rows"]


def steps(config, epochs: dict[str, float]) -> float:
    """Sequential local steps of one run alone (an epoch: its busiest client's, from the committed
    gpu_work.json; stragglers averaged over the figure's runs)."""
    if config.local_steps is not None:
        return config.rounds * config.local_steps
    return config.rounds * config.local_epochs * epochs[f"{config.dataset}, b = {config.batch_size}"]


def _on(meta: dict, device: str) -> bool:
    """Whether a ledger run (its sidecar's fields) was computed on ``device``'s kind (``cuda:1`` is cuda)."""
    return str(meta.get("device", "")).split(":")[0] == device


def _flat(config) -> dict:
    values = config.to_dict()
    values.update({f"algorithm.{k}": v for k, v in values.pop("algorithm").items()})
    return values


def _is_final_done(template, ledger_flat: list[dict]) -> bool:
    want = {k: v for k, v in _flat(template).items() if k not in TUNED}
    return any(all(run.get(k) == v for k, v in want.items()) for run in ledger_flat)


def progress(unit: Unit, runs: dict[str, dict], device: str = "cuda", epochs: dict | None = None,
             reached: dict[str, int] | None = None) -> Progress:
    """Done / left of ``unit`` against the ledger's ``runs`` (``ledger.runs()``) computed on ``device``;
    ``reached``: run key → the round a checkpoint of it reached (``reached``): such a run costs
    only its rounds left. A final run's checkpoint is named by the rates its tuning chose, so only a final
    run whose template is its config (none is tuned) is matched."""
    reached = reached or {}
    row = _row(unit.key)
    epochs = {**(epochs if epochs is not None else _epoch_steps()), **row["round_epoch_steps"]}
    shared = row["own_pace_steps"] / row["sequential_steps"]  # a batch steps its runs together
    keep = (lambda c: True) if unit.datasets is None else (lambda c: c.dataset in unit.datasets)
    tuning, final = (list(dict.fromkeys(filter(keep, part))) for part in _figure(unit.key).plan())
    keys = {cache.key(c, device=device): c for c in tuning}
    final = [c for c in final if cache.key(c, device=device) not in keys]
    on_device = {name: meta for name, meta in runs.items() if _on(meta, device)}
    flat_runs = [_flat(RunConfig.from_dict(meta)) for meta in on_device.values()]
    done_final = [c for c in final if _is_final_done(c, flat_runs)]
    rate = _seconds_per_step(on_device, epochs)
    spent = sum(on_device[k]["elapsed_s"] for k in keys if k in on_device)
    left = [c for k, c in keys.items() if k not in on_device] + [c for c in final if c not in done_final]
    cost = {}
    for c in left:
        k = cache.key(c, device=device)
        share = max(0.0, 1.0 - reached[k] / c.rounds) if k in reached else 1.0
        cost[k] = share * steps(c, epochs) * (rate[(c.model, c.dataset)] if (c.model, c.dataset) in rate
                                              else _modelled(c, shared))
    measured = all((c.model, c.dataset) in rate for c in left)
    graphed = frozenset(cache.key(c, device=device) for c in left
                        if (c.model, c.dataset) not in rate and graphed_estimate(c, device, shared))
    round_s, shortest = min(((round_seconds(c, epochs, rate), c) for c in left), key=lambda pair: pair[0],
                            default=(0.0, None))
    return Progress(unit, (sum(k in on_device for k in keys), len(keys)), (len(done_final), len(final)), spent, cost,
                    measured, sum(k in reached for k in cost), round_s, graphed,
                    shortest is not None and (shortest.model, shortest.dataset) not in rate
                    and graphed_estimate(shortest, device))


def graphed_estimate(config, device: str = "cuda", shared: float = 1.0) -> bool:
    """Whether ``_modelled`` prices ``config``'s step by op-by-op dispatch that its device does not pay: a model
    replayed from a CUDA graph on a GPU (``fl.models.graphed``, one shape a round: execution auto or static), with
    no bench timing (``REFERENCE_S``), whose dispatch outweighs its arithmetic. The estimate is then likely high
    (the graph's kernels still run, without a host dispatch each), not a bound."""
    if device != "cuda" or config.model in REFERENCE_S or not models.graphed(config.model) \
            or config.execution not in ("auto", "static"):
        return False
    dispatch, arithmetic = _terms(config, shared)
    return dispatch >= arithmetic


def round_seconds(config, epochs: dict, rate: dict | None = None) -> float:
    """Seconds a stack takes for one round of ``config``, on average over its rounds: its busiest sampled client's
    steps (``steps``) at a step's time (this device's ledger timing of the model, else ``_modelled`` with no
    dispatch shared). A run saves its progress only at its round boundaries (``fl.resume``), so a time-limited
    job shorter than a round keeps nothing of it."""
    per_step = (rate or {}).get((config.model, config.dataset)) or _modelled(config)
    return steps(config, epochs) / config.rounds * per_step


def left_s(rows: list[Progress], graphed: bool = False) -> float:
    """Run-seconds of every run left, each counted once (figures share runs: STEM Figure 3 holds Figure 2's);
    ``graphed``: of those only the runs priced so (``Progress.graphed``)."""
    return sum({key: s for row in rows for key, s in row.left.items() if not graphed or key in row.graphed}.values())


def _seconds_per_step(runs: dict[str, dict], epochs: dict) -> dict[tuple[str, str], float]:
    """(model, dataset) → median recorded seconds per sequential local step, over the ledger's runs that
    trained to their last round (a diverged run stops early and would understate the cost)."""
    rates: dict[tuple[str, str], list[float]] = {}
    for meta in runs.values():
        config = RunConfig.from_dict(meta)
        if meta.get("elapsed_s") and meta.get("trained", True):
            try:
                rates.setdefault((config.model, config.dataset), []).append(meta["elapsed_s"] / steps(config, epochs))
            except KeyError:  # an epoch-based dataset gpu_work.json does not list
                continue
    return {pair: statistics.median(values) for pair, values in rates.items()}


def _modelled(config, shared: float = 1.0) -> float:
    """Seconds a run's local step when no run of its model was timed on this device kind: ``REFERENCE_S``
    where a bench measured it, else the larger of its dispatch and its arithmetic (``_terms``), per gradient
    (STEM takes two a step)."""
    per_gradient = REFERENCE_S.get(config.model)
    if per_gradient is None:
        per_gradient = max(_terms(config, shared))
    return per_gradient * (2 if config.algorithm_name == "stem" else 1)


def _terms(config, shared: float = 1.0) -> tuple[float, float]:
    """Seconds of a gradient's dispatch and of its arithmetic. Dispatch: its op count (gpu_work.json, +
    ``NOISE_OPS`` for dropout) × ``OP_SECONDS``, of which the run pays ``shared`` (host-bound, a step of a piece
    of runs dispatches the ops of one, so its runs share it: the figure's batched over sequential steps).
    Arithmetic: its clients' FLOPs at ``DEVICE_FLOPS``, paid by every run (a run of full participation, STEM's,
    has no clients-a-round figure: dispatch alone)."""
    name = f"{config.model} ({config.dataset})"
    ops = next(row["ops_per_step"][name] for row in _work_rows() if name in row["ops_per_step"])
    dispatch = (ops + (NOISE_OPS if config.model == "conv_dropout" else 0)) * OP_SECONDS * shared
    flops = work.flops_name(config)
    gflop = next(row["gflop_per_client_step"][flops] for row in _work_rows() if flops in row["gflop_per_client_step"])
    return dispatch, gflop * 1e9 * (config.clients_per_round or 0) / DEVICE_FLOPS


def concurrency(pieces: list[dict] | None = None, device: str = "cuda") -> float:
    """Run-seconds per wall second, measured over the ledger's pieces of runs on ``device`` that record the
    ``wall_s`` they took (runs of a batch share its time, and worker processes run side by side); 1 when none
    does."""
    pieces = ledger.index() if pieces is None else pieces
    timed = [p for p in pieces if p.get("wall_s") and p.get("run_s") and p.get("device", device) == device]
    return sum(p["run_s"] for p in timed) / sum(p["wall_s"] for p in timed) if timed else 1.0


def table(device: str = "cuda", reached: dict[str, int] | None = None) -> list[Progress]:
    """Every unit's progress against the ledger (``reached``: as ``progress``; the committed record leaves
    this machine's checkpoints out)."""
    runs, epochs = ledger.runs(), _epoch_steps()
    return [progress(unit, runs, device, epochs, reached) for unit in UNITS]


def reached() -> dict[str, int]:
    """The round each checkpoint of this machine's run cache reached, by run (its cache entry's name)."""
    return {path.stem: r for path in checkpoints.folder().glob("*.pt")
            if (r := checkpoints.round_of(path.read_bytes())) is not None}


def write_status(device: str = "cuda") -> None:
    """Record the estimate (``table``) in figures/gpu_work.json under ``estimate``, which the report renders
    (it does not import experiments); ``ledger add`` and ``report --work`` call it."""
    path = paths.figures_dir() / work.FILE
    recorded = json.loads(path.read_text())
    data = {key: recorded[key] for key in ("generated_by", "rows", "arena") if key in recorded}
    rows, rate = table(device), concurrency(device=device)
    data["estimate"] = {
        "device": device, "concurrency": round(rate, 2),
        "ledger_runs": sum(_on(meta, device) for meta in ledger.runs().values()),  # this device's, not every one
        "left_min": round(left_s(rows) / rate / 60, 1),
        "graphed_min": round(left_s(rows, graphed=True) / rate / 60, 1),
        "rows": [{"figure": row.unit.label, "tuning": list(row.tuning), "final": list(row.final),
                  "spent_min": round(row.spent_s / rate / 60, 1), "left_min": round(row.left_s / rate / 60, 1),
                  "round_min": round(row.round_s / 60, 2), "measured": row.measured,
                  "graphed": bool(row.graphed)} for row in rows]}
    atomic_write_text(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f} min" if seconds < 6000 else f"{seconds / 3600:,.1f} h"


__all__ = ["DEVICE_FLOPS", "OP_SECONDS", "UNITS", "Progress", "Unit", "concurrency", "graphed_estimate", "left_s",
           "minutes", "progress", "reached", "round_seconds", "steps", "table", "write_status"]
