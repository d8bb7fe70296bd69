"""The rules REPLICATION.md states: the kind of a claim follows from its basis, the status of an
item from its run, data and replication claims, and figures below the paper's scale say so."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from replicate.core import paths
from replicate.core.errors import ReplicateError
from replicate.report import coverage, facts, replication
from replicate.report.claims import (BASES, REDUCED_LABEL, SMOKE_LABEL, bound_claim, check, consistency,
                                     counted_nowhere, kind_for, publish, scale_of)


def test_the_kind_of_a_claim_follows_from_its_basis():
    assert kind_for("measured") == "replication"
    context_bases = ("external", "partial-data", "cross-check")
    assert {kind_for(b) for b in BASES if b not in ("measured", *context_bases)} == {"consistency"}
    assert {kind_for(b) for b in context_bases} == {"context"}  # shown beside a figure (or the arena), never counted
    context = check("a", False, "1", basis="external")
    assert context.kind == "context" and context.verdict("paper") == "differs (not counted)"
    assert check("a", True, "1").kind == "replication"
    assert check("a", True, "1", basis="fitted").kind == "consistency"
    assert consistency("a", True, "1").basis == "closed-form"
    with pytest.raises(ReplicateError, match="is a consistency claim"):
        check("closed-form property counted", True, "1", kind="replication", basis="closed-form")
    with pytest.raises(ReplicateError, match="is a replication claim"):
        consistency("a measurement hidden as a check", True, "1", basis="measured")
    with pytest.raises(ReplicateError, match="basis must be one of"):
        check("a", True, "1", basis="guess")


def test_every_committed_claim_obeys_the_kind_rule():
    """Every committed claim that records its basis has the rule's kind (figures published before the basis
    was recorded gain it when republished; check() refuses a kind against the basis)."""
    found = 0
    for path in sorted(paths.figures_dir().glob("**/*.claims.json")):
        for c in json.loads(path.read_text())["claims"]:
            if "basis" in c:
                found += 1
                assert c["kind"] == kind_for(c["basis"]), (path, c["claim"])
    assert found > 0


def test_a_bound_with_huge_slack_is_a_consistency_check():
    vacuous = bound_claim("bound holds", [2e7, 1e12], "r", margin="m")
    assert (vacuous.kind, vacuous.basis, vacuous.passed) == ("consistency", "vacuous", True)
    tight = bound_claim("bound holds", [1.5, 40.0], "r", margin="m")
    assert (tight.kind, tight.passed) == ("replication", True)
    broken = bound_claim("bound holds", [0.5, 1e6], "r", margin="m")
    assert (broken.kind, broken.passed) == ("replication", False)


@pytest.mark.parametrize("run, data, passed, total, expected", [
    ("paper", "full", 5, 5, "reproduced"),
    ("paper", "redrawn", 5, 5, "reproduced"),
    ("paper", "full", 4, 5, "claims differ"),
    ("paper", "limited", 5, 5, "data-limited"),
    ("reduced", "full", 5, 5, "reduced scale"),
    ("reduced", "limited", 0, 3, "reduced scale"),
    ("analytic", "full", 0, 0, "analytic redraw"),
    ("paper", "full", 0, 0, "not yet"),
    ("none", "limited", 0, 0, "not yet"),
    ("impossible", "full", 0, 0, "not reproducible here"),
])
def test_status_follows_one_rule(run, data, passed, total, expected):
    assert coverage.status(run, data, passed, total) == expected
    assert expected in coverage.STATUSES


def test_item_status_reads_its_own_claims():
    records = {"x/t": {"claims": [{"claim": "Table 2, a", "passed": True, "kind": "replication"},
                                  {"claim": "b is LocalUpdate with a = e_1", "passed": True, "kind": "consistency"},
                                  {"claim": "Server momentum c", "passed": False, "kind": "replication"}]}}
    table2 = coverage.Item("x", "Table 2", "w", "paper", "full", figures=("x/t",), select=r"^(Table 2|Server)")
    table1 = coverage.Item("x", "Table 1", "w", "analytic", "full", figures=("x/t",), select=" is LocalUpdate with ")
    assert table2.status(records) == "claims differ" and len(table2.claims(records)) == 2
    assert table1.status(records) == "analytic redraw" and len(table1.claims(records)) == 1


def test_analytic_items_carry_no_replication_claims_and_statuses_are_defined():
    by_key = {f"{r['paper']}/{r['figure']}": r for r in
              (json.loads(p.read_text()) for p in paths.figures_dir().glob("*/*.claims.json"))}
    for item in coverage.ITEMS:
        assert item.status(by_key) in coverage.STATUSES
        if item.run == "analytic":
            assert all(c.get("kind") == "consistency" for c in item.claims(by_key)), item.item


def test_a_row_is_one_scale_and_a_claim_is_in_one_row():
    """Issue #40 items 3 and 4: a row below the paper's scale holds no paper-scale record's claims (FedProx
    Figures 2-4 and the stragglers were 'reduced scale' rows carrying 14 claims of paper-scale panels), and every
    committed claim belongs to at most one row (Li Fig 1b failed through Figure 3's synthetic(1,1) claim)."""
    by_key = {f"{r['paper']}/{r['figure']}": r for r in
              (json.loads(p.read_text()) for p in paths.figures_dir().glob("*/*.claims.json"))}
    for item in coverage.ITEMS:
        scales = {by_key[key].get("scale") for key in item.figures if key in by_key}
        assert scales <= ({"paper"} if item.run in ("paper", "analytic") else {"reduced", "modified"}), item.name
    rows = {}
    for item in coverage.ITEMS:
        for claim in item.claims(by_key):  # the very claim of its record (two records may word one alike)
            rows.setdefault(id(claim), (claim["claim"], []))[1].append(item.name)
    assert [(claim, names) for claim, names in rows.values() if len(names) > 1] == []
    assert len({(item.paper, item.name) for item in coverage.ITEMS}) == len(coverage.ITEMS)  # rows are told apart


def test_report_defines_statuses_and_the_kind_rule(tmp_path):
    publish(None, pd.DataFrame({"x": [0]}), [check("a holds", True, "1", source="§1: \"a holds\"")],
            paper="li2020", figure="fig2", profile="paper", out_dir=tmp_path)
    text = replication.render(tmp_path)
    assert all(f"- **{name}**: {meaning}." in text for name, meaning in coverage.STATUSES.items())
    assert coverage.RULE in text and "The rule for the kind of a claim." in text
    assert "a holds — the paper: §1: \"a holds\"" in text
    assert "replicated" not in text.split("## Data")[0].split("| document | item |")[1]


def test_the_labelled_folder_of_a_path_is_stated_once():
    figures = paths.figures_dir()
    assert paths.labelled_folder(figures / "cpu_scale") == "cpu_scale"
    assert paths.labelled_folder(figures / "modified" / "second_grid") == "modified"
    assert paths.labelled_folder(figures / "cpu_scale" / ".." / "li2020") is None  # resolved, not read as text
    assert paths.labelled_folder(figures) is None and paths.labelled_folder("build/check/cpu_scale") is None
    assert all(scale_of("paper", f"figures/{folder}") == scale for folder, scale in paths.SCALE_OF_FOLDER.items())


def test_reduced_scale_figures_say_so_in_title_and_record(tmp_path):
    import matplotlib.pyplot as plt

    assert scale_of("paper", None) == "paper" and scale_of("smoke", tmp_path / "cpu_scale") == "smoke"
    assert scale_of("paper", "figures/cpu_scale") == "reduced"
    assert scale_of("paper", "figures/modified/second_grid") == "modified"  # labelled, even with no knob named
    fig, _ = plt.subplots()
    fig.suptitle("Charles Fig. 13")
    publish(fig, pd.DataFrame({"x": [0]}), [check("a", True, "1")], paper="charles2021", figure="fig13",
            profile="paper", out_dir=tmp_path / "cpu_scale")
    record = json.loads((tmp_path / "cpu_scale" / "charles2021" / "fig13.claims.json").read_text())
    assert (record["profile"], record["scale"]) == ("paper", "reduced")
    assert fig._suptitle.get_text() == f"{REDUCED_LABEL}: Charles Fig. 13"
    plt.close(fig)
    publish(None, pd.DataFrame({"x": [0]}), [], paper="li2020", figure="fig2", profile="paper", out_dir=tmp_path)
    assert json.loads((tmp_path / "li2020" / "fig2.claims.json").read_text())["scale"] == "paper"


def test_a_paper_profile_run_with_edited_knobs_is_labelled_modified_not_paper(tmp_path):
    """A user who sets profile = "paper" and edits a knob in the notebook (or passes --set into build/) gets
    a figure, title and record that say "modified" and name the knobs; how runs are computed (workers)
    does not count; the documented reduced-scale runs stay "reduced" and record their knobs too."""
    import matplotlib.pyplot as plt

    from replicate.experiments.khanduri2021.samples import Fig5Config
    from replicate.report.claims import MODIFIED_LABEL

    assert Fig5Config.for_profile("paper").changed() == {}
    assert Fig5Config.for_profile("paper", workers=1).changed() == {}
    edited = Fig5Config.for_profile("paper", samples_per_worker=3200, seeds=[0, 1], workers=1)
    assert edited.changed() == {"samples_per_worker": 3200, "seeds": (0, 1)}
    assert scale_of("paper", tmp_path, edited.changed()) == "modified"

    def run(config, out_dir):
        fig, _ = plt.subplots()
        fig.suptitle("STEM Fig. 5")
        table = publish(fig, pd.DataFrame({"x": [0]}), [check("a", True, "1")], paper="khanduri2021",
                        figure="fig5", profile="paper", out_dir=out_dir, config=config)
        plt.close(fig)
        return (table.title, fig._suptitle.get_text(),
                json.loads((out_dir / "khanduri2021" / "fig5.claims.json").read_text()))

    title, suptitle, record = run(edited, tmp_path / "mine")
    assert record["scale"] == "modified" and record["changed_knobs"] == {"samples_per_worker": 3200, "seeds": [0, 1]}
    assert "modified scale: samples_per_worker = 3200, seeds = (0, 1)" in title
    assert suptitle == f"{MODIFIED_LABEL} (samples_per_worker, seeds)\nSTEM Fig. 5"  # a line of its own
    title, suptitle, record = run(Fig5Config.for_profile("paper", workers=1), tmp_path / "same")
    assert record["scale"] == "paper" and "changed_knobs" not in record and "paper scale]" in title
    assert suptitle == "STEM Fig. 5"
    _, suptitle, record = run(edited, tmp_path / "cpu_scale")
    assert record["scale"] == "reduced" and record["changed_knobs"]["samples_per_worker"] == 3200
    assert suptitle == f"{REDUCED_LABEL}: STEM Fig. 5"
    _, _, record = run(Fig5Config.for_profile("smoke"), tmp_path / "smoke")
    assert record["scale"] == "modified"  # smoke settings published as "paper" do not pass as the paper's
    fig, _ = plt.subplots()
    fig.suptitle("STEM Fig. 5")
    publish(fig, pd.DataFrame({"x": [0]}), [check("a", True, "1")], paper="khanduri2021", figure="fig5",
            profile="smoke", out_dir=tmp_path / "first_look")
    assert fig._suptitle.get_text() == f"{SMOKE_LABEL}\nSTEM Fig. 5"  # beside the committed figure, it says so
    plt.close(fig)


def test_a_wrapped_title_gets_the_reduced_label_on_its_own_line_above_it():
    """A title drawn on several lines at the top (FedProx's figures) gets the label as a line of its own, the
    figure one line taller at the top, so the title does not run into the axes below it (as it once did)."""
    import matplotlib.pyplot as plt

    from replicate.report.claims import label_reduced

    fig, ax = plt.subplots(figsize=(6, 4))
    fig.suptitle("a title long enough\nto wrap onto two lines", y=0.99, va="top")
    fig.tight_layout(rect=(0, 0, 1, 0.85))
    axes_top = ax.get_position().y1 * 4  # inches from the bottom
    title_gap = (1 - 0.99) * 4  # inches from the top
    label_reduced(fig)
    width, height = fig.get_size_inches()
    assert fig._suptitle.get_text().split("\n") == [REDUCED_LABEL, "a title long enough", "to wrap onto two lines"]
    assert height > 4 and ax.get_position().y1 * height == pytest.approx(axes_top)
    assert (1 - fig._suptitle.get_position()[1]) * height == pytest.approx(title_gap)
    plt.close(fig)



def test_a_table_titled_on_its_axes_gets_the_label_on_a_line_above_it():
    """A table figure carries its title on its axes, where a figure title would be drawn over it (the smoke tables
    once were unreadable so): the label is a figure title in a line added at the top, the axes kept where they
    were from the bottom, and the label's bottom above the axes' title."""
    import matplotlib.pyplot as plt

    from replicate.report.claims import SMOKE_LABEL, label_reduced

    fig, ax = plt.subplots(figsize=(6, 2))
    ax.set_title("Table 2: ours (paper)")
    ax.axis("off")
    axes_top = ax.get_position().y1 * 2
    label_reduced(fig, SMOKE_LABEL, own_line=True)
    assert fig.get_suptitle() == SMOKE_LABEL and fig.get_size_inches()[1] > 2
    assert ax.get_position().y1 * fig.get_size_inches()[1] == pytest.approx(axes_top)
    renderer = fig.canvas.get_renderer()
    assert fig._suptitle.get_window_extent(renderer).y0 >= ax.title.get_window_extent(renderer).y1
    plt.close(fig)

def test_charles_closed_form_claims_are_consistency_checks():
    """Properties of closed-form formulas (figs 1-4, 5, 7-10) and Table 1's identities are not counted."""
    from replicate.experiments.charles2021 import frontiers

    config = frontiers.Fig2Config.for_profile("smoke")
    claims = frontiers.fig2_claims(frontiers.fig2(config), config)
    assert claims and {c.kind for c in claims} == {"consistency"}
    assert any("heavy-ball below Nesterov" in c.claim for c in claims)
    assert np.all([c.basis == "closed-form" for c in claims])
    ordering = next(c for c in claims if "heavy-ball below Nesterov" in c.claim)
    assert ordering.source.startswith("§5, Impact of Server Momentum") and "strict ordering" in ordering.source


def test_li2020_table2_counts_the_fitted_partition_as_a_consistency_check():
    from replicate.experiments.li2020 import table2

    config = table2.Table2Config(datasets=("mnist_balanced", "mnist_unbalanced"))
    rows = [{"dataset": d, "statistic": s, "ours": v, "paper": p, "draws_lo": np.nan, "draws_hi": np.nan}
            for d, ours, paper in (("mnist_balanced", (100, 54200, 542, 0), (100, 54200, 542, 0)),
                                   ("mnist_unbalanced", (100, 62869, 629, 802), (100, 62864, 628, 800)))
            for s, v, p in zip(table2.STATISTICS, ours, paper)]
    balanced, unbalanced = table2.table2_claims(pd.DataFrame(rows), config)
    assert balanced.kind == "replication" and balanced.passed
    assert unbalanced.kind == "consistency" and unbalanced.basis == "fitted" and unbalanced.passed


def test_li2020_table2_a_range_of_draws_spanning_ten_fold_is_a_consistency_check():
    """The paper's number inside the 5-95% range of our draws counts only while the range spans less than
    ``claims.WIDE_RANGE``: the committed std range (×10.9) makes both synthetic claims consistency checks, and the
    same claim over a range five-fold wide is a replication claim that can fail."""
    from replicate.experiments.li2020 import table2
    from replicate.report.claims import WIDE_RANGE

    config = table2.Table2Config(datasets=("synthetic(0,0)", "synthetic(1,1)"))
    data = pd.read_csv(paths.figures_dir() / "li2020" / "table2.csv")
    data = data[data.dataset.str.startswith("synthetic")]
    spread = (data.draws_hi / data.draws_lo).max()
    assert spread >= WIDE_RANGE
    assert all(c.basis == "wide-range" and c.kind == "consistency" for c in table2.table2_claims(data, config))
    narrow = data.assign(draws_lo=data.draws_hi / 5)
    claims = table2.table2_claims(narrow, config)
    assert all(c.basis == "measured" and c.kind == "replication" for c in claims)
    assert not claims[1].passed  # synthetic(1,1)'s std, 421, lies below a five-fold range ending at 3,910


def test_a_margin_every_inner_grid_point_meets_is_a_consistency_check():
    """Eq. (8)'s E* against Figure 1a's measured optimum: on synthetic(0,0) every E inside the grid (100-1,250
    steps) lies within a decade of E* = 638, so the decade margin cannot fail once the minimum is inside the grid
    (basis powerless); on synthetic(1,1) (E* = 1,632 against 100-300) it can, and the claim counts. An E* ten times
    larger would give synthetic(0,0)'s claim the power to fail."""
    from replicate.experiments.notes import optimal_e

    config = optimal_e.OptimalEConfig.for_profile("paper")
    data = pd.read_csv(paths.figures_dir() / "notes" / "optimal_e.csv")
    first, second = optimal_e.optimal_e_claims(data, config)
    assert (first.basis, first.kind) == ("powerless", "consistency") and "within 0.80 decades" in first.result
    assert (second.basis, second.kind) == ("measured", "replication")
    far = data.copy()
    far.loc[(far.kind == "summary") & (far.dataset == "synthetic(0,0)"), "E_star"] *= 10
    moved, _ = optimal_e.optimal_e_claims(far, config)
    assert moved.basis == "measured" and not moved.passed


def test_a_source_outside_the_five_documents_decides_before_a_fitted_seed():
    """FedProx Table 1: a row compared with the authors' final README is context even where its generator seed
    was fitted to those numbers; a fitted row of the draft stays a consistency check."""
    from replicate.experiments.fedprox2020 import table1

    assert table1.basis_of("femnist", "final") == "external"
    assert table1.basis_of("emnist_star", "draft") == "fitted" and table1.basis_of("mnist", "draft") == "fitted"
    assert table1.basis_of("shakespeare", "draft") == "measured"


OUTSIDE = ("final paper", "readme", "recalled")  # sources outside the five documents (issue #40 item 2)


def test_a_counted_claim_quotes_one_of_the_five_documents():
    """Issue #40 item 2: a replication claim names its source, and that source is one of the five documents:
    a claim quoting the final FedProx paper or the authors' README is external (shown, never counted), and one
    without a source is not counted at all. Records announced as stale wait for their republishing."""
    counted = 0
    for path in sorted(paths.figures_dir().glob("**/*.claims.json")):
        key = str(path.relative_to(paths.figures_dir())).removesuffix(".claims.json")
        if key in coverage.STALE:
            continue
        for c in json.loads(path.read_text())["claims"]:
            if c.get("kind", "replication") != "replication":
                continue
            counted += 1
            source = c.get("source", "")
            assert source and not any(word in source.lower() for word in OUTSIDE), (key, c["claim"], source)
    assert counted > 40
    stragglers = json.loads((paths.figures_dir() / "fedprox2020" / "stragglers.claims.json").read_text())["claims"]
    external = [c for c in stragglers if c["basis"] == "external"]
    assert len(external) == 5 and all(c["kind"] == "context" and c["source"] for c in external)


def test_the_papers_coverage_table_holds_only_items_of_the_five_documents():
    """Issue #40 items 1-2: the final FedProx paper's straggler figure is no item of the draft (seed 004), so like
    the checks of ours it is listed beside the papers' coverage table, not as a row of it, and the items' counts
    are the documents' own. Its two rows (one per scale) and the two checks of ours are in the table below it."""
    text = replication.render()
    papers = text.split("## Coverage of every figure and table", 1)[1].split("\nItems: ", 1)
    rows = [line.split(" | ")[1] for line in papers[0].splitlines() if re.match(r"\| \w+ \| ", line)][1:]  # header off
    assert rows and not [r for r in rows if r.startswith(("final paper", "(ours)"))]
    counted = papers[1].split(".", 1)[0]
    assert sum(int(n) for n in re.findall(r"(\d+) [a-z]", counted)) == len(rows)
    beyond = papers[1].split("Beyond the five documents", 1)[1].split("\n\n", 2)[1]
    items = [line.split(" | ")[1] for line in beyond.splitlines() if re.match(r"\| \w+ \| ", line)][1:]
    assert sorted(items)[2:] == ["final paper, Figure 1 (Sent140, Shakespeare columns)",
                                 "final paper, Figure 1 (Synthetic (1,1), MNIST, FEMNIST columns)"]
    assert items.count("(ours)") == 2
    with pytest.raises(ValueError, match="origin"):
        coverage.Item("x", "Figure 9", "w", "paper", "full", origin="elsewhere")


def test_stale_figures_are_listed_with_their_command(tmp_path, monkeypatch):
    from replicate.report import coverage, replication

    monkeypatch.setattr(coverage, "STALE", {  # the mechanism, on two made-up entries
        "fedprox2020/fig3": "the claims changed. Republish: `python -m replicate figures fedprox2020/fig3 --profile paper`",
        "fedprox2020/fig4": "the labels changed. Republish: `python -m replicate figures fedprox2020/fig4 --profile paper`"})
    publish(None, pd.DataFrame({"x": [0]}), [check("a", True, "1")], paper="fedprox2020", figure="fig3",
            profile="paper", out_dir=tmp_path)
    text = replication.render(tmp_path)
    assert "- **fedprox2020/fig3**:" in text and "python -m replicate figures fedprox2020/fig3" in text
    assert "fedprox2020/fig4**" not in text  # listed only where the figure is committed


def test_every_li2020_claim_quotes_a_seed_sentence():
    """Every committed Li et al. claim text finds its seed sentence in li2020.common.SOURCES (so a republished
    figure shows it beside the claim)."""
    from replicate.experiments.li2020.common import SOURCES

    claims = [c["claim"] for p in paths.figures_dir().glob("li2020/*.claims.json")
              for c in json.loads(p.read_text())["claims"]]
    assert claims and all(any(words in claim for words, _ in SOURCES) for claim in claims), claims
    assert all(source.startswith(("§", "App.", "Figure")) for _, source in SOURCES)


def test_the_headline_moves_only_with_a_stated_reason():
    """The newest entry of report/history.py ends at today's headline, recounted from the committed records:
    a change of the count of replication claims must say why (issue #40)."""
    import json

    from replicate.core import paths
    from replicate.report import history

    claims = [c for p in sorted(paths.figures_dir().glob("*/*.claims.json"))
              for c in json.loads(p.read_text())["claims"] if c.get("kind", "replication") == "replication"]
    date, before, after, changes = history.HISTORY[0]
    assert after == f"{sum(bool(c['passed']) for c in claims)} of {len(claims)}" and changes


def test_the_identities_of_charles_table_2_and_the_measured_rho_figure_are_not_replications():
    """Issue #40 item 1: runs on constructed instances agreeing with the formula they equal by construction."""
    import json

    from replicate.core import paths

    for name in ("table1_2", "fig_measured"):
        record = json.loads((paths.figures_dir() / "charles2021" / f"{name}.claims.json").read_text())
        assert all(c["kind"] == "consistency" and c["basis"] in ("identity", "closed-form") for c in record["claims"])


def test_every_reduced_record_names_the_knobs_its_command_changes():
    """Issue #40 item 9: a reduced-scale run names every knob it changes from the paper profile. A record that
    names exactly its command's ``--set`` knobs (where and how it ran excepted), and every committed record names
    them (the last without, Charles & Konečný's CPU-scale Figure 6, was republished on 2026-11-29)."""
    from replicate.report import reduced, replication

    text = replication.render()
    for item in reduced.REDUCED:
        file = paths.figures_dir() / f"{item.key}.claims.json"
        if not file.is_file():
            continue
        record = json.loads(file.read_text())
        assert set(record["changed_knobs"]) == set(item.knobs), item.key  # every committed record names them now
        section = text.split(f"### {item.what}")[1].split("\n### ")[0]
        assert "Knobs changed from the paper profile: " in section and all(f"`{k}`" in section for k in item.knobs)
    assert reduced.REDUCED[0].knobs == ("datasets", "rounds")  # out_dir says where, not what


def test_coverage_prose_states_the_records_numbers():
    """Issue #40 item 8: a row's prose said 'within 5 % / 8 %' where the record says 6 %, and a near-optimal
    range '100-300' where it says [100, 200]; such numbers are now read from the records (``Item.facts``), and a
    row whose record is absent shows '?' rather than a number typed by hand."""
    by_key = {f"{r['paper']}/{r['figure']}": r for r in replication.records_in(paths.figures_dir())}
    rows = {(i.paper, i.item): i for i in coverage.ITEMS}
    fig1a, eq8 = rows[("li2020", "Figure 1a")], rows[("notes", "Li et al. eq. (8) (§3.4)")]
    results = " ".join(c["result"] for c in by_key["li2020/fig1a"]["claims"])
    for item in (fig1a, eq8):
        assert "?" not in item.text(by_key) and "{" not in item.text(by_key)
    numbers = re.findall(r"\d+(?:\.\d+)?(?:%|×)", fig1a.text(by_key))
    assert len(numbers) == 4 and all(n in results for n in numbers), numbers
    optimal = " ".join(c["result"] for c in by_key["notes/optimal_e"]["claims"])
    e_star = re.findall(r"E\* = (\d+) / (\d+) steps", eq8.text(by_key))[0]
    assert all(f"E* = {e} steps" in optimal for e in e_star)
    assert "100-300" not in eq8.text(by_key)
    edited = json.loads(json.dumps(by_key["li2020/fig1a"]))  # an edited record: the prose follows it
    differences = {}  # the committed record's median differences, balanced and unbalanced
    for claim in edited["claims"]:
        if found := re.search(r"median relative difference (\d+)%", claim["result"]):
            differences[claim["claim"].split(":")[0]] = int(found[1])
        claim["result"] = re.sub(r"median relative difference (\d+)%", r"median relative difference 1\1%", claim["result"])
    balanced, unbalanced = differences["mnist balanced"], differences["mnist unbalanced"]
    assert f"within {balanced}% / {unbalanced}% of the paper's" in fig1a.text(by_key)
    assert f"within 1{balanced}% / 1{unbalanced}% of the paper's" in fig1a.text({**by_key, "li2020/fig1a": edited})
    assert "?" in fig1a.text({})  # no record: no number
    for item in coverage.ITEMS:  # every row with facts renders from today's records
        if item.facts:  # no placeholder left unfilled (a set such as {0.02, …} is prose), no number missing
            assert not re.search(r"\{[a-z_0-9]+\}", item.text(by_key)) and "?" not in item.text(by_key), item.item


def test_straggler_and_convex_rows_follow_their_records():
    """Issue #40 item 8 for two more rows: the straggler gains and the convex bounds' slack and slopes are read
    from the records, so a changed record changes the prose (they were typed by hand)."""
    import copy

    records = {k: json.loads((paths.figures_dir() / f"{k}.claims.json").read_text())
               for k in ("fedprox2020/stragglers", "notes/convex")}
    rows = {i.facts: i for i in coverage.ITEMS if i.facts}
    stragglers, convex = rows[facts.stragglers], rows[facts.convex]
    text = stragglers.text(records)
    assert "+13.7 points on average, 7.2 / 10.6 / 23.4 per dataset" in text and "8.9 without FEMNIST" in text
    assert "bound/measured 2e7-1e12" in convex.text(records) and "slopes −0.13 to −0.59" in convex.text(records)
    edited = copy.deepcopy(records)
    claim = next(c for c in edited["fedprox2020/stragglers"]["claims"] if c["claim"].startswith("FedProx improves"))
    claim["result"] = claim["result"].replace("+13.7 points", "+15.1 points").replace("MNIST: 10.6 [", "MNIST: 14.2 [")
    assert "+15.1 points on average, 7.2 / 14.2 / 23.4 per dataset" in stragglers.text(edited)
    assert "10.7 without FEMNIST" in stragglers.text(edited)
    assert "?" in stragglers.text({}) and "?" in convex.text({})


def test_fedprox_table1_row_follows_its_record():
    """Issue #40 item 8: the synthetic sets' total (22,349), its largest device's share and the authors'
    implied totals are the record's, not typed by hand."""
    record = json.loads((paths.figures_dir() / "fedprox2020" / "table1.claims.json").read_text())
    row, = [i for i in coverage.ITEMS if i.facts is facts.fedprox_table1]
    assert "with 22,349 samples (heavy-tailed; one device holds 23 %)" in row.text({"fedprox2020/table1": record})
    claim = next(c for c in record["claims"] if c["claim"].startswith("synthetic: devices / samples"))
    claim["result"] = claim["result"].replace("ours: 30 / 22,349 /", "ours: 30 / 20,001 /")
    assert "with 20,001 samples" in row.text({"fedprox2020/table1": record})


def test_table2_and_nonconvex_rows_follow_their_records():
    """Issue #40 item 8: Table 2's agreement range ('1e-16 … 3e-7' typed by hand; the records say 2.2e-16 to
    2.8e-7) and the T from which eq. (14) fails ('≈ 200'; the records: 180-220) are read from the records."""
    records = {k: json.loads((paths.figures_dir() / f"{k}.claims.json").read_text())
               for k in ("charles2021/table1_2", "notes/nonconvex")}
    rows = {i.facts: i for i in coverage.ITEMS if i.facts}
    assert "(agreement to 2e-16 … 3e-7)" in rows[facts.table2].text(records)
    assert "fails from T = 180–220 on" in rows[facts.nonconvex].text(records)
    assert "?" in rows[facts.table2].text({}) and "?" in rows[facts.nonconvex].text({})


def test_stem_measured_row_follows_its_figures_csv(tmp_path):
    """Issue #40 item 8: STEM Figure 1 measured's prose (each pair's samples / rounds, the losses of the pairs
    that miss the target, the κ̄ where the I = 2 splits diverge, the runs and minutes) is read from its record and
    the CSV beside it (``data_file``): an edited CSV changes the prose."""
    import shutil

    by_key = {f"{r['paper']}/{r['figure']}": r for r in replication.records_in(paths.figures_dir())}
    row, = [i for i in coverage.ITEMS if i.facts is facts.stem_measured]
    text = row.text(by_key)
    assert "(2, 10) 500 / 24; on the curve (8, 10) 880 / 10 and (2, 40) 720 / 8" in text
    assert "ends at 0.79" in text and "misses it too (0.75-0.88)" in text and "72 runs, 189 min" in text
    assert "(32, 10) 2,560 / 7 on seed 2, diverged on seed 1," in text  # a test seed that failed is named
    csv = tmp_path / "fig1_measured.csv"
    shutil.copy(by_key["khanduri2021/fig1_measured"]["data_file"], csv)
    csv.write_text(csv.read_text().replace("2,10,20,1,0.25,0.03,1590,24,500,", "2,10,20,1,0.25,0.03,1590,30,600,"))
    edited = {"khanduri2021/fig1_measured": by_key["khanduri2021/fig1_measured"] | {"data_file": str(csv)}}
    assert "(2, 10) 550 / 27;" in row.text(edited)
    assert "?" in row.text({"khanduri2021/fig1_measured": edited["khanduri2021/fig1_measured"]
                            | {"data_file": str(tmp_path / "absent.csv")}})


def test_stem_figure5_row_follows_its_figures_csv(tmp_path):
    """STEM Figure 5's prose (how many STEM candidates diverged, the pair its finals ran, where they diverged,
    the others' tuned losses, the runs) is read from its record and CSV: a STEM candidate that trained in an
    edited CSV changes the count, and an absent CSV shows "?"."""
    import pandas as pd

    by_key = {f"{r['paper']}/{r['figure']}": r for r in replication.records_in(paths.figures_dir())}
    row, = [i for i in coverage.ITEMS if i.facts is facts.stem_fig5]
    text = row.text(by_key)
    assert "over 34 STEM (κ̄, c) pairs" in text and "(68 of 68 tuning runs)" in text and "104 runs" in text
    assert "first pair (lr=0.01, c=1)" in text and "tuned final training losses 0.023-0.051" in text
    assert "of their 12 finals, 1 diverged: SCAFFOLD's at I = 100, seed 2" in text  # "train" is not every run
    data = pd.read_csv(by_key["khanduri2021/fig5"]["data_file"])
    data.loc[data.index[(data.kind == "tuning") & (data.algorithm == "STEM")][0], "final_train_loss"] = 0.5
    csv = tmp_path / "fig5.csv"
    data.to_csv(csv, index=False)
    edited = by_key["khanduri2021/fig5"] | {"data_file": str(csv)}
    assert "(67 of 68 tuning runs)" in row.text({"khanduri2021/fig5": edited})
    assert "?" in row.text({"khanduri2021/fig5": edited | {"data_file": str(tmp_path / "absent.csv")}})


def test_stem_figure5_row_states_the_cpu_replay_as_measured(tmp_path):
    """Issue #40 item 8: the row said, by hand, that the CPU reproduces the divergence "at the same round"; replayed
    (``khanduri2021.replay``) the finals diverge here later. The sentence and the CPU-scale run's horizon and pair
    are read from figures/khanduri2021/fig5.cpu_replay.json and the CPU-scale CSV: an edited replay changes it."""
    import shutil

    by_key = {f"{r['paper']}/{r['figure']}": r for r in replication.records_in(paths.figures_dir())}
    row, = [i for i in coverage.ITEMS if i.facts is facts.stem_fig5]
    text = row.text(by_key)
    assert "NaN at the same round on both" not in text
    assert "they diverge there too, later (κ̄ = 0.01, c = 1; I = 100, seed 0: within 1% up to round 2, then NaN at " \
           "round 4 here, 3 on the GPU; I = 10, seed 0: within 1% up to round 24, then NaN at round 72 here" in text
    assert "The labelled CPU-scale run (3,200 samples, where STEM still trains at κ̄ = 0.1, c = 150," in text
    for part in ("khanduri2021", "cpu_scale/khanduri2021"):
        (tmp_path / part).mkdir(parents=True)
    shutil.copy(by_key["khanduri2021/fig5"]["data_file"], tmp_path / "khanduri2021" / "fig5.csv")
    replayed = json.loads((paths.figures_dir() / "khanduri2021" / "fig5.cpu_replay.json").read_text())
    replayed["runs"][1]["here"]["first_nan"] = 36
    replayed["runs"][0]["here"]["first_nan"] = 3
    (tmp_path / "khanduri2021" / "fig5.cpu_replay.json").write_text(json.dumps(replayed))
    moved = {"khanduri2021/fig5": by_key["khanduri2021/fig5"] | {"data_file": str(tmp_path / "khanduri2021/fig5.csv")}}
    assert "they diverge there too, at the same round" in row.text(moved)
    assert "The labelled CPU-scale run (? samples" in row.text(moved)  # no CPU-scale CSV there: no number


def test_gpu_scale_rows_state_no_cost_by_hand():
    """Issue #40 item 8 for the GPU-scale rows: their costs were typed by hand ('≈ 3.7 h on this CPU (6.6 s a
    round…)', '35.3 s stacked' where BENCHMARKS.md now says 38.4, 'the one 15-minute lease', 'days on this CPU')
    and went stale. Rows and the work table name where a cost was measured; the seconds come from the records
    (the CPU-scale claims records, the ledger's GPU runs) when the table is written."""
    from replicate.experiments import work

    by_hand = re.compile(r"\d[\d,.]*\s*(?:ms|s|min|h)\b|\b(?:days?|a day|hours?|lease)\b")
    gpu_scale = {(figure.paper, figure.item) for figure in work.FIGURES}
    for item in coverage.ITEMS:
        if (item.paper, item.item) in gpu_scale:
            assert not by_hand.search(item.detail), (item.paper, item.item, by_hand.search(item.detail)[0])
    for figure in work.FIGURES:
        assert not re.search(r"\d", re.sub(r"CIFAR-10|H[12]00", "", figure.measured)), figure.figure  # names aside
    rows = {r["figure"]: r for r in json.loads((paths.figures_dir() / work.FILE).read_text())["rows"]}
    for figure in work.FIGURES:  # each CPU-scale record's seconds, as the record holds them now
        for key, _ in figure.records:
            seconds = json.loads((paths.figures_dir() / f"{key}.claims.json").read_text()).get("run_seconds") or {}
            if seconds:
                mean = sum(seconds.values()) / len(seconds)
                assert f"mean {mean:,.0f} s" in rows[figure.figure]["measured"], (figure.figure, key)


def test_reduced_notes_state_no_compute_time_and_no_verdict_against_their_record():
    """Issue #40 item 8 for the reduced-scale notes: a compute time typed into a note goes stale (STEM Figure 2's
    note said 4,794 s where its record holds 4,094; FedProx Sent140's note said 'the claim PASSes' where its record
    fails it): the command's line renders the record's compute, and a verdict a note names is its record's."""
    from replicate.report.reduced import REDUCED

    for item in REDUCED:
        assert not re.search(r"\d s of (one core|compute)|\d h of one core|\d s \(", item.note), item.key
        path = paths.figures_dir() / f"{item.key}.claims.json"
        if not path.exists() or item.key in coverage.STALE:
            continue
        claims = [c for c in json.loads(path.read_text())["claims"] if c.get("kind", "replication") == "replication"]
        if "PASSes" in item.note or "FAILs" in item.note:
            assert len(claims) == 1, item.key  # a note names one verdict only where its figure has one claim
            assert ("PASSes" in item.note) == bool(claims[0]["passed"]), item.key


def test_reduced_notes_render_their_numbers_from_their_csvs(tmp_path):
    """Issue #40 item 8 for the reduced-scale notes: their losses and accuracies were typed by hand and went
    stale (Charles & Konečný Figure 12 said γ = 0.1's early loss was 3.92 / 3.95 where its record says 3.902 /
    3.936, and its test accuracy 0.24 where the CSV's seed mean is 0.21). A note with ``facts`` reads them from
    its figure's CSV: every placeholder filled from today's outputs, an edited CSV changes the prose, and a
    missing CSV shows "?" instead of a number."""
    import shutil

    import pandas as pd

    from replicate.report import reduced

    root = paths.figures_dir()
    rendered = {item.key: item for item in reduced.REDUCED if item.facts}
    assert set(rendered) == {item.key for item in reduced.REDUCED if item.note}  # every note with numbers
    for key, item in rendered.items():
        text = item.text(root)
        assert "?" not in text and not re.search(r"\{[a-z_0-9]+\}", text), key
    fig12 = rendered["cpu_scale/charles2021/fig12"].text(root)
    early = next(c["result"] for c in json.loads((root / "cpu_scale/charles2021/fig12.claims.json").read_text())
                 ["claims"] if c["claim"].startswith("FEMNIST: a larger client rate"))
    assert "early loss (3.90 / 3.94; rounds 1-20)" in fig12 and "γ=0.1: [3.902, 3.936]" in early
    for key, column, scale, expect in (("cpu_scale/fedprox2020/fig2", "test_acc", 0.5, "E = 20 / 50 do learn: 0.321"),
                                       ("cpu_scale/charles2021/fig13", "train_loss", 2.0, "training loss over the last "
                                                                                          "40 rounds 1.46 / 1.52")):
        moved = tmp_path / key
        moved.parent.mkdir(parents=True, exist_ok=True)
        data = pd.read_csv(root / f"{key}.csv")
        data[column] *= scale
        data.to_csv(moved.with_suffix(".csv"), index=False)
        assert expect in rendered[key].text(tmp_path), rendered[key].text(tmp_path)
    shutil.rmtree(tmp_path / "cpu_scale")
    assert "{" not in rendered["cpu_scale/charles2021/fig12"].text(tmp_path)
    assert "ends at a training loss of ? (seeds" in rendered["cpu_scale/charles2021/fig12"].text(tmp_path)


def test_reduced_notes_of_fedprox_stragglers_and_stem_cifar_follow_their_outputs(tmp_path):
    """Issue #40 item 8, beyond the two notes above: every note whose record is published renders all its numbers;
    FedProx's Sent140 straggler note (its CSV and its claims record) and STEM's CIFAR-10 Figure 4 note (its final
    runs, its tuning losses and its published tuning curves) state what an edited CSV holds: an accuracy, the
    rate chosen, the round a candidate diverged after; and with no CSV each number reads "?"."""
    import shutil

    from replicate.report import reduced

    root = paths.figures_dir()
    notes = {item.key: item for item in reduced.REDUCED}
    for key, item in notes.items():
        if (root / f"{key}.claims.json").exists():
            text = item.text(root)
            assert "?" not in text and not re.search(r"\{[a-z_0-9]+\}", text), key

    def edited(key: str, edit) -> str:
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / f"{key}.claims.json", tmp_path / f"{key}.claims.json")
        data = pd.read_csv(root / f"{key}.csv")
        edit(data)
        data.to_csv(tmp_path / f"{key}.csv", index=False)
        return notes[key].text(tmp_path)

    def fedavg_at_90(data):
        data.loc[(data["algorithm"] == "FedAvg") & (data["drop"] == data["drop"].max()), "test_acc"] = 0.5

    stragglers = "cpu_scale/fedprox2020/stragglers"
    assert "its final test accuracy there 0.500 [0.500, 0.500]" in edited(stragglers, fedavg_at_90)

    def stem_fig4(data):
        data.loc[(data["kind"] == "curve") & (data["algorithm"] == "STEM"), "test_acc"] = 0.2
        data.loc[(data["kind"] == "tuning") & (data["algorithm"] == "FedAvg") & (data["lr"] == 0.1),
                 "final_train_loss"] = 1.0  # now the lowest: FedAvg's choice
        data.loc[(data["kind"] == "tuning curve") & (data["chosen"] == "lr=0.1, c=150") & (data["round"] > 2),
                 "train_loss"] = np.nan

    cifar = "cpu_scale/khanduri2021/fig4"
    text = edited(cifar, stem_fig4)
    assert "κ̄ = 0.1, c = 150: diverged after round 2," in text, text
    assert "STEM ends behind FedAvg (η = 0.1)" in text and "(20.0 / 20.0 % vs" in text, text

    for key in (stragglers, cifar):
        (tmp_path / f"{key}.csv").unlink()
    assert "degrades (final training loss ? without stragglers, ? at 90 %" in notes[stragglers].text(tmp_path)
    assert "STEM ends behind FedAvg (?) by ? in training loss (? vs ?" in notes[cifar].text(tmp_path)


def test_the_counting_rule_holds_for_every_committed_claim():
    """KIND_RULE's context clause, applied to every committed record: a claim on data we hold only in part (a
    stand-in loader), on a source outside the five documents, or under the arena's protocol is counted nowhere.
    A record computed on stand-ins names, for each of its replication claims, the loaders that claim reads, and
    none is a stand-in; a record published before claims named their data is listed as stale, with the command
    that republishes it."""
    from replicate.data import variants
    from replicate.report import coverage

    for path in sorted(paths.figures_dir().glob("**/*.claims.json")):
        record = json.loads(path.read_text())
        key = path.relative_to(paths.figures_dir()).as_posix()[:-len(".claims.json")]
        stand_ins = set((record.get("data") or {}).get("loaders", []))
        for c in record["claims"]:
            if c.get("basis") in ("external", "partial-data", "cross-check"):
                assert c["kind"] == "context", (key, c["claim"])
            if key.startswith("arena/"):
                assert c.get("basis") == "cross-check" and c["kind"] == "context", c["claim"]
            if "data" in c and any(variants.is_stand_in(n) for n in c["data"]):  # context, or fitted: never counted
                assert c["kind"] != "replication" and c["basis"] != "measured", (key, c["claim"])
            # (a run below the paper's scale, under figures/cpu_scale, is counted nowhere whatever its claims' kind)
            if stand_ins and c.get("kind", "replication") == "replication" and "data" not in c \
                    and not counted_nowhere(key):
                assert key in coverage.STALE and "Republish: `python -m replicate figures" in coverage.STALE[key], (
                    key, c["claim"])


def test_a_fedprox_claim_on_a_stand_in_is_context_and_on_official_data_is_counted():
    """The FedProx figures' claims name the loaders they read (``knobs.DataChoice.rests_on``): the partial LEAF copy
    standing in for EMNIST* makes its claim context; official data keeps it a replication claim."""
    from replicate.experiments.fedprox2020.common import rests_on
    from replicate.experiments.fedprox2020.mu import Fig3Config

    official, offline = Fig3Config(data_source="official"), Fig3Config(data_source="stand-in")
    assert rests_on(official, ["EMNIST*"]) == {"data": ("emnist_star_tff",), "basis": "measured"}
    assert rests_on(offline, ["EMNIST*"]) == {"data": ("emnist_star",), "basis": "partial-data"}
    assert rests_on(offline, ["MNIST"])["basis"] == "measured"
    assert rests_on(offline, ["MNIST", "EMNIST*"])["basis"] == "partial-data"  # one partial dataset is enough
    made = check("EMNIST*: x", True, "1", **rests_on(offline, ["EMNIST*"]))
    assert made.kind == "context" and made.data == ("emnist_star",)
