"""``python -m replicate figures --check [NAMES]``: regenerate figures at paper scale into
``build/check`` and compare them with the committed ones, so that a user on another machine can
tell "reproduced within tolerance" from "broken".

Why bytes differ across machines: the training figures run float32 SGD. BLAS and PyTorch split
reductions differently on different CPUs (vector width, thread count), so sums round differently
in the last bit; hundreds of rounds of SGD carry such differences into the third or fourth digit
of a loss. Same seed on the same machine gives identical bytes (tested); across machines we
promise agreement within the tolerance below and **the same verdict for every claim**.

Tolerance: a value agrees when ``|ours − committed| ≤ ATOL + RTOL·|committed|`` (numpy's
``isclose``). RTOL = 1e-2 by default; rounds-to-target counts (Li et al. Fig 1a) may move by a
round where a loss crosses its target a hair earlier or later, hence 5e-2 there. Li et al. Fig 4's Original
at η0 ≥ 0.5 trains unstably: a one-ulp change of its initial model moves its loss by 0.26 % after one round
(measured), and two CPUs (an AMD EPYC and an Intel Xeon with AVX-512) gave curves up to 13 % apart
with the same verdicts; there the promise is the verdicts, with values within 15 %.

Each claims record counts the processors its runs computed on (``machines``: ``core.machine.describe``, from
the runs' sidecars), and the report prints both sides' when they differ, so a user reads a difference
between processors as rounding, and one on the same processor as a change of code or data.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ATOL = 1e-8
RTOL = 1e-2
RTOL_BY_FIGURE = {"li2020/fig1a": 5e-2, "li2020/fig4": 0.15}
# Columns that record how long something took on the machine that ran it, not a result: never compared.
TIMINGS = frozenset({"constants_s"})


@dataclass(frozen=True)
class FigureCheck:
    key: str
    values: int  # numeric values compared
    max_abs: float
    max_rel: float
    outside: int  # values outside the tolerance
    rtol: float
    verdicts_differ: tuple[str, ...]  # claims whose verdict changed
    problem: str = ""  # structural mismatch (missing file, different shape or columns)
    machines: tuple[str, str] = ("", "")  # the processors the committed and the regenerated runs computed on

    @property
    def other_machine(self) -> bool:
        return self.machines[0] != self.machines[1]

    @property
    def ok(self) -> bool:
        return not self.problem and self.outside == 0 and not self.verdicts_differ


def compare(key: str, committed: Path, fresh: Path, scale: str = "paper") -> FigureCheck:
    """Compare ``<paper>/<figure>.csv``, the tables published beside it (``<figure>.<name>.csv``,
    ``report.claims.publish``) and its claims between two output folders; the regenerated figure must have
    been run at ``scale`` (``reduced`` for the reduced-scale commands)."""
    paper, figure = key.split("/")
    rtol = RTOL_BY_FIGURE.get(key, RTOL)
    tables = sorted({p.name for root in (committed, fresh) for p in (root / paper).glob(f"{figure}.*.csv")})
    pairs = [[root / paper / name for root in (committed, fresh)] for name in [f"{figure}.csv", *tables]]
    missing = [str(f) for files in pairs for f in files if not f.exists()]
    if missing:
        return FigureCheck(key, 0, np.nan, np.nan, 0, rtol, (), f"missing {', '.join(missing)}")
    records = [_record(root / paper / f"{figure}.claims.json") for root in (committed, fresh)]
    machines = tuple(_machines(r) for r in records)
    ran = records[1].get("scale", "paper")
    if ran != scale:  # e.g. a notebook whose parameters cell sets a knob away from the paper profile
        return FigureCheck(key, 0, np.nan, np.nan, 0, rtol, (), f"regenerated at {ran} scale, not {scale}", machines)
    values, max_abs, max_rel, outside = 0, 0.0, 0.0, 0
    for files in pairs:
        a, b = (pd.read_csv(f) for f in files)
        where = "" if files[0].name == f"{figure}.csv" else f" ({files[0].name})"
        found = _frames(a, b, rtol)
        if isinstance(found, str):
            return FigureCheck(key, 0, np.nan, np.nan, 0, rtol, (), found + where, machines)
        values, max_abs, max_rel, outside = (values + found[0], max(max_abs, found[1]), max(max_rel, found[2]),
                                             outside + found[3])
    return FigureCheck(key, values, max_abs, max_rel, outside, rtol, _verdicts(*records), "", machines)


def _frames(a: pd.DataFrame, b: pd.DataFrame, rtol: float) -> str | tuple[int, float, float, int]:
    """(numeric values compared, max abs diff, max rel diff, values outside the tolerance), or what differs
    in shape, columns or labels."""
    if list(a.columns) != list(b.columns) or a.shape != b.shape:
        return f"shape or columns differ: {a.shape} {list(a.columns)} vs {b.shape} {list(b.columns)}"
    numeric = [c for c in a.columns if pd.api.types.is_numeric_dtype(a[c]) and pd.api.types.is_numeric_dtype(b[c])
               and c not in TIMINGS]
    text = [c for c in a.columns if c not in numeric and c not in TIMINGS]
    differ = [c for c in text if not a[c].astype(str).equals(b[c].astype(str))]
    if differ:
        return f"labels differ in {', '.join(differ)}"
    x, y = a[numeric].to_numpy(float), b[numeric].to_numpy(float)
    both_nan = np.isnan(x) & np.isnan(y)
    same = both_nan | (x == y)  # equal infinities too (a target never reached): inf − inf is no difference
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(x - y))
    scale = np.maximum(np.abs(x), np.abs(y))  # relative to the larger; round-off around 0 counts as 0
    with np.errstate(invalid="ignore"):  # reached vs never reached: inf / inf is an infinite difference
        rel = np.where(same | (scale < 1e-12), 0.0,
                       np.where(np.isinf(diff), np.inf, diff / np.where(scale > 0, scale, 1.0)))
    close = both_nan | np.isclose(y, x, rtol=rtol, atol=ATOL)
    return (int(x.size), float(np.nanmax(diff, initial=0.0)), float(np.nanmax(rel, initial=0.0)),
            int((~close).sum()))


def _record(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _machines(record: dict) -> str:
    """The processors a record's runs computed on, with their run counts ("not recorded" for a record
    published before records named them, or for runs whose sidecars do not)."""
    counts = record.get("machines")
    if not counts:
        return "not recorded"
    return "; ".join(f"{name} ({runs} run{'s' * (runs != 1)})" for name, runs in counts.items())


def _verdicts(committed: dict, fresh: dict) -> tuple[str, ...]:
    old, new = ({c["claim"]: c["passed"] for c in record.get("claims", [])} for record in (committed, fresh))
    return tuple(claim for claim in dict.fromkeys([*old, *new]) if old.get(claim) != new.get(claim))


COLUMNS = ("figure", "values", "max abs diff", "max rel diff", "outside tol", "rtol", "verdicts", "result")
NUMERIC = ("values", "max abs diff", "max rel diff", "outside tol")  # right-aligned


def report(results: list[FigureCheck]) -> str:
    """One line per figure, columns aligned (numbers to the right), and a line per changed verdict."""
    rows: list[tuple[FigureCheck, tuple[str, ...]]] = []
    for r in results:
        cells = (r.key,) if r.problem else (
            r.key, f"{r.values:d}", f"{r.max_abs:.2e}", f"{r.max_rel:.2e}", f"{r.outside:d}", f"{r.rtol:g}",
            "same" if not r.verdicts_differ else "CHANGED", "reproduced within tolerance" if r.ok else "FAIL")
        rows.append((r, cells))
    widths = [max([len(name)] + [len(cells[i]) for _, cells in rows if i < len(cells)])
              for i, name in enumerate(COLUMNS)]

    def line(cells) -> str:
        return "  ".join(c.rjust(w) if name in NUMERIC else c.ljust(w)
                         for name, c, w in zip(COLUMNS, cells, widths)).rstrip()

    lines = [line(COLUMNS)]
    for r, cells in rows:
        if r.problem:
            lines.append(f"{r.key.ljust(widths[0])}  {r.problem}  FAIL")
        else:
            lines.append(line(cells))
            lines += [f"    verdict changed: {claim}" for claim in r.verdicts_differ]
        if r.other_machine:  # rounding differs between processors: the tolerance, not bitwise, is the promise
            lines += [f"    committed runs computed on: {r.machines[0]}",
                      f"    regenerated runs computed on: {r.machines[1]}"]
    return "\n".join(lines)
