"""REPLICATION.md: every figure's claims at paper scale, generated from ``figures/``."""
from __future__ import annotations

import json
from pathlib import Path

from replicate.core import paths
from replicate.core.fileio import atomic_write_text
from replicate.report import coverage, gpu_work, history, reduced, status
from replicate.core.paths import REDUCED_FOLDER
from replicate.report.claims import BASES, KIND_RULE, counted_nowhere
from replicate.report.coverage import held
from replicate.report.gpu_work import cell as _cell

BELOW_SCALE = "its claims, at a scale below the paper's, are in the reduced-scale section (counted nowhere)"
MODIFIED = "its claims, at the paper's scale with a setting changed, are in the reduced-scale section (counted nowhere)"
THUMBNAIL_WIDTH = 160  # pixels: a summary row's figure, readable as a picture, small enough for one screen

PAPER_TITLES = {
    "li2020": "Li et al. 2020 — On the Convergence of FedAvg on Non-IID Data",
    "fedprox2020": "Li, Sahu et al. 2020 — FedProx (draft)",
    "charles2021": "Charles & Konečný 2021 — Convergence and Accuracy Trade-Offs in FL and Meta-Learning",
    "khanduri2021": "Khanduri et al. 2021 — STEM",
    "notes": "Lecture notes re-deriving Li et al.'s bounds",
}

DATA_NOTES = [
    "Every dataset has an official source and checksum in `replicate/data/catalog.py` (see data/README.md); "
    "`make figures` runs `python -m replicate data fetch --all`, which downloads them on a machine with "
    "internet. No dataset host is reachable from the build machine that produced these figures, so it "
    "staged the offline copies in `../shared/data` through the same checksum-verified path and reported "
    "the rest as not available. Every figure reads the official data unless its `data_source` knob (default: "
    "`REPLICATE_STAND_INS`) chooses this machine's offline stand-ins; the figures below that read one were "
    "computed with that switch, say so, and their rows are data-limited or reduced scale. On that machine:",
    "MNIST: **full** (the shared `.gz` files were recompressed; the uncompressed IDX content is verified).",
    "FEMNIST (LEAF JSON): **partial**: 20 of 35 train files, 105 writers with both splits of ~3,500. "
    "TFF's federated EMNIST-62 (`emnist_tff`, what Charles & Konečný use): **not available**; the FEMNIST "
    "figures run on the partial LEAF copy, its offline stand-in, and say so.",
    "Shakespeare (Gutenberg etext #100) and TFF Shakespeare (715 roles): **full**.",
    "Sent140: **partial**: LEAF's test split only; the raw Sentiment140 CSVs (`sent140_raw`) and GloVe "
    "(`glove`) are **not available**, so a frozen random table stands in for GloVe (a labelled deviation).",
    "CIFAR-10: **lossy** JPEG copy only (`cifar10_jpg`, decoded once, labelled lossy); the official "
    "python batches (`cifar10`) and CIFAR-100 (`cifar100`) are **not available**.",
]


def _time_summary(records: list[dict]) -> str:
    """One line: the paper profile's summed notebook wall time and its runs' compute from scratch."""
    wall = sum(r.get("wall_time_s", 0.0) for r in records)
    compute = _unique_compute(records)
    text = f"Paper profile: {len(records)} notebooks, {wall / 60:.1f} min of notebook wall time as last run"
    if compute:
        text += (f"; their training runs take {compute / 60:.1f} min of single-process compute from scratch "
                 "(figure sweeps spread them over two worker processes)")
    return text + "."


def _unique_compute(records: list[dict]) -> float:
    """Compute seconds of a paper's runs, each run once (Fig 4 re-reads Fig 3's runs, for example);
    records published before runs were keyed count their total."""
    keyed = {key: s for r in records for key, s in (r.get("run_seconds") or {}).items()}
    return sum(keyed.values()) + sum(r.get("runs_compute_s", 0.0) for r in records if not r.get("run_seconds"))


def counts(claims: list[dict]) -> str:
    """How many of ``claims`` hold, by kind, in one phrase."""
    ours, mine = held(claims, "replication")
    checks, checked = held(claims, "consistency")
    context = held(claims, "context")[1]
    if not mine and checked:  # an analytic item: nothing measured, nothing to count
        return f"no replication claims (nothing measured); {checks} of {checked} consistency checks hold"
    text = f"{ours} of {mine} replication claims hold" if mine else "no replication claims"  # e.g. all read a stand-in
    if checked:
        text += f"; {checks} of {checked} consistency checks hold"
    if context:
        text += f"; {context} shown, not counted"
    return text


def _coverage(records: list[dict], work: list[dict] | None = None, estimate: dict | None = None) -> list[str]:
    work = work or []
    by_key = {f"{r['paper']}/{r['figure']}": r for r in records}
    lines = ["## Coverage of every figure and table", "",
             "Statuses (the one rule below assigns them from how an item was run, on what data, and its "
             "replication claims):", ""]
    lines += [f"- **{name}**: {meaning}." for name, meaning in coverage.STATUSES.items()]
    lines += ["", coverage.RULE + " Data that is another draw of the paper's own (unseeded) generator counts as "
              "the paper's data for the rule; the notes say where the draw matters.", "",
              "| document | item | what | status | notes | claims |", "|---|---|---|---|---|---|"]
    seen = []

    def row(item) -> str:
        claims = item.claims(by_key)
        links = ", ".join(f"[{k.split('/')[1]}](figures/{k}.png)" for k in item.figures if k in by_key)
        # the GPU-scale work of an item is its row below the paper's scale (a row is one scale)
        mine = [r for r in work if (r["paper"], r["item"]) == (item.paper, item.item) and item.run != "paper"]
        detail = item.text(by_key) + (("; " if item.detail else "") + gpu_work.work_of(mine) if mine else "")
        return (f"| {item.paper} | {item.name} | {_cell(item.what)} | {item.status(by_key)} | {_cell(detail)} | "
                f"{(counts(claims) + ' — ' + links) if claims else '—'} |")

    beyond = [item for item in coverage.ITEMS if item.origin != "document"]
    for item in coverage.ITEMS:
        if item.origin == "document":
            seen.append(item.status(by_key))
            lines.append(row(item))
    tally = {s: seen.count(s) for s in coverage.STATUSES}
    lines += ["", "Items: " + ", ".join(f"{n} {s}" for s, n in tally.items()) + ".", ""]
    if beyond:  # an item of ours, or of another paper, is never a row of the papers' coverage
        lines += ["Beyond the five documents, not counted among the items above: checks of ours that are no figure "
                  "or table of theirs (their measured claims test statements of the documents and are counted with "
                  "the rest), and the final FedProx paper's straggler figure, which the project runs but the draft "
                  "does not have (its statements come from the final paper: shown beside the figure, never counted).",
                  "", "| document | item | what | status | notes | claims |",
                  "|---|---|---|---|---|---|"] + [row(item) for item in beyond] + [""]
    return lines + (gpu_work.work_table(work) if work else []) + (gpu_work.estimate_table(estimate) if estimate else [])


def verdict_of(c: dict) -> str:
    """A claim's verdict as its record states it (records published before verdicts were recorded: PASS/FAIL)."""
    return c.get("verdict") or ("PASS" if c["passed"] else "FAIL")


def anchor(key: str) -> str:
    """The id of a figure's details in REPLICATION.md (``paper/figure`` or ``cpu_scale/paper/figure``)."""
    return key.replace("/", "-")


def _target(key: str) -> str:
    """The invisible link target of a figure's details."""
    return f'<a id="{anchor(key)}"></a>'


def headline(claims: list[dict]) -> dict | None:
    """The claim a summary shows for a figure: its first failing replication claim, else its first replication
    claim, else its first failing consistency check, else its first check, else its first claim (a failure is
    never hidden behind a pass)."""
    order = [(kind, failing) for kind in ("replication", "consistency") for failing in (True, False)]
    found = (next((c for c in claims if c.get("kind", "replication") == kind and not (failing and c["passed"])), None)
             for kind, failing in order)
    return next((c for c in found if c), claims[0] if claims else None)


def statuses(key: str, by_key: dict) -> list[tuple[str, str]]:
    """(item, status) of each coverage row a paper-scale figure backs; a run below the paper's scale is reduced
    scale whatever its claims say (``coverage.status``)."""
    if counted_nowhere(key):
        return [("", "reduced scale" if key.startswith(REDUCED_FOLDER + "/") else "modified settings")]
    return [(item.name, item.status(by_key)) for item in coverage.ITEMS if key in item.figures]


def _brief(text: str, limit: int = 160) -> str:
    """``text`` cut after its last whole clause (``; ``, else ``, ``) within ``limit`` characters, marked " …"."""
    if len(text) <= limit:
        return text
    cut = max(text.rfind("; ", 0, limit), 0) or max(text.rfind(", ", 0, limit), 0)
    return text[:cut] + " …" if cut else text


def _summary_row(key: str, record: dict, what: str, by_key: dict) -> str:
    rows = statuses(key, by_key)
    status = "**<br>**".join(f"{name}: {s}" if len(rows) > 1 else s for name, s in rows)
    claim, said, ours, tally = headline(record["claims"]), "—", "—", counts(record["claims"])
    if counted_nowhere(key):  # its claims stay in their labelled section, below every count
        below = key.startswith(REDUCED_FOLDER + "/")
        said, tally = (BELOW_SCALE if below else MODIFIED), ("at this scale: " if below else "so modified: ") + tally
    elif claim:
        said = claim["claim"] + (f" (paper: {claim['paper_value']})" if claim.get("paper_value") else "")
        verdict = verdict_of(claim)
        ours = _brief(claim["result"]) + " — " + (verdict if claim["passed"] else f"**{verdict}**")
    return (f'| <img src="figures/{key}.png" width="{THUMBNAIL_WIDTH}" alt="{key}"><br>'
            f"[{record['figure']}](#{anchor(key)}): {_cell(what)} | **{_cell(status)}**<br>{tally} | "
            f"{_cell(said)} | {_cell(ours)} |")


def summary_rows(records: list[dict], root: Path) -> dict[str, list[tuple[str, dict, str]]]:
    """Per document, its committed figures as (key, record, what it shows): the paper-scale ones in the order of
    ``records``, then its runs below the paper's scale (``reduced.REDUCED``)."""
    by_key = {f"{r['paper']}/{r['figure']}": r for r in records}
    rows = {}
    for paper in PAPER_TITLES:
        mine = [(key, r, "; ".join(f"{i.name}: {i.what}" for i in coverage.ITEMS if key in i.figures))
                for key, r in by_key.items() if r["paper"] == paper]
        mine += [(item.key, json.loads((root / f"{item.key}.claims.json").read_text()), item.what)
                 for item in reduced.REDUCED
                 if item.key.split("/")[-2] == paper and (root / f"{item.key}.claims.json").is_file()]
        if mine:
            rows[paper] = mine
    return rows


def _summary(records: list[dict], root: Path) -> list[str]:
    """Per document, each committed figure at a glance: its thumbnail, status, one claim beside the paper's
    statement, and a link to its details below."""
    by_key = {f"{r['paper']}/{r['figure']}": r for r in records}
    lines = ["## Summary: each figure at a glance", "",
             "Per document, every committed figure: its status (the coverage rule below), its claims, and one "
             "claim, the paper's statement beside our number (the figure's first failing replication claim, else "
             "its first replication claim, else its first check). The figure's name links to its details below; "
             "runs below the paper's scale are labelled reduced scale and counted nowhere.", ""]
    for paper, mine in summary_rows(records, root).items():
        lines += [f"### {PAPER_TITLES[paper]} (summary)", "",
                  "| figure | status and claims | the paper (as tested) | ours |", "|---|---|---|---|"]
        lines += [_summary_row(key, r, what, by_key) for key, r, what in mine] + [""]
    return lines


def _claim_text(c: dict) -> str:
    """The claim, with the seed sentence it tests where one is recorded."""
    return c["claim"] + (f" — the paper: {c['source']}" if c.get("source") else "")


def records_in(root: Path) -> list[dict]:
    """The published claims records under ``root``, each with ``data_file``: the CSV beside it, which a coverage
    row's facts may read (``coverage.Item.facts``)."""
    # the arena (figures/arena) compares algorithms under one protocol; it replicates no paper, so it is not here
    return [json.loads(p.read_text()) | {"data_file": str(p.with_name(p.name[:-len(".claims.json")] + ".csv"))}
            for p in sorted(root.glob("*/*.claims.json")) if p.parent.name != "arena"]


def render(root: Path | None = None) -> str:
    root = root or paths.figures_dir()
    records = records_in(root)
    all_claims = [c for r in records for c in r["claims"]]
    lines = ["# REPLICATION report", "",
             "Generated by `python -m replicate report` from `figures/*/*.claims.json` "
             "(written by the paper-profile notebook runs). Do not edit by hand.", ""]
    lines += _summary(records, root)
    lines += ["A **replication claim** tests a statement of the paper on our numbers, with the margin it states, "
             "and can fail; where the paper prints a number it stands beside ours. A **consistency check** rests on "
             "something other than a measurement (an identity, a property of a reconstructed formula, fitted "
             "inputs, a vacuous bound): a guard against bugs, never counted as a replication. It can still be "
             "VIOLATED, e.g. where a reconstructed formula lacks a property the paper describes.", "",
             "**The rule for the kind of a claim.** " + KIND_RULE + " The bases:", ""]
    lines += [f"- *{name}*: {meaning}." for name, meaning in BASES.items()]
    lines += ["",
             f"**{counts(all_claims)}** across {len(records)} figures.", ""] + history.lines()
    stale = [(key, why) for key, why in coverage.STALE.items() if (root / f"{key}.claims.json").is_file()]
    if stale:
        lines += ["Stale figures (their claims or labels changed after they were published; they are counted as "
                  "published until republished):", ""] + [f"- **{key}**: {why}." for key, why in stale] + [""]
    unrecorded = [f"{r['paper']}/{r['figure']}" for r in records if not any("basis" in c for c in r["claims"])]
    if unrecorded:
        lines += ["Published before claims recorded their basis and seed quote (their kinds, set by hand, agree "
                  "with the rule on re-reading; republishing records both): " + ", ".join(unrecorded) + ".", ""]
    work_file = root / "gpu_work.json"  # experiments.work.FILE (the report reads it; it does not import experiments)
    work = json.loads(work_file.read_text()) if work_file.is_file() else {}
    lines += _coverage(records, work.get("rows"), work.get("estimate"))
    lines += ["## Data", ""] + [f"- {note}" for note in DATA_NOTES] + [""]
    anchored = set()
    for paper in PAPER_TITLES:
        mine = [r for r in records if r["paper"] == paper]
        if not mine:
            continue
        lines += [f"## {PAPER_TITLES[paper]}", "", counts([c for r in mine for c in r["claims"]]) + ". "
                  + _time_summary(mine), ""]
        for kind, heading in (("replication", "Replication claims"), ("consistency", "Consistency checks"),
                              ("context", "Shown beside, not counted (a source outside the five documents, or "
                                          "data we hold only in part)")):
            rows = [(r, c) for r in mine for c in r["claims"] if c.get("kind", "replication") == kind]
            if not rows:
                continue
            lines += [f"### {heading}", "", "| figure | claim | paper | ours | margin | verdict |",
                      "|---|---|---|---|---|---|"]
            for r, c in rows:
                link = f"[{r['figure']}](figures/{paper}/{r['figure']}.png)"
                key = f"{paper}/{r['figure']}"
                if key not in anchored:  # the summary's link lands on the figure's first claim
                    anchored.add(key)
                    link = _target(key) + link
                verdict = verdict_of(c)
                if not c["passed"]:
                    verdict = f"**{verdict}**"
                lines.append(f"| {link} | {_cell(_claim_text(c))} | {_cell(c.get('paper_value', ''))} | "
                             f"{_cell(c['result'])} | {_cell(c.get('margin', ''))} | {verdict} |")
            lines.append("")
        lines += ["Wall time per figure:", ""] + [f"- **{r['figure']}**: {_wall(r)}" for r in mine] + [""]
        deviations = [(r["figure"], d) for r in mine
                      for d in dict.fromkeys(list(r.get("deviations", [])) +
                                             [d for c in r["claims"] for d in c.get("deviations", [])])]
        if deviations:
            lines += ["Deviations:", ""] + [f"- **{fig}**: {_cell(d)}" for fig, d in deviations] + [""]
        notes = [(r["figure"], r["notes"]) for r in mine if r.get("notes")]
        lines += [f"- **{fig}** note: {_cell(n)}" for fig, n in notes] + ([""] if notes else [])
    lines += _arena(root) + _reduced(root)
    return "\n".join(lines).rstrip() + "\n"


def _arena(root: Path) -> list[str]:
    """The arena (``figures/arena``): no document runs it, so it is in no count; its cross-checks, statements of
    the documents tested under its protocol, are shown here beside it."""
    path = root / "arena" / "leaderboard.claims.json"
    if not path.is_file():
        return []
    record = json.loads(path.read_text())
    lines = ["## The arena (not a replication; its cross-checks counted nowhere)", "",
             '<img src="figures/arena/leaderboard.png" width="100%" alt="arena/leaderboard">', "",
             "Every algorithm at one budget and one tuning protocol ([docs/arena.md](docs/arena.md)). Where it "
             "overlaps a statement of the five documents, that statement is tested under the arena's budgets, "
             "tuning and data, not the paper's: context, shown here and in no count above.", "",
             "| claim | ours | margin | verdict |", "|---|---|---|---|"]
    lines += [f"| {_cell(_claim_text(c))} | {_cell(c['result'])} | {_cell(c.get('margin', ''))} | "
              + (verdict_of(c) if c["passed"] else f"**{verdict_of(c)}**") + " |" for c in record["claims"]]
    return lines + ["", f"Wall time: {_wall(record)}", ""]


def _reduced(root: Path) -> list[str]:
    """The labelled runs (``reduced.REDUCED``) whose outputs are committed: below the paper's scale, and at it with a
    setting changed (``Reduced.modified``)."""
    present = [(item, json.loads((root / f"{item.key}.claims.json").read_text())) for item in reduced.REDUCED
               if (root / f"{item.key}.claims.json").is_file()]
    if not present:
        return []
    lines = ["## Reduced-scale runs (labelled; not counted above)", "",
             "Where the paper's scale does not fit the 2-core CPU these records were computed on (what GPU runs have "
             "computed: the GPU-scale "
             "work left table above), the largest "
             "scale that does, with what is reduced. Their claims are shown for what they say at that scale "
             "and are not part of any count in this report.", ""] + (
             ["Those under figures/modified ran at the paper's scale with a setting changed (a PROPOSED alternative "
              "beside the default, named in each): labelled modified, and likewise counted nowhere.", ""]
             if any(item.modified for item, _ in present) else [])
    for item, record in present:
        lines += [f"### {item.what}", "",
                  f"{_target(item.key)}Scale: {item.scale}. [figure](figures/{item.key}.png); produced by "
                  f"`{item.command}` ({_wall(record)}).", "", _knobs(item, record), ""] + (
                  [item.text(root), ""] if item.note else []) + (
                  [f"**Stale:** {item.stale}", ""] if item.stale else []) + (
                  ["**Stale:** published before figures recorded their scale: its title lacks the CPU-scale label "
                   "and its claims record says only `profile: paper`; the command above republishes it.", ""]
                  if record.get("scale") != ("modified" if item.modified else "reduced") else []) + [
                  "| claim | paper | ours | margin | verdict at this scale |",
                  "|---|---|---|---|---|"]
        for c in record["claims"]:
            verdict = "PASS" if c["passed"] else "FAIL"
            lines.append(f"| {_cell(_claim_text(c))} | {_cell(c.get('paper_value', ''))} | {_cell(c['result'])} | "
                         f"{_cell(c.get('margin', ''))} | {verdict} |")
        lines.append("")
    return lines


def _knobs(item, record: dict) -> str:
    """The knobs a reduced run changes, as its record names them; a record published before
    records named them is marked so, with the names its command sets."""
    if "changed_knobs" in record:
        return "Knobs changed from the paper profile: " + ", ".join(
            f"`{name}` = {json.dumps(value)}" for name, value in record["changed_knobs"].items()) + "."
    return ("Knobs changed from the paper profile: " + ", ".join(f"`{name}`" for name in item.knobs) + " (read from "
            "its command: the record predates records that name their changed knobs; the command republishes it).")


def _wall(r: dict) -> str:
    """A record's notebook wall time, with its runs' compute from scratch where it has runs."""
    wall = f"{r['wall_time_s']:.0f} s" if "wall_time_s" in r else "—"
    if r.get("runs"):
        wall += (f" ({r['runs_from_cache']}/{r['runs']} runs from cache; "
                 f"runs take {r['runs_compute_s']:.0f} s from scratch"
                 + (f", {r['runs_untimed']} untimed" if r.get("runs_untimed") else "") + _split(r) + _where(r) + ")")
    return wall


def _where(r: dict) -> str:
    """The processors its runs computed on (``machines``, counted by the record; none before records named
    them): timings and last digits belong to them."""
    machines = r.get("machines") or {}
    if not machines:
        return ""
    named = [name if len(machines) == 1 else f"{name}: {runs}" for name, runs in machines.items()]
    return "; computed on " + ", ".join(named)


def _split(r: dict) -> str:
    """Where a figure's compute goes, by dataset (only when it has more than one)."""
    parts = r.get("runs_compute_by_dataset_s") or {}
    if len(parts) < 2:
        return ""
    total = sum(parts.values()) or 1.0
    ranked = sorted(parts.items(), key=lambda kv: -kv[1])
    return ": " + ", ".join(f"{name} {seconds / 60:.1f} min ({seconds / total:.0%})" for name, seconds in ranked)


def write(path: Path | None = None) -> Path:
    """REPLICATION.md, and the README's status table (``report.status``) when it is the checkout's own."""
    path = path or paths.REPO / "REPLICATION.md"
    atomic_write_text(path, render())
    if path == paths.REPO / "REPLICATION.md":
        status.update(paths.REPO / "README.md", records_in(paths.figures_dir()))
    return path
