"""The numbers a reduced-scale note states, read from the figure's committed CSV (prose never states by
hand a number a record holds). Each function takes the CSV's path and returns the note's ``{name}``
values; ``reduced.Reduced.text`` fills them in (a CSV not published gives "?").

The windows are the figures' own: FedProx's Sent140 panels end at their last evaluation (round 200); Charles &
Konečný's "final" is the mean training loss of the last ``TAIL`` rounds and "early" that of rounds 1 to ``EARLY``
(the CPU-scale commands' ``tail_rounds`` and ``early_rounds``, as their claims compute them).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

TAIL, EARLY = 40, 20  # Charles & Konečný's CPU-scale windows (rounds), as their commands set them


def _tail(run: pd.DataFrame, column: str, fraction: float = 0.1) -> float:
    """The mean of ``column`` over a run's last ``fraction`` of evaluations (the figures' "final", as
    ``runs.measures.window`` cuts it; the report sits below ``runs`` and reads only the published CSVs)."""
    values = run.sort_values("round")[column].to_numpy(dtype=float)
    values = values[-max(1, int(round(fraction * len(values)))):]
    return float(values.mean()) if np.isfinite(values).all() else (np.inf if "loss" in column else np.nan)


def _seeds(values, spec: str = ".2f") -> str:
    """Per-seed values as the notes write them: "3.25 / 3.17"."""
    return " / ".join(f"{v:{spec}}" for v in values)


def fedprox_fig2(csv: Path) -> dict:
    """FedProx Figures 2/6, Sent140 (CPU scale): the loss each E starts from, its range at round 10 for E > 1, and
    every E's seed-mean training loss and test accuracy at the last round."""
    data = pd.read_csv(csv)
    last = data[data["round"] == data["round"].max()].groupby("E")[["train_loss", "test_acc"]].mean()
    tenth = data[(data["round"] == 10) & (data["E"] > 1)]["train_loss"]
    return {"start": f"{data[data['round'] == 0]['train_loss'].mean():.2f}",
            "jump": f"{tenth.min():.1f}-{tenth.max():.1f}",
            **{f"loss_{e}": f"{last.loc[e, 'train_loss']:.2f}" for e in last.index},
            **{f"acc_{e}": f"{last.loc[e, 'test_acc']:.3f}" for e in last.index}}


def _charles(csv: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (γ, seed) of the final runs: η, the final and early training loss, the last round's test accuracy."""
    data = pd.read_csv(csv)
    rows = []
    for (gamma, seed), run in data[data["kind"] == "curve"].groupby(["client_lr", "seed"]):
        run = run.sort_values("round")
        rows.append({"gamma": gamma, "seed": int(seed), "eta": run["server_lr"].iloc[0],
                     "final": run[run["round"] > run["round"].max() - TAIL]["train_loss"].mean(),
                     "early": run[run["round"].between(1, EARLY)]["train_loss"].mean(),
                     "acc": run["test_acc"].iloc[-1]})
    runs = pd.DataFrame(rows)
    return runs, runs.groupby("gamma").agg(eta=("eta", "first"), acc=("acc", "mean"))


def charles_fig12(csv: Path) -> dict:
    """Charles & Konečný Figure 12, FEMNIST (CPU scale): per γ (``g0``: the smallest, …) its per-seed final and
    early losses and seed-mean test accuracy, and the smallest γ's lead over the largest per seed."""
    runs, per = _charles(csv)
    out = {}
    for n, gamma in enumerate(per.index):
        part = runs[runs.gamma == gamma].sort_values("seed")
        out |= {f"final{n}": _seeds(part["final"]), f"early{n}": _seeds(part["early"]),
                f"acc{n}": f"{per.loc[gamma, 'acc']:.2f}"}
    low, high = (runs[runs.gamma == g].sort_values("seed")["final"].to_numpy() for g in (per.index[0], per.index[-1]))
    out["lead"] = " and ".join(f"{v:.1%}" for v in (high - low) / low)
    return out


def charles_fig13(csv: Path) -> dict:
    """Charles & Konečný Figure 13, FEMNIST (CPU scale): per γ the tuned η, its per-seed final loss and its
    seed-mean test accuracy at the last round."""
    runs, per = _charles(csv)
    out = {}
    for n, gamma in enumerate(per.index):
        part = runs[runs.gamma == gamma].sort_values("seed")
        out |= {f"eta{n}": f"{per.loc[gamma, 'eta']:.3g}", f"final{n}": _seeds(part["final"]),
                f"acc{n}": f"{per.loc[gamma, 'acc']:.2f}"}
    curves = pd.read_csv(csv).query("kind == 'curve'")
    edges = sorted(curves[curves["eta_at_edge"].astype(str) == "True"]["client_lr"].unique())
    out["edges"] = (f"at its grid's edge for γ = {', '.join(f'{g:g}' for g in edges)}" if edges
                    else "each inside its grid")
    return out


def _mu(mu: float) -> str:
    return f"μ = {mu:g}"


def fedprox_fig3(csv: Path) -> dict:
    """FedProx Figures 3/7, Sent140 (CPU scale): the μ grid's final training loss on the tuning seed (mean of the
    last two evaluations, the claims' window), the best μ > 0, μ = 0 against it on each seed, the final test
    accuracy of μ ≥ 0.5 and μ = 0's loss on the test seed at its first evaluation and at its end."""
    data = pd.read_csv(csv)
    tail = data[data["round"] >= sorted(data["round"].unique())[-2]]
    finals = tail.groupby(["mu", "seed"])[["train_loss", "test_acc"]].mean()
    best = float(data[data["best"]]["mu"].iloc[0])
    seeds = sorted(data["seed"].unique())
    zero = data[(data["mu"] == 0) & (data["seed"] == seeds[-1])].sort_values("round")["train_loss"]
    large = finals.xs(seeds[0], level="seed").query("mu >= 0.5")["test_acc"]
    return {"grid": ", ".join(f"{_mu(mu) if n == 0 else f'{mu:g}'}: {v:.2f}" for n, (mu, v) in enumerate(
                finals.xs(seeds[0], level="seed")["train_loss"].items())),
            "best": f"{best:g}",
            "versus": ", ".join(f"{finals.loc[(best, s), 'train_loss']:.2f} vs "
                                f"{finals.loc[(0.0, s), 'train_loss']:.2f} on seed {s}" for s in seeds),
            "large_acc": f"{large.min():.3f}-{large.max():.3f}", "zero_first": f"{zero.iloc[0]:.3f}",
            "zero_last": f"{finals.loc[(0.0, seeds[-1]), 'train_loss']:.3f}", "test_seed": f"{seeds[-1]}"}


def fedprox_fig4(csv: Path) -> dict:
    """FedProx Figure 4, Sent140 (CPU scale): the mean dissimilarity over rounds per μ on the tuning seed."""
    data = pd.read_csv(csv)
    first = data[data["seed"] == data["seed"].min()]
    means = first.groupby("mu")["dissimilarity"].mean()
    return {"dissimilarity": ", ".join(f"{_mu(mu) if n == 0 else f'{mu:g}'}: {v:.0f}"
                                       for n, (mu, v) in enumerate(means.items()))}


STEM_LABELS = {"FedAvg": "fedavg", "SCAFFOLD": "scaffold", "STEM": "stem"}  # placeholder suffix per algorithm


def _setting(algorithm: str, lr: float, c: float) -> str:
    return f"κ̄ = {lr:g}, c = {c:g}" if algorithm == "STEM" else f"η = {lr:g}"


def stem_cifar(csv: Path) -> dict:
    """STEM Figures 2-4 on CIFAR-10 (CPU scale), the note's own figure (the first ``figure`` of its curves): per
    algorithm (suffix ``fedavg``, ``scaffold``, ``stem``) the chosen setting, every candidate's tuning loss
    (where it did not finish, the last round its published tuning curve is finite), the final runs' last training
    loss and test accuracy per seed, and STEM's first-epoch momentum weight a = c·(κ̄/2^(1/3))² and its largest
    rise in training loss (``spike_*``); STEM's lag behind FedAvg per seed, in training loss (%) and test accuracy
    (points); and each figure's range of seed-mean test accuracies (``acc_range_<n>``)."""
    data = pd.read_csv(csv)
    figure = data[data["kind"] == "curve"]["figure"].iloc[0]
    own = data[data["figure"] == figure]
    out = {}
    last = {}
    for algorithm, suffix in STEM_LABELS.items():
        tuned = own[(own["kind"] == "tuning") & (own["algorithm"] == algorithm)]
        out[f"tuning_{suffix}"] = ", ".join(
            f"{_setting(algorithm, r.lr, r.c)}: " + (f"{r.final_train_loss:.3f}" if np.isfinite(r.final_train_loss)
                                                      else f"diverged after round {_diverged_after(own, algorithm, r)}")
            for r in tuned.itertuples())
        runs = own[(own["kind"] == "curve") & (own["algorithm"] == algorithm)].sort_values(["seed", "round"])
        ends = runs.groupby("seed").last()
        last[algorithm] = ends
        out[f"final_{suffix}"] = _seeds(ends["train_loss"], ".3f")
        out[f"acc_{suffix}"] = _seeds(100 * ends["test_acc"], ".1f")
        chosen = tuned.sort_values("final_train_loss").iloc[0]
        out[f"chosen_{suffix}"] = _setting(algorithm, chosen.lr, chosen.c)
        if algorithm == "STEM":
            out["a_stem"] = f"{chosen.c * (chosen.lr / 2 ** (1 / 3)) ** 2:.2f}"
            out |= _spike(runs)
    stem, fedavg = last["STEM"], last["FedAvg"]
    lag, points = (stem["train_loss"] / fedavg["train_loss"] - 1) * 100, (fedavg["test_acc"] - stem["test_acc"]) * 100
    out["loss_lag"] = f"{lag.min():+.1f} to {lag.max():+.1f} %"
    out["acc_lag"] = f"{points.min():+.1f} to {points.max():+.1f}"
    for name, part in data[data["kind"] == "curve"].groupby("figure"):
        means = part.sort_values("round").groupby(["algorithm", "seed"]).last().groupby("algorithm")["test_acc"].mean()
        out[f"acc_range_{name[-1]}"] = f"{100 * means.min():.1f}-{100 * means.max():.1f} %"
    return out


def _diverged_after(own: pd.DataFrame, algorithm: str, candidate) -> str:
    """The last round at which a tuning candidate's published curve (``kind = "tuning curve"``, named by its
    ``chosen`` text) is finite: where it diverged."""
    name = f"lr={candidate.lr:g}" + (f", c={candidate.c:g}" if algorithm == "STEM" else "")
    run = own[(own["kind"] == "tuning curve") & (own["algorithm"] == algorithm) & (own["chosen"] == name)]
    finite = run[run["train_loss"].notna()]["round"]
    return f"{finite.max():.0f}" if len(finite) else "?"


def _spike(runs: pd.DataFrame) -> dict:
    """Where each seed's final run rises most in training loss between two evaluations (a step near its limit):
    the round (``spike_round``), the loss there and the test accuracy lost, per seed."""
    rounds, peaks, drops = [], [], []
    for _, run in runs.groupby("seed"):
        at = run["train_loss"].diff().idxmax()
        rounds.append(run.loc[at, "round"])
        peaks.append(run.loc[at, "train_loss"])
        drops.append(100 * (run["test_acc"].shift() - run["test_acc"]).loc[at])
    return {"spike_round": (f"round {rounds[0]:.0f} on both seeds" if len(set(rounds)) == 1
                            else f"rounds {_seeds(rounds, '.0f')} (seeds 0 / 1)"),
            "spike_loss": _seeds(peaks, ".2f"), "spike_drop": _seeds(drops, ".1f")}


def _span(values, spec: str = ",.0f") -> str:
    low, high = min(values), max(values)
    return f"{low:{spec}}" if low == high else f"{low:{spec}}-{high:{spec}}"


def stem_fig5(csv: Path) -> dict:
    """STEM Figure 5 on MNIST (CPU scale): per algorithm (suffix as ``stem_cifar``) the samples per worker to 90 %
    test accuracy at I = 10 and 100 (over the seeds) and the seed-mean final training loss at each I (mean of
    the last 10 % of evaluations, the figure's); the STEM settings that trained at each I (a finite tuning loss)
    with their momentum weight and loss; the chosen rates of FedAvg and SCAFFOLD; the pairs tried and how many."""
    data = pd.read_csv(csv)
    rows = []
    for (algorithm, i, seed), run in data[data["kind"] == "curve"].groupby(["algorithm", "local_updates", "seed"]):
        hit = run[run["test_acc"] >= 0.9]  # the figure's measure (khanduri2021.samples.to_target)
        rows.append({"algorithm": algorithm, "local_updates": i, "seed": seed,
                     "samples_to_target": float(hit["samples"].min()) if len(hit) else np.inf,
                     "final_train_loss": _tail(run, "train_loss")})
    reached = pd.DataFrame(rows)
    out = {}
    for algorithm, suffix in STEM_LABELS.items():
        part = reached[reached["algorithm"] == algorithm]
        for i in (10, 100):
            at = part[part["local_updates"] == i]
            out[f"target_{suffix}_{i}"] = _span(at["samples_to_target"])
            out[f"loss_{suffix}_{i}"] = f"{at['final_train_loss'].mean():.2f}"
    tuning = data[data["kind"] == "tuning"]
    stem = tuning[tuning["algorithm"] == "STEM"]
    out["pairs"] = f"{len(stem) // stem['local_updates'].nunique()}"
    for i in (10, 100):
        trained = stem[(stem["local_updates"] == i) & np.isfinite(stem["final_train_loss"])]
        out[f"trained_{i}"] = "; ".join(
            f"{_setting('STEM', r.lr, r.c)} (a ≈ {r.c * (r.lr / 2 ** (1 / 3)) ** 2:.2f}, loss {r.final_train_loss:.2f})"
            for r in trained.itertuples())
        for algorithm in ("FedAvg", "SCAFFOLD"):
            chosen = tuning[(tuning["algorithm"] == algorithm) & (tuning["local_updates"] == i)]
            best = chosen.sort_values("final_train_loss").iloc[0]
            out[f"chosen_{STEM_LABELS[algorithm]}_{i}"] = f"{best.lr:g}"
    return out


def _claims(csv: Path) -> dict:
    """The claim results of the record beside ``csv``, by the claim's opening words."""
    import json

    record = json.loads(csv.with_name(csv.stem + ".claims.json").read_text())
    return {c["claim"]: c["result"] for c in record["claims"]}


def _result(results: dict, opening: str) -> str:
    return next(text for claim, text in results.items() if claim.startswith(opening))


def stragglers(csv: Path) -> dict:
    """FedProx's straggler figure, Sent140 (CPU scale): FedAvg's final training loss without and with 90 %
    stragglers, FedProx's (μ = 0 and μ > 0) at 90 %, and the test-accuracy gains over FedAvg there, each
    "mean [min, max]" over the seeds as its claims state them; FedAvg's final test accuracy at 90 % from the CSV
    (mean of the last 10 % of evaluations, the figure's window)."""
    results = _claims(csv)
    degrade = re.search(r"Sent140: (\S+ \[[^]]+\]) → (\S+ \[[^]]+\])", _result(results, "FedAvg degrades"))
    prox = re.search(r"vs (\S+ \[[^]]+\])", _result(results, "FedProx (μ > 0) is robust"))
    partial = re.search(r"vs (\S+ \[[^]]+\])", _result(results, "Keeping the stragglers"))
    gains = _result(results, "FedProx improves absolute test accuracy")
    gain, alone = re.findall(r"Sent140: (\S+ \[[^]]+\])", gains)
    data = pd.read_csv(csv)
    worst = data[(data["algorithm"] == "FedAvg") & (data["drop"] == data["drop"].max())]
    accs = [_tail(run, "test_acc") for _, run in worst.groupby("seed")]
    return {"fedavg_none": degrade.group(1), "fedavg_90": degrade.group(2), "prox_90": prox.group(1),
            "partial_90": partial.group(1), "gain": gain, "gain_alone": alone,
            "fedavg_acc_90": f"{np.mean(accs):.3f} [{min(accs):.3f}, {max(accs):.3f}]"}


CHARLES6 = {"no momentum": "plain", "Nesterov": "nesterov", "heavy-ball": "heavy", "no momentum, α = 1": "alpha"}


def charles_fig6(csv: Path) -> dict:
    """Charles & Konečný Figure 6 (= 11), FEMNIST (CPU scale): per variant (suffix ``plain``, ``nesterov``,
    ``heavy``, ``alpha``) its tuned η, and per seed its test accuracy and training loss at the last round; how far
    α = 1's mean test accuracy over the last ``TAIL`` rounds (the figure's selection window) lies below α = 0's on
    each seed; and each variant's tuning score (tail accuracy) at the grid's largest η."""
    data = pd.read_csv(csv)
    curves, tuning = data[data["kind"] == "curve"], data[data["kind"] == "tuning"]
    out, tails = {}, {}
    for variant, suffix in CHARLES6.items():
        runs = curves[curves["variant"] == variant].sort_values(["seed", "round"])
        ends = runs.groupby("seed").last()
        out |= {f"eta_{suffix}": f"{runs['server_lr'].iloc[0]:.3g}", f"acc_{suffix}": _seeds(ends["test_acc"]),
                f"loss_{suffix}": _seeds(ends["train_loss"])}
        tails[suffix] = [run[run["round"] > run["round"].max() - TAIL]["test_acc"].mean()
                         for _, run in runs.groupby("seed")]
        top = tuning[(tuning["variant"] == variant)].sort_values("server_lr").iloc[-1]
        out[f"top_{suffix}"] = f"{top['score']:.2f}"
    edges = curves[curves["at_edge"].notna() & (curves["at_edge"].astype(str) != "")]["variant"].unique()
    out["edges"] = (f"at its grid's edge: {', '.join(edges)}" if len(edges) else "each inside its grid")
    out["top_eta"] = f"{tuning['server_lr'].max():.3g}"
    out["alpha_gap"] = " and ".join(f"{a - b:.3f}" for a, b in zip(tails["plain"], tails["alpha"]))
    return out
