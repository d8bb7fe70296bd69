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
from replicate.core.fileio import atomic_write_text, check_writable
from replicate.core.errors import ReplicateError

PAPERS = ("li2020", "fedprox2020", "charles2021", "khanduri2021", "notes")
PROFILES = ("smoke", "paper")


KINDS = ("replication", "consistency")
SMOKE_VERDICT = "smoke scale: not a replication verdict"


@dataclass(frozen=True)
class Claim:
    """One statement checked on our numbers.

    A *replication* claim tests the paper's statement on our measurements with a stated margin
    (``margin``) and can fail; where the paper prints a number it is given in ``paper_value``.
    A *consistency* check is true by construction of what we compute (an identity, a property of
    a reconstructed formula): useful as a guard, never counted as a replication.
    """

    claim: str  # the paper's words (paraphrased)
    passed: bool
    result: str  # what we measured, in one line
    kind: str = "replication"  # or "consistency"
    paper_value: str = ""  # the paper's printed number(s), shown beside ours
    margin: str = ""  # the magnitude or margin the test demands
    deviations: tuple[str, ...] = field(default_factory=tuple)

    def verdict(self, profile: str) -> str:
        """PASS/FAIL for replication claims, holds/VIOLATED for consistency checks; at smoke scale
        neither: the numbers are shown, the verdict is not a replication verdict."""
        if profile == "smoke":
            return f"{SMOKE_VERDICT} ({'would pass' if self.passed else 'would fail'})"
        if self.kind == "consistency":
            return "holds" if self.passed else "VIOLATED"
        return "PASS" if self.passed else "FAIL"


def check(claim: str, passed, result: str, deviations=(), *, kind: str = "replication",
          paper_value: str = "", margin: str = "") -> Claim:
    """A replication claim (or ``kind="consistency"``); see :class:`Claim`."""
    if kind not in KINDS:
        raise ReplicateError(f"claim kind must be one of {KINDS}, got {kind!r}")
    return Claim(claim=claim, passed=bool(passed), result=result, kind=kind, paper_value=paper_value,
                 margin=margin, deviations=tuple(deviations))


def consistency(claim: str, passed, result: str, deviations=()) -> Claim:
    """A check true by construction (not counted as a replication claim)."""
    return check(claim, passed, result, deviations, kind="consistency")


class ClaimsTable:
    """The claims of one figure as a table: HTML in Jupyter, text elsewhere (shown once)."""

    def __init__(self, title: str, frame: pd.DataFrame):
        self.title, self.frame = title, frame

    def _repr_html_(self) -> str:
        return f"<p><b>{self.title}</b></p>" + self.frame.to_html(index=False, escape=True)

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", 200, "display.width", 200):
            return f"{self.title}\n{self.frame.to_string(index=False)}"


def output_dir(out_dir: str | os.PathLike | None) -> Path:
    """Where a notebook's files go: ``out_dir``, or ``build/figures`` when it is ``None``.

    Checked before anything is computed (a notebook's config passes it here in its first cell, and
    ``publish`` again): never inside the committed ``figures/`` (only the batch runner's unmodified
    paper-profile run promotes files there), and writable — each a one-line error.
    """
    folder = Path(out_dir) if out_dir else paths.build_dir() / "figures"
    if paths.within(folder, paths.figures_dir()):
        raise committed_figures_refused(folder)
    check_writable(folder)
    return folder


def committed_figures_refused(folder) -> ReplicateError:
    return ReplicateError(
        f"out_dir {folder} is inside the committed figures/: only `python -m replicate figures --profile paper` "
        "without --set writes there (and the reduced-scale commands of replicate/report/coverage.py, into "
        "figures/cpu_scale); choose another folder, or leave out_dir unset for build/figures")


def publish(fig, data: pd.DataFrame, claims: list[Claim], *, paper: str, figure: str,
            profile: str, out_dir=None, deviations=(), notes: str = "", provenance: dict | None = None) -> ClaimsTable:
    """Save a figure, the tidy data behind it and its claim results; return the claims table
    (displayed once by Jupyter as the cell's value).

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
        "claims": [asdict(c) | {"deviations": list(c.deviations), "verdict": c.verdict(profile)} for c in claims],
        "deviations": list(deviations),
        "notes": notes,
    }
    record.update(provenance or {})
    atomic_write_text(stem.parent / f"{figure}.claims.json", json.dumps(record, indent=2) + "\n")
    frame = pd.DataFrame([{"kind": c.kind, "claim": c.claim, "paper": c.paper_value, "ours": c.result,
                           "margin": c.margin, "verdict": c.verdict(profile)} for c in claims])
    counted = [c for c in claims if c.kind == "replication"]
    title = (f"{paper}/{figure} [{profile} profile]: {sum(c.passed for c in counted)} of {len(counted)} "
             f"replication claims {'would ' if profile == 'smoke' else ''}hold; "
             f"{len(claims) - len(counted)} consistency check(s)")
    if profile == "smoke":
        title += f" — {SMOKE_VERDICT}"
    return ClaimsTable(title, frame)
