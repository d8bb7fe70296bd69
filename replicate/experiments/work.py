"""The work of the paper profile of every GPU-scale figure, enumerated without running it.

``FIGURES`` is the one list of the GPU-scale figures (those whose paper profile a CPU core cannot run), each with
its coverage item. Each yields its run configs the way the figure's own code does (the tuning grid on the tuning
seeds, then the chosen rates on every seed), counted once. Per run, its sequential local steps, counted exactly from
the algorithm's own plan and the clients' sizes (``runs.batched.round_steps``): a round takes as many steps as its
busiest sampled client. Per figure, those steps trained in batches (``BATCHING``) in lockstep and at each run's own
pace, the ops and GFLOP of a local step, and where its model's step was timed. ``report.gpu_work.WORK_TEXT`` says
what each column means. The work is enumerated on the labelled offline stand-ins (``SOURCE``, docs/data.md).

``write()`` stores the table in ``figures/gpu_work.json`` (``python -m replicate report --work``, which loads the
four datasets the epoch-based figures train on); REPLICATION.md renders it from there.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from replicate.core import paths
from replicate.core.fileio import atomic_write_text
from replicate.experiments import knobs

LSTM_PANELS = ("shakespeare", "sent140")  # the FedProx figures' GPU-scale panels
BATCHING = {"max_runs": 8, "workers": 2}  # how the runs are cut into batches: --batch-runs 8 --workers 2
SOURCE = "stand-in"  # the data_source knob of the ledger's GPU runs (replicate.data.variants)
FILE = "gpu_work.json"


@dataclass(frozen=True)
class Figure:
    paper: str
    item: str  # the coverage item (``report.coverage.ITEMS``) whose work this is
    figure: str  # the figure and panels enumerated
    plan: Callable[[], tuple[list, list]]  # (tuning runs, final runs) of the paper profile
    measured: str  # where its model's step was timed, without numbers (those are read from records when rendered)
    records: tuple[tuple[str, str], ...] = ()  # (figures/<key>.claims.json of CPU-scale runs, their scale)
    key: str = ""  # the notebook's figure key (``figures NAME``) that computes these runs


def _unique(configs) -> list:
    return list(dict.fromkeys(configs))


def _fedprox_fig2():
    from replicate.experiments.fedprox2020.epochs import Fig2Config
    return [], [c for _, c in Fig2Config(datasets=LSTM_PANELS, data_source=SOURCE).configs()]


def _fedprox_fig3():
    from replicate.experiments.fedprox2020.mu import Fig3Config
    config = Fig3Config(datasets=LSTM_PANELS, data_source=SOURCE)
    grid = config.grid()
    return [c for _, c in config.zero()] + grid.tuning(), grid.finals()  # the grid's first μ stands in for the best


def _stragglers():
    from replicate.experiments.fedprox2020.stragglers import StragglersConfig
    config = StragglersConfig(datasets=LSTM_PANELS, data_source=SOURCE)
    checks = [c for _, fedavg, fedprox in config.checks() for c in (fedavg, fedprox)]
    return [], [c for _, c in config.configs()] + checks


def _charles_fig6():
    from replicate.experiments.charles2021.tuned import Fig6Config
    grid = Fig6Config(data_source=SOURCE).grid()
    return grid.tuning(), grid.finals()


def _charles_sweep(cls):
    def plan():
        grid = cls(data_source=SOURCE).grid()
        return grid.tuning(), grid.finals()
    return plan


def _stem(cls):
    def plan():
        tuning, final = [], []
        base = cls(data_source=SOURCE) if "data_source" in knobs.names(cls) else cls()
        for part in (base.compared() if hasattr(cls, "compared") else [base]):
            grid = part.grid(part.updates())
            tuning += grid.tuning()
            final += grid.finals()
        return tuning, final
    return plan


def _stem_cifar(name):
    from replicate.experiments.khanduri2021 import cifar
    return _stem(getattr(cifar, name))


def _stem_fig5():
    from replicate.experiments.khanduri2021.samples import Fig5Config
    return _stem(Fig5Config)()


# Where each model's step was timed; the numbers are read from the records at render time (``_recorded``,
# ``_on_gpu``), never typed here
_LSTM_COST = "one core's LSTM rounds: BENCHMARKS.md (engine section)"
_FEMNIST_COST = "the FEMNIST CNN's ops per step: BENCHMARKS.md (op counts)"
_STEM_COST = ("a STEM round on one idle core: BENCHMARKS.md (STEM on CIFAR-10); on an H100 and an H200: "
              "docs/BENCHMARKS.cuda.md")

FIGURES: tuple[Figure, ...] = (
    Figure("fedprox2020", "Figures 2 and 6", "Fig. 2 / 6, Shakespeare + Sent140 panels", _fedprox_fig2,
           _LSTM_COST, (("cpu_scale/fedprox2020/fig2", "Sent140, 200 of 800 rounds"),), key="fedprox2020/fig2"),
    Figure("fedprox2020", "Figures 3 and 7", "Fig. 3 / 7, Shakespeare + Sent140 panels", _fedprox_fig3,
           _LSTM_COST, (("cpu_scale/fedprox2020/fig3", "Sent140, 200 of 800 rounds"),), key="fedprox2020/fig3"),
    Figure("fedprox2020", "Figure 4", "Fig. 4 (the Figure 3 runs), Shakespeare + Sent140 panels", _fedprox_fig3,
           _LSTM_COST, (("cpu_scale/fedprox2020/fig4", "Sent140, 200 of 800 rounds"),), key="fedprox2020/fig4"),
    Figure("fedprox2020", "final paper, Figure 1", "stragglers, Shakespeare + Sent140 columns", _stragglers,
           _LSTM_COST, (("cpu_scale/fedprox2020/stragglers", "Sent140, 200 of 800 rounds"),),
           key="fedprox2020/stragglers"),
    Figure("charles2021", "Figures 6 and 11", "Fig. 6 / 11, FEMNIST", _charles_fig6, _FEMNIST_COST,
           (("cpu_scale/charles2021/fig6", "FEMNIST, 100 of 1,500 rounds"),), key="charles2021/fig6"),
    Figure("charles2021", "Figures 12–13", "Fig. 12, FEMNIST + Shakespeare",
           lambda: _charles_sweep(_neural("Fig12Config"))(), _FEMNIST_COST + "; TFF Shakespeare: not measured",
           (("cpu_scale/charles2021/fig12", "FEMNIST, 100 of 1,500 rounds"),), key="charles2021/fig12"),
    Figure("charles2021", "Figures 12–13", "Fig. 13, FEMNIST + Shakespeare",
           lambda: _charles_sweep(_neural("Fig13Config"))(), _FEMNIST_COST + "; TFF Shakespeare: not measured",
           (("cpu_scale/charles2021/fig13", "FEMNIST, 100 of 1,500 rounds"),), key="charles2021/fig13"),
    Figure("khanduri2021", "Figures 2–4", "Fig. 2, CIFAR-10 (b, I) = (8, 61)", lambda: _stem_cifar("Fig2Config")(),
           _STEM_COST, (("cpu_scale/khanduri2021/fig2", "10 of 100 rounds"),), key="khanduri2021/fig2"),
    Figure("khanduri2021", "Figures 2–4", "Fig. 3, CIFAR-10 (64, 7), with Fig. 2's runs it compares",
           lambda: _stem_cifar("Fig3Config")(), _STEM_COST, (("cpu_scale/khanduri2021/fig3", "10 of 100 rounds"),),
           key="khanduri2021/fig3"),
    Figure("khanduri2021", "Figures 2–4", "Fig. 4, CIFAR-10 high heterogeneity (8, 61)",
           lambda: _stem_cifar("Fig4Config")(), _STEM_COST, (("cpu_scale/khanduri2021/fig4", "10 of 100 rounds"),),
           key="khanduri2021/fig4"),
    Figure("khanduri2021", "Figure 5", "Fig. 5, MNIST, I ∈ {10, 100}", _stem_fig5, "",
           (("cpu_scale/khanduri2021/fig5", "3,200 of 30,000 samples per worker"),), key="khanduri2021/fig5"),
)


def _neural(name):
    from replicate.experiments.charles2021 import neural
    return getattr(neural, name)


def runs(figure: Figure) -> tuple[int, int, list]:
    """(tuning runs, final runs not among them, every distinct run config) of ``figure``'s paper profile."""
    tuning, final = figure.plan()
    tuning = _unique(tuning)
    every = _unique(tuning + final)
    return len(tuning), len(every) - len(tuning), every


# ---- local steps and ops --------------------------------------------------------------------------------

def _mean_steps(dataset: str, batch_size: int, cache: dict) -> float:
    """Mean over the training clients of ⌈n_k/b⌉: one epoch of a client, in local steps."""
    if (dataset, batch_size) not in cache:
        from replicate import data
        sizes = data.load(dataset).train.sizes.double()
        cache[(dataset, batch_size)] = float(((sizes / batch_size).ceil()).mean())
    return cache[(dataset, batch_size)]


def _plan_key(config) -> str:
    """What a run's round lengths depend on: its config but for the rates (a grid's runs share their rounds)."""
    fields = {k: v for k, v in config.to_dict().items() if k not in ("client_lr", "lr_decay", "lr_schedule")}
    return json.dumps(fields, sort_keys=True, default=str)


def round_steps(config, cache: dict):
    """(rounds,) sequential local steps of one run (``runs.batched.round_steps``), computed once per plan."""
    from replicate.runs import batched

    key = _plan_key(config)
    if key not in cache:
        cache[key] = batched.round_steps(config)
    return cache[key]


def batch_steps(tuning: list, final: list, cache: dict) -> tuple[int, int]:
    """Sequential local steps of the runs trained in batches (``BATCHING``): the tuning runs batched among
    themselves, then the final runs (they start once the tuning has chosen); in lockstep, and as the engine trains
    them: at their own pace where the algorithm allows (``protocol.own_pace``). The GPU-scale figures' models
    have no fused solver, which trains whole rounds in lockstep (``engine``)."""
    from replicate.fl import batching
    from replicate.fl.algorithms import protocol
    from replicate.runs import batched
    from replicate.runs.pool import Job

    together = trained = 0
    for phase in (tuning, final):
        for piece in batched.group([Job(c) for c in phase], **BATCHING):
            lengths = [round_steps(job.config, cache) for job in piece]
            together += batching.batch_steps(lengths)
            own = protocol.own_pace(piece[0].config.algorithm)
            trained += batching.own_pace_steps(lengths) if own else batching.batch_steps(lengths)
    return together, trained


def _model(model: str, dataset: str, narrow: bool = True):
    """(model at narrowed widths, or at the paper's; sequence length or None) with ``dataset``'s inputs (loaded
    for the LSTMs)."""
    from replicate.fl import models
    if model in models._LSTM_PRESETS:
        from replicate import data
        ds = data.load(dataset)
        preset = dict(models._LSTM_PRESETS[model])
        if narrow:
            preset.update(embed=8, hidden=16, head=tuple(8 for _ in preset.get("head", ())))
        vocab = ds.meta.get("vocab_size") or len(ds.meta.get("vocabulary", ()))
        if preset.get("loss_kind") == "token":
            preset["uncounted"] = tuple(ds.meta.get("uncounted", ()))
        classes = None if model.startswith("char_lstm") else ds.num_classes
        return models.CharLSTM(vocab, num_classes=classes, **preset), int(ds.train.x.shape[1])
    shapes = {"conv_dropout": ((1, 28, 28), 62), "lenet": ((1, 28, 28), 10), "lenet5": ((3, 32, 32), 10)}
    shape, classes = shapes[model]
    if model == "conv_dropout":
        return models.ConvDropout(shape, classes, **(dict(channels=(4, 8), hidden=16) if narrow else {})), None
    return models.CNN(shape, classes, **models._CNN_PRESETS[model]), None


def ops_per_step(model: str, dataset: str, k: int = 2, batch: int = 2) -> int:
    """Top-level ATen ops of one stacked local step of ``model`` on ``dataset``'s input shape."""
    from replicate.fl.models import opcount
    net, flat, x, y, noise = _step_inputs(*_model(model, dataset), k, batch)
    return int(sum(opcount.step_ops(net, flat, x, y, noise).values()))


def flops_per_step(model: str, dataset: str, batch: int) -> float:
    """Floating-point operations of one client's local gradient (forward and backward) of ``model`` at the
    paper's widths on a mini-batch of ``batch`` of ``dataset``'s inputs (``torch.utils.flop_counter``: the
    matrix products and convolutions; elementwise ops are not counted, so a lower bound), as the stacked engine
    computes it: on two stacked clients through ``torch.func`` and halved (one client alone may train through a
    fused LSTM kernel the counter does not see; vmap's convolution gradients count ≈ 30 % over a hand count)."""
    from torch.utils.flop_counter import FlopCounterMode

    net, flat, x, y, noise = _step_inputs(*_model(model, dataset, narrow=False), 2, batch)
    with FlopCounterMode(display=False) as counter:
        net.grad(flat, x, y, None, noise)
    return counter.get_total_flops() / 2


def flops_name(config) -> str:
    """A run's key in a row's ``gflop_per_client_step``: its model, dataset and mini-batch size."""
    return f"{config.model} ({config.dataset}), b = {config.batch_size}"


def _step_inputs(net, steps, k: int, batch: int):
    """(net, k stacked parameter vectors, mini-batches x and y, dropout noise or None) of one local step."""
    import torch

    from replicate.fl.models import CharLSTM
    g = torch.Generator().manual_seed(0)
    flat = net.init(g).unsqueeze(0) + 0.01 * torch.randn(k, net.num_params, generator=g)
    noise = None
    if isinstance(net, CharLSTM):
        x = torch.randint(0, net.vocab_size, (k, batch, steps), generator=g)
        y = torch.randint(0, net.num_classes, (k, batch, steps) if net.loss_kind == "token" else (k, batch),
                          generator=g)
    else:
        x = torch.randn(k * batch, *net.in_shape, generator=g)
        x, y = net.prepare(x, torch.randint(0, net.num_classes, (k * batch,), generator=g), net.num_classes)
        x, y = x.view(k, batch, *x.shape[1:]), y.view(k, batch, *y.shape[1:])
        if net.dropout:
            noise = torch.rand(k, batch, *net.dropout_shape, generator=g)
    return net, flat, x, y, noise


def _recorded(key: str, scale: str) -> str:
    """Seconds per run of a committed CPU-scale figure's timed runs, from its claims record."""
    path = paths.figures_dir() / f"{key}.claims.json"
    if not path.is_file():
        return ""
    seconds = sorted((json.loads(path.read_text()).get("run_seconds") or {}).values())
    if not seconds:
        return ""
    return (f"CPU-scale runs ({scale}; figures/{key}.claims.json, {len(seconds)} timed): "
            f"{seconds[0]:,.0f}-{seconds[-1]:,.0f} s "
            f"a run, mean {sum(seconds) / len(seconds):,.0f} s")


def _on_gpu(every: list) -> str:
    """Seconds per run of the figure's runs in the committed ledger (``runs.ledger``: runs computed on a GPU)."""
    from replicate.runs import cache, ledger

    runs = ledger.runs()
    names = {cache.key(c, device="cuda") for c in every}
    timed = sorted(meta["elapsed_s"] for name, meta in runs.items()
                   if name.split("_to_")[0] in names and meta.get("elapsed_s"))
    if not timed:
        return ""
    machines = sorted({m for piece in ledger.index() for m in piece.get("machines", ())}) or ["CUDA"]
    return (f"on a GPU ({', '.join(machines)}; figures/ledger, {len(timed)} timed): "
            f"{timed[0]:,.1f}-{timed[-1]:,.1f} s a run, mean {sum(timed) / len(timed):,.1f} s (a batch's time "
            "shared among its runs)")


def table() -> list[dict]:
    """One row per GPU-scale figure (see the module docstring)."""
    means, ops, flops, lengths = {}, {}, {}, {}
    rows = []
    for figure in FIGURES:
        tuning, final = figure.plan()
        tuning = _unique(tuning)
        every = _unique(tuning + final)
        final = every[len(tuning):]
        steps = [int(round_steps(c, lengths).sum()) for c in every]
        per_model, arithmetic = {}, {}
        for c in every:
            key = (c.model, c.dataset)
            if key not in ops:
                ops[key] = ops_per_step(*key)
            per_model[f"{c.model} ({c.dataset})"] = ops[key]
            if (*key, c.batch_size) not in flops:
                flops[(*key, c.batch_size)] = flops_per_step(*key, c.batch_size)
            arithmetic[flops_name(c)] = round(flops[(*key, c.batch_size)] / 1e9, 4)
        epochs: dict[str, list[float]] = {}  # dataset, b → [sequential steps, epochs] of the figure's runs
        for c, n in zip(every, steps):
            if c.local_steps is None:
                mean = _mean_steps(c.dataset, c.batch_size, means)
                name = f"{c.dataset}, b = {c.batch_size}"
                part = epochs.setdefault(name, [0.0, 0.0, mean])
                part[0], part[1] = part[0] + n, part[1] + c.rounds * c.local_epochs
        measured = "; ".join(t for t in [figure.measured] + [_recorded(*r) for r in figure.records] + [_on_gpu(every)]
                             if t)
        rows.append({"paper": figure.paper, "item": figure.item, "figure": figure.figure, "runs": len(every),
                     "tuning_runs": len(tuning), "final_runs": len(final),
                     "rounds": sorted({c.rounds for c in every}),
                     "steps_per_run": [min(steps), max(steps)], "sequential_steps": sum(steps),
                     **dict(zip(("batched_steps", "own_pace_steps"), batch_steps(tuning, final, lengths))),
                     "epoch_steps": {name: round(v[2], 2) for name, v in epochs.items()},
                     "round_epoch_steps": {name: round(v[0] / v[1], 2) for name, v in epochs.items()},
                     "ops_per_step": per_model, "gflop_per_client_step": arithmetic,
                     "measured": measured or "not measured"})
    return rows


def arena() -> dict:
    """The arena on a GPU (``ArenaConfig.GPU``, on the stand-ins): its runs, counted as the full grid (its
    successive halving computes the eliminated trials' first rounds only, so fewer), and their sequential local
    steps alone and in batches."""
    from replicate.experiments.arena import ArenaConfig

    config = ArenaConfig(**ArenaConfig.GPU, data_source=SOURCE)
    grid = config.grid()
    tuning = _unique(grid.tuning())
    every = _unique(tuning + grid.finals())
    lengths: dict = {}
    steps = [int(round_steps(c, lengths).sum()) for c in every]
    return {"settings": {k: list(v) if isinstance(v, tuple) else v for k, v in ArenaConfig.GPU.items()},
            "runs": len(every), "tuning_runs": len(tuning), "final_runs": len(every) - len(tuning),
            "sequential_steps": sum(steps),
            **dict(zip(("batched_steps", "own_pace_steps"), batch_steps(tuning, every[len(tuning):], lengths))),
            "not_run": config.skipped()}


def write(root=None):
    path = (root or paths.figures_dir()) / FILE
    # experiments.estimate's part is kept: it is refreshed after (``report --work``) or by ``ledger add``
    estimate = json.loads(path.read_text()).get("estimate") if path.is_file() else None
    text = json.dumps({"generated_by": "python -m replicate report --work (replicate/experiments/work.py)",
                       "rows": table(), "arena": arena(), **({"estimate": estimate} if estimate else {})}, indent=1,
                      ensure_ascii=False)
    atomic_write_text(path, text + "\n")
    return path


__all__ = ["BATCHING", "FIGURES", "FILE", "Figure", "arena", "batch_steps", "flops_name", "flops_per_step",
           "ops_per_step", "round_steps", "runs", "table", "write"]
