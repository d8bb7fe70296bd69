"""FedProx (Li, Sahu et al.): what the training figures share — per-dataset settings, deviations,
run configs, cached runs with the dissimilarity recorded every round, the curve measures the
claims use and the plot layout.

Settings follow ``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §2.2 and §3 (FedProx draft
and final): multinomial logistic regression with no effective L2 (the authors' MCLR attaches a
regulariser that never enters the loss) and no clipping; E local *epochs* of mini-batches of
b = 10 (⌈n_k/b⌉ steps each, the last batch smaller); a constant learning rate per dataset
(App. C.2); K devices sampled uniformly without replacement, models averaged with weights n_k
over the devices that return (the final code, not the draft's Algorithm 2); evaluation of the
global model before every round and after the last.

"μ = 0" curves are FedProx with μ = 0, which is FedAvg (equal bit for bit, ``tests/test_algorithms``);
FedAvg proper (``scheme="weighted"``) only appears in the straggler grid, where it drops stragglers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from replicate.runs import pool
from replicate.report.claims import quoting
from replicate.core.errors import ReplicateError
from replicate.fl.algorithms import FedAvg, FedProx
from replicate.runs.config import RunConfig
from replicate.fl import models
from replicate.fl.dissimilarity import device_gradient_variance
from replicate.data import variants
from replicate.experiments import knobs

BATCH_SIZE = 10  # b, every dataset (App. C.2)
METRICS = ("train_loss", "train_acc", "test_loss", "test_acc", "dissimilarity")
METRIC_LABELS = {"train_loss": "Training loss", "test_acc": "Test accuracy", "train_acc": "Training accuracy",
                 "dissimilarity": "Dissimilarity (variance of\nlocal gradients, log scale)"}


@dataclass(frozen=True)
class Setting:
    """One dataset as the FedProx experiments run it (App. C.2; spec §3)."""

    label: str  # as the paper's panels name it
    dataset: str  # ``RunConfig.dataset``
    client_lr: float  # η, constant (``RunConfig.client_lr``)
    clients_per_round: int  # K (the draft's "ratio of active devices" × N; 10 in the final paper)
    rounds: int  # x-limit of the panels (the final paper's; the draft states none for real data)
    prox_mu: float  # μ, the final code's μ > 0 (straggler grid; ``FedProx.prox_mu``)
    num_clients: int | None = None  # N for the synthetic sets (30)
    model: str = "logistic"  # ``RunConfig.model``: multinomial logistic regression, or the authors' LSTMs
    eval_every: int = 1  # rounds between evaluations (the authors: every round)


SYNTHETIC = ("synthetic_iid", "synthetic(0,0)", "synthetic(0.5,0.5)", "synthetic(1,1)")
SETTINGS = {
    "synthetic_iid": Setting("Synthetic IID", "synthetic_iid", 0.01, 10, 200, 1.0, 30),
    "synthetic(0,0)": Setting("Synthetic (0,0)", "synthetic(0,0)", 0.01, 10, 200, 1.0, 30),
    "synthetic(0.5,0.5)": Setting("Synthetic (0.5,0.5)", "synthetic(0.5,0.5)", 0.01, 10, 200, 1.0, 30),
    "synthetic(1,1)": Setting("Synthetic (1,1)", "synthetic(1,1)", 0.01, 10, 200, 1.0, 30),
    "mnist": Setting("MNIST", "mnist_fedprox", 0.03, 10, 100, 1.0),
    # The draft's EMNIST: 900 writers of TFF's EMNIST-62, 5% (45) of them active a round (spec §1(c), §5)
    "emnist": Setting("EMNIST", "emnist_draft_tff", 0.003, 45, 200, 1.0),
    "emnist_star": Setting("EMNIST*", "emnist_star_tff", 0.003, 10, 200, 1.0),
    "femnist": Setting("FEMNIST", "femnist_fedprox_tff", 0.003, 10, 200, 1.0),
    # The LSTM sets (final code: K = 10, μ = 0.001 / 0.01): runnable, not in the default panels
    # on a CPU (``LSTM_DEVIATION``); name them in a figure's ``datasets`` to run them.
    "shakespeare": Setting("Shakespeare", "shakespeare", 0.8, 10, 40, 0.001, model="char_lstm"),
    # Sent140: evaluated every 10th round: the dissimilarity over our 2,875 tiny devices costs ≈ 14 s
    # on this CPU, 3-10 times a round's training at E = 20.
    "sent140": Setting("Sent140", "sent140_leaf", 0.3, 10, 800, 0.01, model="sent_lstm", eval_every=10),
}
# On the offline stand-in (data_source = "stand-in", replicate.data.variants) the draft's EMNIST is the partial LEAF
# copy's 105 writers, 5 of them (the draft's 5%) active a round
STAND_IN_CLIENTS_PER_ROUND = {"emnist": 5}
LABELS = {key: s.label for key, s in SETTINGS.items()}
DISSIMILARITY_SAMPLES = 200  # the authors' LSTMs: each device's first ≤ 200 samples (spec §2.2)

COMMON_DEVIATIONS = (
    "Runs vary the run seed (initialisation, sampling, mini-batches, stragglers) over a fixed dataset; the "
    "paper shows one run per curve. Bands are the min–max over seeds.",
    "Initialisation: PyTorch's uniform ±1/√d (the authors' MCLR: Glorot-uniform kernel, zero bias).",
    "Mini-batches: a fresh random permutation of the device's samples every epoch (the authors re-seed numpy "
    "with 100 before every epoch, so their orders are fixed across rounds and algorithms).",
    "The dissimilarity is computed at the global model before every round on every device's full training "
    "set, as the authors' fedprox trainer prints it; it is also recorded for the FedAvg runs.",
)
SYNTHETIC_DEVIATION = (
    "Synthetic sets: our seeded draws of the authors' unseeded generator with 30 devices (the committed "
    "train files are not in their repository); all four sets share their device sizes (same data seed); "
    "split 90/10 per device as in their code (the draft says 80/20).")
# The authors ran one generator script per synthetic set, each its own draw, and their committed test files
# (805-1,084 test samples a set, test = n − int(0.9n)) put each set at ≈ 8,000-11,000 samples. Set i of SYNTHETIC
# with run seed s trains on the s-th data seed from PER_SET_SEED·(i + 1) on whose 30 devices hold that many
# samples (a rule on the draw's size alone, fixed before any run of it), where a figure asks for it; each set's
# seeds stay below the next set's first, so no two sets share a draw (about a quarter of the seeds fit).
PER_SET_SEED = 10_000
PER_SET_SAMPLES = (8_000, 11_000)
PER_SET_DEVIATION = (
    "Synthetic sets: our seeded draws of the authors' unseeded generator with 30 devices (the committed train files "
    "are not in their repository), each set its own draw for each run seed, as the authors ran one generator script "
    f"per set: set i of IID, (0,0), (0.5,0.5), (1,1) with run seed s reads the s-th data seed from "
    f"{PER_SET_SEED}·(i + 1) on whose devices hold {PER_SET_SAMPLES[0]:,}-{PER_SET_SAMPLES[1]:,} samples, the size "
    "the authors' committed test files imply; the seeds are draws of the data too and the claims read their spread; "
    "split 90/10 per device as in their code (the draft says 80/20).")


def per_set_seed(key: str, seed: int) -> int:
    """The data seed of synthetic set ``key`` under run seed ``seed`` (``PER_SET_DEVIATION``)."""
    from replicate.data.synthetic import device_sizes

    first = PER_SET_SEED * (SYNTHETIC.index(key) + 1)
    found = -1
    for candidate in range(first, first + PER_SET_SEED):
        if PER_SET_SAMPLES[0] <= device_sizes(SETTINGS[key].num_clients, candidate).sum() <= PER_SET_SAMPLES[1]:
            found += 1
            if found == seed:
                return candidate
    raise ReplicateError(f"{key}: seed {seed} has no draw of {PER_SET_SAMPLES[0]:,}-{PER_SET_SAMPLES[1]:,} samples "
                         f"among data seeds {first}-{first + PER_SET_SEED - 1}; use a smaller seed")


DATA_DEVIATIONS = {
    "mnist": "MNIST: the authors' power-law generator over all 70,000 images, 1,000 devices, seed 64 "
             "(69,042 samples, std 119; theirs 69,035, std 106), split 90/10.",
    "emnist": "EMNIST: a seeded draw of 900 of TFF EMNIST-62's 3,400 writers, each with TFF's train/test split "
              "(spec §1(c) PROPOSED: the draft's LEAF sampling arguments are unpublished), 45 devices a round (5%).",
    "emnist_star": "EMNIST*: the draft's code is unpublished; the spec's PROPOSED recipe (26 lower-case letters, "
                   "20 per device, 200 devices) over the lower-case letters of TFF's EMNIST-62 (all 3,400 writers).",
    "femnist": "FEMNIST (final): the authors' my_sample.py recipe (letters a–j, 3 per device, 200 devices) over TFF "
               "EMNIST-62's images of a–j instead of 4,000 per class from the raw NIST by_class PNGs; 10 outputs "
               "(theirs: 26).",
    "shakespeare": "Shakespeare: LEAF's preprocessing of the raw complete works, then a seeded --sf 0.2 draw (210 "
                   "devices, 845,241 windows; Table 1: 143 / 517,706); the authors' LSTM (2×256).",
    "sent140": "Sent140: the raw Sentiment140 CSVs through LEAF's steps (-s niid --sf 0.3 -k 30 -t sample, seeded), "
               "the authors' frozen GloVe 6B 300-d embedding (a zero row for unknown words); evaluated every 10th "
               "round (the authors: every round).",
}
# The same sets on this machine's offline stand-ins (data_source = "stand-in"; replicate.data.variants)
STAND_IN_DEVIATIONS = {
    "emnist": "EMNIST (offline stand-in): only a partial LEAF FEMNIST copy exists here (105 writers with both splits, "
              "16,393 samples; the draft: 900 writers, 305,654 samples) — 5 of 105 devices per round (the draft's 5%).",
    "emnist_star": "EMNIST* (offline stand-in): the draft's code is unpublished; the spec's PROPOSED recipe (26 "
                   "lower-case letters, 20 per device, 200 devices) over the ~118 images per letter of the partial "
                   "local copy, so most samples repeat an image.",
    "femnist": "FEMNIST (final; offline stand-in): the authors' my_sample.py recipe (letters a–j, 3 per device, 200 "
               "devices) over the ~120 images per class of the partial local copy; 10 outputs (theirs: 26).",
    "sent140": "Sent140 (offline stand-in): only LEAF's test split exists here (2,875 users, 16,025 tweets), re-split "
               "80/20 per user; no GloVe, so the authors' frozen 300-d GloVe embedding is a frozen random table "
               "(uniform ±1, the same for every run) over the training tweets' vocabulary; evaluated every 10th "
               "round (the authors: every round).",
}


def rests_on(config, labels) -> dict:
    """``data`` and ``basis`` of a claim whose verdict reads the datasets labelled ``labels`` (``LABELS``'s values,
    as the figures' data name them): "partial-data" where any is read from a stand-in (``knobs.DataChoice``)."""
    keys = [key for key, label in LABELS.items() if label in set(labels)]
    return config.rests_on([SETTINGS[key].dataset for key in keys])


def data_deviation(key: str, data: str) -> str:
    """The data deviation of dataset ``key`` when the runs read ``data`` (official or stand-in)."""
    if data == variants.STAND_IN and key in STAND_IN_DEVIATIONS:
        return STAND_IN_DEVIATIONS[key]
    return DATA_DEVIATIONS[key]


LSTM_DEVIATION = (
    "Shakespeare and Sent140 (LSTM) panels are not in the committed paper-scale figures: this 2-core CPU cannot "
    "run them at the paper's scale. Measured on it with the fused LSTM kernel (one device, batch 10, forward + "
    "backward): 24-32 ms per local step for the Shakespeare 2×256 LSTM on 80-character windows, so one round "
    "at E = 20 epochs (10 devices × ≈ 400 steps an epoch) is ≈ 80,000 device-steps ≈ 40 min and a 40-round "
    "curve ≈ a day; Sent140 (frozen embedding, 10 devices stacked) ≈ 57 ms per step of all 10 and ≈ 17 s per "
    "evaluation, 14 s of it the dissimilarity over 2,875 devices: 200 rounds take ≈ 13 min at E = 20 (they "
    "took 21 min, and 46 min at E = 50, before the LSTM's weight gradients were formed per layer), so an "
    "800-round curve ≈ 1-2.5 h. They run "
    "unchanged on a GPU: name 'shakespeare' / 'sent140' in the figure's datasets. Settings: the final code's "
    "(η 0.8 / 0.3, K = 10, μ 0.001 / 0.01, 40 / 800 rounds, hidden sizes 256 / 100 — the papers print them "
    "swapped); Shakespeare is LEAF's seeded --sf 0.2 draw (210 devices, Table 1: 143); Sent140's data is "
    "listed above.")


def run_config(key: str, *, prox_mu: float, epochs: int, seed: int, drop: float = 0.0, algorithm: str = "fedprox",
               rounds: int | None = None, clients_per_round: int | None = None,
               data: str = variants.OFFICIAL, data_seed: int | None = None) -> RunConfig:
    """A FedProx-paper run on dataset ``key`` (see ``SETTINGS``) with proximal weight μ = ``prox_mu``, read from the
    official data or its stand-in (``data_seed``: its draw, for a generated set; None: the builder's default)."""
    s = SETTINGS[key]
    loader = variants.loader(s.dataset, data)
    k = clients_per_round or (STAND_IN_CLIENTS_PER_ROUND.get(key, s.clients_per_round) if loader != s.dataset
                              else s.clients_per_round)
    if algorithm == "fedavg":  # the FedProx code's FedAvg: n_k-weighted, stragglers dropped
        if prox_mu:
            raise ReplicateError("FedAvg has no proximal term: μ needs algorithm='fedprox'")
        settings = FedAvg("weighted", k, straggler_fraction=drop)
    else:
        settings = FedProx(prox_mu, k, sampling="uniform", straggler_fraction=drop)
    return RunConfig(dataset=loader, data_seed=data_seed, num_clients=s.num_clients, model=s.model, algorithm=settings,
                     local_steps=None, local_epochs=epochs, batch_size=BATCH_SIZE, client_lr=s.client_lr,
                     lr_schedule="constant", weight_decay=0.0, clip_norm=None,
                     rounds=rounds or s.rounds, seed=seed, eval_every=s.eval_every,
                     execution="stacked" if s.model == "logistic" else "auto")  # LSTMs: engine.preferred_execution


# ---- runs: every run records the dissimilarity -------------------------------------------

def dissimilarity(problem, params, round_: int) -> dict:
    """``extra_metrics`` of every FedProx-paper run: the dissimilarity at the global model."""
    lstm = isinstance(problem.model, models.CharLSTM)
    return {"dissimilarity": device_gradient_variance(problem, params,
                                                      max_samples=DISSIMILARITY_SAMPLES if lstm else None)}


dissimilarity.key = f"dissimilarity(lstm_samples={DISSIMILARITY_SAMPLES})"  # the run cache keys on it


def run(config: RunConfig, log=None) -> pd.DataFrame:
    """One run's per-round metrics, from the cache when present (dissimilarity included)."""
    return runs([({}, config)], workers=1, log=log)


def runs(labelled: list[tuple[dict, RunConfig]], workers: int = 2, progress: bool = True, log=None) -> pd.DataFrame:
    """Tidy per-round metrics of every ``(labels, config)``: the labels, round and ``METRICS``."""
    return pool.frame(labelled, columns=("round", *METRICS), extra_metrics=dissimilarity, workers=workers,
                      progress=progress, log=log)


# ---- curve measures ------------------------------------------------------------------------

def fmt_seeds(values) -> str:
    """'mean [min, max]' of one number per seed."""
    v = np.asarray(list(values), dtype=float)
    return f"{v.mean():.3g}" if v.size == 1 else f"{v.mean():.3g} [{v.min():.3g}, {v.max():.3g}]"


@dataclass(frozen=True)
class DatasetDeviations(knobs.DataChoice):
    """Mixin of the FedProx figure configs: the ``data_source`` knob (official data or this machine's stand-ins), and
    ``deviations`` that follow it and the ``datasets`` knob, so a run of ``datasets=["sent140"]`` lists Sent140's
    data deviation and not the default sets' (derived, never set)."""

    EXTRA_DEVIATIONS: ClassVar[tuple[str, ...]] = ()
    LSTM_PANELS: ClassVar[bool] = True  # the paper's figure has LSTM panels
    PER_SET_DRAWS: ClassVar[bool] = False  # each synthetic set its own draw per seed (``per_set_seed``)

    def __post_init__(self):
        object.__setattr__(self, "deviations",
                           deviations_for(self.datasets, self.EXTRA_DEVIATIONS, self.LSTM_PANELS, self.data_source,
                                          self.PER_SET_DRAWS))

    def dataset_names(self) -> tuple[str, ...]:
        """The loaders its panels read (``replicate.experiments.requirements``)."""
        return tuple(self.loader(SETTINGS[k].dataset) for k in self.datasets)


def deviations_for(keys, extra=(), lstm: bool = True, data: str = variants.OFFICIAL,
                   per_set: bool = False) -> tuple[str, ...]:
    """The deviations of a figure over datasets ``keys`` read from ``data``; ``lstm``: the paper's figure has LSTM
    panels; ``per_set``: each synthetic set its own draw per seed."""
    keys = list(keys)
    out = list(COMMON_DEVIATIONS)
    if any(k in SYNTHETIC for k in keys):
        out.append(PER_SET_DEVIATION if per_set else SYNTHETIC_DEVIATION)
    out += [data_deviation(k, data) for k in keys if k in DATA_DEVIATIONS]
    return tuple(out) + tuple(extra) + ((LSTM_DEVIATION,) if lstm else ())


# ---- plots -------------------------------------------------------------------------------------

def curves_grid(data: pd.DataFrame, metrics: tuple[str, ...], hue: str, title: str, order=None,
                col: str = "dataset", row_facet: str | None = None, row_label=str, dashes: dict | None = None):
    """One row per metric (per ``row_facet`` value × metric if given) and one column per ``col``
    value; one line per ``hue`` value (dash pattern from ``dashes``) with its min–max band over
    seeds; one legend below."""
    import textwrap

    import matplotlib.pyplot as plt
    import seaborn as sns

    cols = list(pd.unique(data[col]))
    rows = [(rv, m) for rv in (list(pd.unique(data[row_facet])) if row_facet else [None]) for m in metrics]
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(max(3.3 * len(cols) + 0.4, 7.0), 2.4 * len(rows) + 0.9),
                             squeeze=False)
    hue_order = order or list(pd.unique(data[hue]))
    palette = dict(zip(hue_order, sns.color_palette("colorblind", len(hue_order))))
    for i, (rv, metric) in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i, j]
            part = data[(data[col] == c) & ((data[row_facet] == rv) if row_facet else True)]
            styles = dict(style=hue, style_order=hue_order, dashes=dashes) if dashes else {}
            sns.lineplot(part, x="round", y=metric, hue=hue, hue_order=hue_order, palette=palette, ax=ax,
                         errorbar=("pi", 100) if part["seed"].nunique() > 1 else None,
                         estimator="mean", legend=(i == 0 and j == 0), lw=1.1, **styles)
            if metric == "dissimilarity" and (part[metric] > 0).any():
                ax.set_yscale("log")
            label = METRIC_LABELS.get(metric, metric) + (f"\n({row_label(rv)})" if row_facet else "")
            ax.set(xlabel="# Rounds" if i == len(rows) - 1 else "", ylabel=label if j == 0 else "",
                   title=str(c) if i == 0 else "")
            ax.set_xlim(0, max(1, part["round"].max()) if len(part) else 1)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if axes[0, 0].get_legend() is not None:
        axes[0, 0].get_legend().remove()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)
    width, height = fig.get_size_inches()
    lines = textwrap.wrap(title, int(width * 11))
    fig.tight_layout(rect=(0, 0.7 / height, 1, 1 - (0.19 * len(lines) + 0.1) / height))
    fig.suptitle("\n".join(lines), y=1 - 0.06 / height, va="top", fontsize="large")  # the title publish may label
    return fig


# ---- the seed sentences (draft, §5) the figures' claims test, matched by the claim's words ----------------

_DEP_E = ("§5.3, Dependence on E: \"We see that large E leads to divergence or instability on MNIST and Shakespeare "
          "datasets [...]. On EMNIST and Sent140, nevertheless, larger E speeds up the convergence. [...] We validate "
          "this hypothesis by observing instability on EMNIST*\"")
_SIMILAR = ("§5.4: \"Empirically, either decreasing E (Figure 6 in the appendix) or increasing μ (Figure 4) leads to "
            "larger similarity among local functions.\"")
_FIG1 = ("§5.2, Figure 1: \"The increasing heterogeneity leads to worse convergence and large μ is particularly "
         "useful in heterogeneous settings.\"")
SOURCES = (
    ("Convergence worsens as the data become more heterogeneous", _FIG1),
    ("particularly useful in the most heterogeneous", _FIG1),
    ("The dissimilarity captures the heterogeneity", "§5.4: \"our dissimilarity measurement (see Definition 2) "
                                                     "captures the heterogeneity of datasets\""),
    ("many local epochs make FedAvg unstable", _DEP_E),
    ("larger E speeds up convergence", _DEP_E),
    ("Decreasing E makes the local functions more similar", _SIMILAR),
    ("Increasing μ makes the local functions more similar", _SIMILAR),
    ("consistent with the training loss", "§5.4: \"We also observe that the dissimilarity metric is consistent with "
                                          "the training loss.\""),
    ("Smaller dissimilarity indicates better convergence", "§5.4: \"Therefore, smaller dissimilarity indicates better "
                                                           "convergence, which can be enforced by setting μ "
                                                           "appropriately.\""),
)


quoted = quoting(SOURCES)  # attaches to each claim the seed sentence it tests (matched by words in the claim)
