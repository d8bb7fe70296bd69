"""Paper claims checked on computed data, and the files a figure notebook publishes.

A notebook ends with ``publish(...)``: it writes ``<paper>/<figure>.{png,pdf,csv}``
plus ``<figure>.claims.json`` into the output directory and prints the claim table.
Interactive and nbval runs write under ``build/figures``; only the batch runner
(``python -m replicate figures``) promotes a successful paper-profile run into the
committed ``figures/`` folder.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from replicate.core import paths
from replicate.report import plotting
from replicate.core.fileio import atomic_write_text
from replicate.core.errors import ReplicateError

PAPERS = ("li2020", "fedprox2020", "charles2021", "khanduri2021", "notes")
PROFILES = ("smoke", "paper")


@dataclass(frozen=True)
class Claim:
    """One statement of the paper, evaluated on our numbers."""

    claim: str  # the paper's words (paraphrased)
    passed: bool
    result: str  # what we measured, in one line
    deviations: tuple[str, ...] = field(default_factory=tuple)


def check(claim: str, passed, result: str, deviations=()) -> Claim:
    return Claim(claim=claim, passed=bool(passed), result=result, deviations=tuple(deviations))


def output_dir(out_dir: str | os.PathLike | None) -> Path:
    return Path(out_dir) if out_dir else paths.build_dir() / "figures"


def publish(fig, data: pd.DataFrame, claims: list[Claim], *, paper: str, figure: str,
            profile: str, out_dir=None, deviations=(), notes: str = "", provenance: dict | None = None) -> pd.DataFrame:
    """Save a figure, the tidy data behind it and its claim results; return the claim table.

    ``provenance`` (e.g. ``RunLog.provenance()``: runs, how many from the cache, their compute
    time) is saved in the claims record so the report can say what the figure costs from scratch.
    """
    if paper not in PAPERS:
        raise ReplicateError(f"unknown paper key {paper!r}; expected one of {', '.join(PAPERS)}")
    if profile not in PROFILES:
        raise ReplicateError(f"profile must be one of {PROFILES}, got {profile!r}")
    stem = output_dir(out_dir) / paper / figure
    if fig is not None:
        plotting.save(fig, stem)
    atomic_write_text(stem.with_suffix(".csv"), data.to_csv(index=False, float_format="%.6g"))
    record = {
        "paper": paper,
        "figure": figure,
        "profile": profile,
        "claims": [asdict(c) | {"deviations": list(c.deviations)} for c in claims],
        "deviations": list(deviations),
        "notes": notes,
    }
    record.update(provenance or {})
    atomic_write_text(stem.parent / f"{figure}.claims.json", json.dumps(record, indent=2) + "\n")
    table = pd.DataFrame([{"claim": c.claim, "result": c.result,
                           "status": "PASS" if c.passed else "FAIL"} for c in claims])
    with pd.option_context("display.max_colwidth", 200, "display.width", 200):
        print(f"{paper}/{figure} [{profile} profile]")
        print(table.to_string(index=False))
    return table
