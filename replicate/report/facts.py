"""The numbers each coverage row's prose states, read from the published records (prose never states
by hand a number a record holds). Each function takes the records by ``paper/figure`` and returns the
row's ``{name}`` values; ``coverage.Item.text`` fills them in (a record or CSV not published gives "?").
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable


def render(template: str, read: Callable, source) -> str:
    """``template`` with every ``{name}`` filled from ``read(source)``; a name it cannot give reads "?": a record,
    claim or CSV not published (yet), or a CSV without the figure's columns, leaves the prose readable, not an error.
    Used by the coverage rows (``source``: the records by key) and the reduced-scale notes (their CSV's path)."""
    found = {}
    try:
        found = read(source)
    except (KeyError, IndexError, StopIteration, AttributeError, OSError):
        pass
    return template.format_map(_Missing(found))


class _Missing(dict):
    def __missing__(self, name: str) -> str:
        return "?"


def _result(by_key: dict, key: str, claim: str) -> str:
    """The result text of the claim of record ``key`` (``paper/figure``) that opens with ``claim``."""
    return next(c["result"] for c in by_key[key]["claims"] if c["claim"].startswith(claim))


def _grab(pattern: str, text: str) -> str:
    return re.search(pattern, text).group(1)


def li_fig1a(by_key: dict) -> dict:
    key = "li2020/fig1a"
    return {"mnist_balanced": _grab(r"median relative difference (\d+%)",
                                    _result(by_key, key, "mnist balanced: our required rounds")),
            "mnist_unbalanced": _grab(r"median relative difference (\d+%)",
                                      _result(by_key, key, "mnist unbalanced: our required rounds")),
            "inside_00": _grab(r"paper inside at (\d+/\d+) E",
                               _result(by_key, key, "synthetic(0,0): the paper's required rounds")),
            "ratio_00": _grab(r"paper/our median ≈ ([\d.]+×)",
                              _result(by_key, key, "synthetic(0,0): the paper's required rounds")),
            "spread_00": _grab(r"our draws span (×[\d.]+)",
                               _result(by_key, key, "synthetic(0,0): the paper's required rounds")),
            "ratio_11": _grab(r"paper/our median ≈ ([\d.]+×)",
                              _result(by_key, key, "synthetic(1,1): the paper's required rounds"))}


def optimal_e(by_key: dict) -> dict:
    """E* and the measured near-optimal range on each synthetic set (``E_00``, ``near_00``, ...), as its claim
    states."""
    facts = {}
    for name, short in (("synthetic(0,0)", "00"), ("synthetic(1,1)", "11")):
        result = _result(by_key, "notes/optimal_e", name)
        facts[f"E_{short}"] = _grab(r"E\* = (\d+) steps", result)
        facts[f"near_{short}"] = "–".join(re.search(r"E ∈ \[(\d+), (\d+)\]", result).groups())
    return facts


def stragglers(by_key: dict) -> dict:
    """The 90 %-straggler accuracy gains the claim measured: the average, per dataset, and μ = 0's share."""
    result = _result(by_key, "fedprox2020/stragglers", "FedProx improves absolute test accuracy")
    gains, partial = result.split("already gets:")
    per = [float(v) for v in re.findall(r": (-?[\d.]+) \[", gains.split("per dataset:")[1])]
    alone = [float(v) for v in re.findall(r": (-?[\d.]+) \[", partial)]
    return {"average": _grab(r"\+([\d.]+) points", gains), "per": " / ".join(f"{v:.1f}" for v in per),
            "alone": " / ".join(f"{v:.1f}" for v in alone), "no_femnist": f"{sum(per[:-1]) / len(per[:-1]):.1f}"}


def fedprox_table1(by_key: dict) -> dict:
    """The synthetic sets' sample total, its largest device's share and the authors' implied totals."""
    result = _result(by_key, "fedprox2020/table1", "synthetic: devices / samples")
    return {"samples": _grab(r"ours: \d+ / ([\d,]+) /", result), "share": _grab(r"(\d+ %)\)", result),
            "theirs": _grab(r"at ≈ ([\d,]+-[\d,]+) samples", result)}


def table2(by_key: dict) -> dict:
    """How closely Table 2's rate runs equal the formula: the smallest and largest error the claims state."""
    values = [float(v) for c in by_key["charles2021/table1_2"]["claims"] if c["claim"].startswith("Table 2")
              for v in re.findall(r"(?:measured|radius) ([\d.]+e[-+]\d+)", c["result"])]
    return {"agreement": f"{_e_power(min(values))} … {_e_power(max(values))}"}


def nonconvex(by_key: dict) -> dict:
    """The logged T from which eq. (14) fails, over the four runs."""
    starts = [int(v) for c in by_key["notes/nonconvex"]["claims"]
              for v in re.findall(r"violated from T = (\d+) on", c["result"])]
    return {"fails_from": f"{min(starts)}–{max(starts)}"}


def stem_measured(by_key: dict) -> dict:
    """STEM Figure 1 measured: each pair's mean samples / rounds to the target on the test seeds, the losses of
    the pairs that miss it, the smallest κ̄ that diverged for the I = 2 splits, and the figure's cost. Read from
    the figure's CSV (its record's ``data_file``: ``replication.records_in``)."""
    import pandas as pd  # here, not at the top: the report's other rows and `figures --list` need no pandas

    record = by_key["khanduri2021/fig1_measured"]
    data = pd.read_csv(record["data_file"])
    test, tuning = data[data.role == "test"], data[data.role == "tuning"]
    pair = {(b, i): part for (b, i), part in test.groupby(["b", "I"])}

    def cost(b, i):  # the mean over the test seeds that reached the target; the others named
        part = pair[(b, i)]
        hit = part[part.outcome == "reached"]
        text = f"{hit.samples.mean():,.0f} / {hit.rounds.mean():g}"
        if len(hit) == len(part):
            return text
        seeds = lambda runs: ("seed " if len(runs) == 1 else "seeds ") + ", ".join(str(s) for s in runs.seed)  # noqa: E731
        missed = "; ".join(f"{outcome} on {seeds(runs)}" for outcome, runs in part[part.outcome != "reached"]
                           .groupby("outcome"))
        return f"{text} on {seeds(hit)}, {missed}" if len(hit) else missed

    def diverged_from(b, i):
        return f"{tuning[(tuning.b == b) & (tuning.I == i) & (tuning.outcome == 'diverged')].stem_lr.min():g}"

    missed = pair[(128, 10)].last_train_loss
    facts = {f"c_{b}_{i}": cost(b, i) for b, i in pair if (b, i) not in ((40, 2), (128, 10))}
    return facts | {"loss_40_2": f"{pair[(40, 2)].last_train_loss.mean():.2f}",
                    "loss_128_10": f"{missed.min():.2f}-{missed.max():.2f}",
                    "div_40_2": diverged_from(40, 2), "div_10_2": diverged_from(10, 2),
                    "runs": f"{record['runs']}", "minutes": f"{record['runs_compute_s'] / 60:.0f}"}


def stem_fig5(by_key: dict) -> dict:
    """STEM Figure 5 at the paper profile: how many STEM candidates the tuning seed ran and how many diverged,
    the pair its finals ran, where those diverged, FedAvg's and SCAFFOLD's tuned losses, and the figure's runs.
    Read from the figure's CSV (its record's ``data_file``)."""
    import math

    import pandas as pd  # here, not at the top (see stem_measured)

    record = by_key["khanduri2021/fig5"]
    data = pd.read_csv(record["data_file"])
    tuning, curves = data[data.kind == "tuning"], data[data.kind == "curve"]
    stem = tuning[tuning.algorithm == "STEM"]
    finals = curves[curves.algorithm == "STEM"]
    nan_at = finals[finals.train_loss.isna()].groupby(["local_updates", "seed"]).samples.min()
    others = tuning[tuning.algorithm != "STEM"].groupby(["algorithm", "local_updates"]).final_train_loss.min()
    nan_runs = curves[curves.algorithm != "STEM"].groupby(["algorithm", "local_updates", "seed"]).train_loss.apply(
        lambda losses: losses.isna().any())
    diverged = [f"{name}'s at I = {i}, seed {seed:.0f}" for (name, i, seed), nan in nan_runs.items() if nan]
    root = Path(record["data_file"]).parents[1]  # the figures folder the records were read from
    return {**_replayed(root), **_cpu_scale(root),
            "stem_pairs": f"{len(stem) // stem.local_updates.nunique()}",
            "stem_diverged": f"{int((~stem.final_train_loss.map(math.isfinite)).sum())} of {len(stem)}",
            "stem_first": ", ".join(sorted(finals.chosen.unique())),
            "nan_from": f"{nan_at.min():,.0f}" if len(nan_at) else "?",
            "nan_to": f"{nan_at.max():,.0f}" if len(nan_at) else "?",
            "others": f"{others.min():.3f}-{others.max():.3f}", "runs": f"{record['runs']}",
            "others_diverged": (f"of their {len(nan_runs)} finals, {len(diverged)} diverged: {', '.join(diverged)}"
                                if diverged else f"none of their {len(nan_runs)} finals diverged")}


def _replayed(root: Path) -> dict:
    """STEM Figure 5's GPU runs replayed on a CPU (``experiments/khanduri2021/replay.py``), one clause per run:
    where the two agree, and where each first records NaN."""
    import json

    path = root / "khanduri2021" / "fig5.cpu_replay.json"  # written by experiments/khanduri2021/replay.py
    if not path.is_file():
        return {"replayed": "?"}
    replayed = json.loads(path.read_text())
    runs, agree = replayed["runs"], replayed["agree"]
    parts = []
    for r in runs:
        here, gpu = r["here"]["first_nan"], r["gpu"]["first_nan"]
        ends = (f"NaN at round {here} here, {gpu} on the GPU" if here is not None
                else f"finite here through round {r['rounds_replayed']} (last {r['rows'][-1]['here']:.3g}), "
                     f"NaN from round {gpu} on the GPU")
        parts.append(f"I = {r['local_steps']}, seed {r['seed']}: within {agree:.0%} up to round "
                     f"{r['agree_until']}, then {ends}")
    pair = f"κ̄ = {runs[0]['client_lr']:g}, c = {runs[0]['momentum_c']:g}"
    nan_rounds = [(r["here"]["first_nan"], r["gpu"]["first_nan"]) for r in runs]
    if any(here is None for here, _ in nan_rounds):
        lead = "not every one diverges there"
    else:
        when = ("at the same round" if all(h == g for h, g in nan_rounds)
                else "later" if all(h > g for h, g in nan_rounds)
                else "earlier" if all(h < g for h, g in nan_rounds) else "at other rounds")
        lead = f"they diverge there too, {when}"
    return {"replayed": f"{len(runs)} of STEM's finals replayed on a CPU (figures/khanduri2021/fig5.cpu_replay.json): "
                        f"{lead} ({pair}; " + "; ".join(parts) + ")"}


def _cpu_scale(root: Path) -> dict:
    """The CPU-scale Figure 5's horizon and STEM's chosen pair(s), from its CSV."""
    import pandas as pd

    path = root / "cpu_scale" / "khanduri2021" / "fig5.csv"
    if not path.is_file():
        return {"cpu_samples": "?", "cpu_stem": "?"}
    curves = pd.read_csv(path).query("kind == 'curve'")
    chosen = sorted(curves[curves.algorithm == "STEM"].chosen.unique())
    pairs = [dict(kv.split("=") for kv in c.replace(" ", "").split(",")) for c in chosen]
    return {"cpu_samples": f"{curves.samples.max():,.0f}",
            "cpu_stem": " / ".join(f"κ̄ = {p['lr']}, c = {p['c']}" for p in pairs)}


def _e_power(x: float) -> str:
    mantissa, exponent = f"{x:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def convex(by_key: dict) -> dict:
    """The notes' convex bounds against the runs: bound/measured over every bound claim, the measured slopes at the
    paper's λ (where the bound is flat), and the slopes of the rate instance (λ raised until κ = 5)."""
    claims = by_key["notes/convex"]["claims"]
    ratios = [float(v) for c in claims if "the bound holds" in c["claim"]
              for pair in re.findall(r"bound/measured ([\d.e+]+)–([\d.e+]+)", c["result"]) for v in pair]
    flat = [c["result"] for c in claims if "out of reach" in c["claim"]]
    slopes = [float(v) for r in flat
              for v in re.findall(r"(-?[\d.]+)(?= \[| \(one seed\))", r.split("measured slopes", 1)[1])]
    gammas = [float(_grab(r"γ = 8κ = ([\d.e+]+)", r)) for r in flat]
    horizons = sorted({int(_grab(r"against T = (\d+)", r)) for r in flat}, reverse=True)
    rate = [float(_grab(r"95% t-interval\): (-?[\d.]+)", c["result"])) for c in claims
            if "decays like 1/T" in c["claim"]]

    def span(values, form):
        return f"{form(min(values))}-{form(max(values))}" if values else "none recorded"

    def slope_span(values):
        return f"{max(values):.2f} to {min(values):.2f}".replace("-", "−") if values else "none recorded"

    return {"ratios": span(ratios, _e_power), "gammas": span(gammas, _e_power),
            "horizons": " / ".join(f"{t:,}" for t in horizons) or "none recorded",
            "slopes": slope_span(slopes), "rate_slopes": slope_span(rate)}
