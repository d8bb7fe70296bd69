"""Paper claims checked on computed data, and the files a figure notebook publishes.

A notebook ends with ``publish(...)``: it writes ``<paper>/<figure>.{png,pdf,csv}``
plus ``<figure>.claims.json`` into the output directory and prints the claim table.
Interactive and nbval runs write under ``build/figures``; only the batch runner
(``python -m replicate figures``) promotes a successful paper-profile run into the
committed ``figures/`` folder.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from replicate.core import paths
from replicate.core.paths import MODIFIED_FOLDER, REDUCED_FOLDER, committed_figures_refused
from replicate.core import settings
from replicate.report import plotting
from replicate.core.fileio import atomic_write_text, check_writable
from replicate.core.errors import ReplicateError

PAPERS = ("li2020", "fedprox2020", "charles2021", "khanduri2021", "notes", "arena")  # arena: not a paper
PROFILES = ("smoke", "paper")


KINDS = ("replication", "consistency", "context")
SMOKE_VERDICT = "smoke scale: not a replication verdict"
# What a claim's verdict rests on. Only a measurement can make a replication claim (see KIND_RULE).
BASES = {
    "measured": "our measurement (a training run, a dataset's statistics) of what the paper states, with inputs "
                "not fitted to the compared numbers and a margin the measurement can miss",
    "closed-form": "a property of a closed-form or reconstructed formula, evaluated (also on random inputs) "
                   "without running an algorithm",
    "identity": "an identity of our implementation (two forms of one algorithm agree to rounding)",
    "fitted": "inputs chosen to fit the very numbers compared (e.g. a generator seed picked as the best fit)",
    "vacuous": "a bound whose slack on our data is so large (≥ 1e3 at every point) that only a bug could break it",
    "wide-range": "the paper's number inside the range of our draws, where those draws span a factor of ten or more: "
                  "a plausible wrong result lands inside it too",
    "powerless": "a margin that no outcome on the measured grid can miss (every grid point the measurement can "
                 "land on lies within it): the grid cannot contradict the claim",
    "external": "a number or statement from outside the five documents (the final FedProx paper, the authors' "
                "README): shown beside the figure, never counted",
    "partial-data": "the paper's number for data we hold only in part or in another version (a partial local copy): "
                    "it cannot match, so it is shown, never counted (the item is data-limited)",
    "cross-check": "a statement of the five documents tested under the arena's protocol (its budgets, tuning and "
                   "data, not the paper's): shown beside the arena, never counted",
}
# the bases of claims shown beside a figure and never counted
CONTEXT_BASES = ("external", "partial-data", "cross-check")
KIND_RULE = ("A claim is a replication claim exactly when its verdict rests on a measurement: our numbers from "
             "running an algorithm or building a dataset, compared with what the paper states, with inputs not "
             "fitted to the compared numbers and a margin the measurement can miss. Every other claim (a property "
             "of a closed-form or reconstructed formula, an identity of our implementation, a comparison with "
             "numbers our inputs were fitted to, a bound with slack ≥ 1e3 everywhere, the paper's number inside a "
             "range of draws spanning a factor of ten or more, a margin no point of the measured grid can miss) is a "
             "consistency check. "
             "A comparison whose source lies outside the five documents, or with data we hold only in part, or a "
             "paper's statement tested under the arena's protocol instead of the paper's, is "
             "context: shown beside its figure, counted nowhere. "
             "Each claim records this basis: claim construction refuses a kind that contradicts it, and a test applies "
             "the rule to every committed claim that records one.")
VACUOUS_SLACK = 1e3  # a bound this many times above the measured value everywhere cannot fail short of a bug
WIDE_RANGE = 10.0  # draws spanning this factor put a plausible wrong number inside their range (basis wide-range)


def counted_nowhere(key: str) -> bool:
    """Whether figure ``key`` (its path under figures/, without suffix) is a labelled record of ``report.reduced``."""
    return key.startswith((REDUCED_FOLDER + "/", MODIFIED_FOLDER + "/"))


def kind_for(basis: str) -> str:
    """The kind a claim of this basis must have (``KIND_RULE``)."""
    if basis not in BASES:
        raise ReplicateError(f"claim basis must be one of {tuple(BASES)}, got {basis!r}")
    return "replication" if basis == "measured" else "context" if basis in CONTEXT_BASES else "consistency"


def seeds_text(values, spec: str, missing: str = "never") -> str:
    """One value per seed for a claim's result, ``missing`` standing for a non-finite one (a target never
    reached, a run diverged): "0.125" for one seed, "[0.125, 0.130]" for two."""
    values = np.atleast_1d(np.asarray(values, dtype=float))
    text = [(missing if not np.isfinite(v) else format(v, spec)) for v in values]
    return text[0] if len(text) == 1 else "[" + ", ".join(text) + "]"


@dataclass(frozen=True)
class Claim:
    """One statement checked on our numbers.

    A *replication* claim tests the paper's statement on our measurements with a stated margin
    (``margin``) and can fail; where the paper prints a number it is given in ``paper_value``.
    A *consistency* check rests on something else (an identity, a property of a reconstructed
    formula, inputs fitted to the compared numbers, a vacuous bound): useful as a guard, never
    counted as a replication. ``basis`` says which (``BASES``) and fixes the kind (``KIND_RULE``);
    ``source`` quotes the seed sentence the claim tests, with its section.
    """

    claim: str  # the paper's words (paraphrased)
    passed: bool
    result: str  # what we measured, in one line
    kind: str = "replication"  # or "consistency"
    paper_value: str = ""  # the paper's printed number(s), shown beside ours
    margin: str = ""  # the magnitude or margin the test demands
    deviations: tuple[str, ...] = field(default_factory=tuple)
    basis: str = "measured"  # what the verdict rests on (BASES); fixes the kind (KIND_RULE)
    source: str = ""  # the seed sentence the claim tests, quoted, with its section
    data: tuple[str, ...] = field(default_factory=tuple)  # the loaders its verdict reads, where a figure says

    def verdict(self, profile: str) -> str:
        """PASS/FAIL for replication claims, holds/VIOLATED for consistency checks; at smoke scale
        neither: the numbers are shown, the verdict is not a replication verdict."""
        if profile == "smoke":
            return f"{SMOKE_VERDICT} ({'would pass' if self.passed else 'would fail'})"
        if self.kind == "consistency":
            return "holds" if self.passed else "VIOLATED"
        if self.kind == "context":
            return "agrees (not counted)" if self.passed else "differs (not counted)"
        return "PASS" if self.passed else "FAIL"


def check(claim: str, passed, result: str, deviations=(), *, kind: str | None = None, basis: str = "measured",
          paper_value: str = "", margin: str = "", source: str = "", data=()) -> Claim:
    """A claim whose kind follows from its ``basis`` (``KIND_RULE``); see :class:`Claim`. A ``kind`` given
    explicitly must agree with the basis."""
    expected = kind_for(basis)
    if kind is not None and kind not in KINDS:
        raise ReplicateError(f"claim kind must be one of {KINDS}, got {kind!r}")
    if kind is not None and kind != expected:
        raise ReplicateError(f"a claim on a {basis!r} basis is a {expected} claim, not {kind!r} ({claim!r})")
    return Claim(claim=claim, passed=bool(passed), result=result, kind=expected, paper_value=paper_value,
                 margin=margin, deviations=tuple(deviations), basis=basis, source=source, data=tuple(data))


def consistency(claim: str, passed, result: str, deviations=(), *, basis: str = "closed-form",
                source: str = "", paper_value: str = "", margin: str = "") -> Claim:
    """A check that is not a replication claim (never counted): by default a property of a closed-form
    formula; ``basis`` says otherwise (an identity, fitted inputs, a vacuous bound)."""
    if basis == "measured":
        raise ReplicateError(f"a measured claim is a replication claim, not a consistency check ({claim!r})")
    return check(claim, passed, result, deviations, basis=basis, source=source, paper_value=paper_value,
                 margin=margin)


def bound_claim(claim: str, ratios, result: str, *, margin: str, source: str = "") -> Claim:
    """A "the bound holds" claim from bound/measured ``ratios``: a replication claim where the bound comes
    within ``VACUOUS_SLACK`` of the measurement somewhere, else a consistency check (basis ``vacuous``)."""
    ratios = np.asarray(ratios, dtype=float)
    holds = bool((ratios >= 1).all())
    if holds and ratios.min() >= VACUOUS_SLACK:
        return consistency(claim, holds, result + f" (slack ≥ {VACUOUS_SLACK:g} everywhere: vacuous on this data)",
                           basis="vacuous", source=source, margin=margin)
    return check(claim, holds, result, margin=margin, source=source)


def scale_of(profile: str, out_dir, changed=None) -> str:
    """The scale a figure was run at: ``smoke``; ``reduced`` for the labelled below-paper-scale runs
    (published under ``figures/cpu_scale``: the paper profile with ``--set`` overrides); ``modified`` for the
    labelled runs under ``figures/modified`` and any other paper-profile run with knobs ``changed`` from the
    paper's (a notebook's parameters edited, or ``--set`` into build/); else ``paper``."""
    if profile == "smoke":
        return "smoke"
    folders = Path(out_dir).parts if out_dir is not None else ()
    if REDUCED_FOLDER in folders:
        return "reduced"
    return "modified" if changed or MODIFIED_FOLDER in folders else "paper"


def _run_as(profile: str, config, out_dir) -> tuple[dict, str, list[str]]:
    """(the knobs a paper-profile run changed, its scale, the offline stand-ins its runs read: knob data_source =
    "stand-in", replicate.data.variants), what a figure's label and its record both say."""
    changed = config.changed() if config is not None and profile == "paper" else {}
    stand_ins = list(config.stand_in_loaders()) if hasattr(config, "stand_in_loaders") else []
    return changed, scale_of(profile, out_dir, changed), stand_ins


def label(fig, profile: str, config=None, out_dir=None) -> None:
    """Say on ``fig`` the scale it was drawn at and the stand-in data its runs read, as ``publish`` saves it. A
    notebook's plot cell calls it, so that the figure shown inline says it too: a smoke (or modified) figure must
    not pass for the paper's. Labelling twice changes nothing."""
    changed, scale, stand_ins = _run_as(profile, config, out_dir)
    if scale == "reduced":
        label_reduced(fig)
    elif scale == "smoke":  # beside a committed paper-scale figure, it must not pass for one
        label_reduced(fig, SMOKE_LABEL, own_line=True)
    elif scale == "modified":
        label_reduced(fig, MODIFIED_LABEL + (f" ({', '.join(changed)})" if changed else ""), own_line=True)
    if stand_ins:
        label_reduced(fig, f"{STAND_IN_LABEL}: {', '.join(stand_ins)}", own_line=True)


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
    folder = Path(out_dir) if out_dir else settings.current().build / "figures"
    if paths.within(folder, paths.figures_dir()):
        raise committed_figures_refused(folder)
    check_writable(folder)
    return folder


def publish(fig, data: pd.DataFrame, claims: list[Claim], *, paper: str, figure: str,
            profile: str, out_dir=None, deviations=(), notes: str = "", provenance: dict | None = None,
            config=None, tables: dict[str, pd.DataFrame] | None = None) -> ClaimsTable:
    """Save a figure, the tidy data behind it and its claim results; return the claims table
    (displayed once by Jupyter as the cell's value).

    ``provenance`` (e.g. ``RunLog.provenance()``: runs, how many from the cache, their compute
    time) is saved in the claims record so the report can say what the figure costs from scratch.
    ``tables`` (name → frame) are further tidy data beside it, each saved as ``<figure>.<name>.csv`` and
    compared by ``figures --check`` as the main CSV is (e.g. the arena's curves and trials).
    ``config`` (the notebook's figure config) says which knobs a paper-profile run changed
    (``changed()``): such a run is labelled ``modified`` (or ``reduced`` under figures/cpu_scale) in its
    title, figure and record, which lists the changed knobs, so edited parameters never pass as the paper's.
    """
    if paper not in PAPERS:
        raise ReplicateError(f"unknown paper key {paper!r}; expected one of {', '.join(PAPERS)}")
    if profile not in PROFILES:
        raise ReplicateError(f"profile must be one of {PROFILES}, got {profile!r}")
    stem = output_dir(out_dir) / paper / figure
    changed, scale, stand_ins = _run_as(profile, config, out_dir)
    if fig is not None:
        label(fig, profile, config, out_dir)  # the notebook's plot cell has labelled it already: not twice
        plotting.save(fig, stem)
    atomic_write_text(stem.with_suffix(".csv"), data.to_csv(index=False, float_format="%.6g"))
    for name, table in (tables or {}).items():
        if not name.isidentifier():
            raise ReplicateError(f"a table's name makes its file name <figure>.<name>.csv: {name!r} is not one")
        atomic_write_text(stem.parent / f"{figure}.{name}.csv", table.to_csv(index=False, float_format="%.6g"))
    record = {
        "paper": paper,
        "figure": figure,
        "profile": profile,
        "scale": scale,
        "claims": [asdict(c) | {"deviations": list(c.deviations), "data": list(c.data), "verdict": c.verdict(profile)}
                   for c in claims],
        "deviations": list(deviations),
        "notes": notes,
    }
    if stand_ins:  # the coverage rule reads it: such a row is data-limited (report.coverage)
        record["data"] = {"choice": "stand-in", "loaders": stand_ins}
    if changed:
        record["changed_knobs"] = {name: list(v) if isinstance(v, tuple) else v for name, v in changed.items()}
    record.update(provenance or {})
    atomic_write_text(stem.parent / f"{figure}.claims.json", json.dumps(record, indent=2) + "\n")
    frame = pd.DataFrame([{"kind": c.kind, "claim": c.claim, "paper": c.paper_value, "ours": c.result,
                           "margin": c.margin, "verdict": c.verdict(profile)} for c in claims])
    counted = [c for c in claims if c.kind == "replication"]
    scale_text = (f"{scale} scale" + (f": {', '.join(f'{k} = {v}' for k, v in changed.items())}" if changed else "")
                  + (f"; offline stand-in data: {', '.join(stand_ins)}" if stand_ins else ""))
    title = (f"{paper}/{figure} [{profile} profile, {scale_text}]: {sum(c.passed for c in counted)} of {len(counted)} "
             f"replication claims {'would ' if profile == 'smoke' else ''}hold; "
             f"{sum(c.kind == 'consistency' for c in claims)} consistency check(s)"
             + (f"; {sum(c.kind == 'context' for c in claims)} shown, not counted" if any(c.kind == "context"
                                                                                        for c in claims) else ""))
    if profile == "smoke":
        title += f" — {SMOKE_VERDICT}"
    return ClaimsTable(title, frame)


REDUCED_LABEL = "CPU SCALE (reduced; not the paper's scale)"
MODIFIED_LABEL = "MODIFIED: not the paper's settings"
SMOKE_LABEL = "SMOKE SCALE: a first look, not the paper's scale"
STAND_IN_LABEL = "OFFLINE STAND-IN DATA (not the paper's)"


def label_reduced(fig, label: str = REDUCED_LABEL, *, own_line: bool = False) -> None:
    """Say in a figure's title that it was run below the paper's scale (or with other knobs changed:
    ``label``): before a one-line title, or on a line of its own above a wrapped one or where ``own_line``
    (the figure grown at the top by that line, so nothing moves under it)."""
    title = fig.get_suptitle()
    if label in title:
        return
    if not title and any(ax.get_title() for ax in fig.axes):  # a table's title sits on its axes, where a figure
        fig.suptitle(label)                                    # title would cover it: the label gets a line above
        _grow_top(fig, 1.5 * fig._suptitle.get_fontsize() / 72)
        return
    if "\n" not in title and not (own_line and title):
        size = fig._suptitle.get_fontsize() if title else None  # keep the figure's own title size
        fig.suptitle(f"{label}: {title}" if title else label, **({"fontsize": size} if size else {}))
        return
    text = fig._suptitle
    _grow_top(fig, 1.3 * text.get_fontsize() / 72)  # one line of the title's font, in inches
    text.set_text(f"{label}\n{title}")


def _grow_top(fig, inches: float) -> None:
    """Add ``inches`` at the top of ``fig``, keeping every axes, text and legend where it was from the bottom
    (and the title where it was from the top)."""
    width, height = fig.get_size_inches()
    k = height / (height + inches)
    for ax in fig.axes:
        box = ax.get_position()
        ax.set_position([box.x0, box.y0 * k, box.width, box.height * k])
    for text in fig.texts:
        if text is fig._suptitle:  # kept from the top, below
            continue
        x, y = text.get_position()
        text.set_position((x, y * k))
    if fig._suptitle is not None:
        x, y = fig._suptitle.get_position()
        fig._suptitle.set_position((x, 1 - (1 - y) * k))
    fig.set_size_inches(width, height + inches)


def quoting(sources, *, prefix: bool = False):
    """A decorator for a figure's claims function: each claim records the seed sentence it tests, the
    sentence of the first ``(words, sentence)`` of ``sources`` (pairs, or a dict) whose words open the
    claim (``prefix``) or occur in it; a claim no entry matches keeps its own ``source``."""
    pairs = tuple(sources.items()) if isinstance(sources, dict) else tuple(sources)

    def matches(words: str, claim: str) -> bool:
        return claim.startswith(words) if prefix else words in claim

    def decorate(claims_function):
        @functools.wraps(claims_function)
        def wrapper(*args, **kwargs):
            return [dataclasses.replace(c, source=next((s for words, s in pairs if matches(words, c.claim)), c.source))
                    for c in claims_function(*args, **kwargs)]
        return wrapper
    return decorate
