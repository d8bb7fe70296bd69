"""REPLICATION.md's opening summary says what the claims records say: every figure the report shows is in it with
a thumbnail that exists, each row's status, counts, quoted claim and numbers are those of the records (read here
from the JSON, apart from the summary's code), and the committed file is a fresh render."""
from __future__ import annotations

import json
import re

from replicate.core import paths
from replicate.report import coverage, replication
from replicate.report.claims import counted_nowhere

SUMMARY = "## Summary: each figure at a glance"
_ROW = re.compile(r'^\| <img src="(?P<src>[^"]+)" width="\d+" alt="[^"]*"><br>\[(?P<name>[^\]]+)\]\(#(?P<anchor>[^)]+)\)'
                  r": (?P<rest>.*)\|$")


def _records() -> dict[str, dict]:
    root = paths.figures_dir()
    return {str(p.relative_to(root))[:-len(".claims.json")]: json.loads(p.read_text())
            for p in sorted(root.glob("**/*.claims.json")) if p.relative_to(root).parts[0] != "arena"}


def _cells(line: str) -> list[str]:
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _sections(text: str) -> tuple[str, str]:
    head, rest = text.split(SUMMARY, 1)
    summary, details = rest.split("\n## ", 1)
    return summary, head + details


def test_the_committed_report_is_a_fresh_render(tmp_path):
    fresh = replication.write(tmp_path / "REPLICATION.md")
    assert (paths.REPO / "REPLICATION.md").read_text() == fresh.read_text(), \
        "regenerate REPLICATION.md: python -m replicate report"


def test_the_summary_opens_the_report_and_shows_every_figure_the_report_shows():
    text = replication.render()
    assert text.index(SUMMARY) < text.index("A **replication claim**") < text.index("## Coverage")
    summary, details = _sections(text)
    shown = set(re.findall(r"\]\((figures/[\w/]+\.png)\)", details))  # the coverage and details link each figure
    committed = {str(p.relative_to(paths.REPO)) for p in paths.figures_dir().glob("**/*.png")}
    assert shown == committed - {"figures/arena/leaderboard.png"}  # the arena is no figure of the documents
    thumbnails = [m["src"] for line in summary.splitlines() if (m := _ROW.match(line))]
    assert sorted(thumbnails) == sorted(shown)
    assert all((paths.REPO / src).is_file() for src in thumbnails)
    assert set(thumbnails) == {f"figures/{key}.png" for key in _records()}


def _status(item: coverage.Item, records: dict[str, dict]) -> str:
    """The coverage rule applied here to the JSON records."""
    claims = [c for key in item.figures if key in records for c in records[key]["claims"]
              if not item.select or re.search(item.select, c["claim"])]
    measured = [c for c in claims if c.get("kind", "replication") == "replication"]
    stand_in = any(records.get(key, {}).get("data", {}).get("choice") == "stand-in" for key in item.figures)
    return coverage.status(item.run, "limited" if stand_in else item.data, sum(c["passed"] for c in measured),
                           len(measured))


def _tally(claims: list[dict], kind: str) -> tuple[int, int]:
    mine = [c for c in claims if c.get("kind", "replication") == kind]
    return sum(bool(c["passed"]) for c in mine), len(mine)


def test_each_summary_row_says_what_its_claims_record_says():
    records = _records()
    text = replication.render()
    summary, details = _sections(text)
    rows = [(m, _cells(line)) for line in summary.splitlines() if (m := _ROW.match(line))]
    assert len(rows) == len(records)
    for m, cells in rows:
        key = m["src"][len("figures/"):-len(".png")]
        record = records[key]
        assert m["name"] == key.split("/")[-1] and f'<a id="{m["anchor"]}"></a>' in details, key
        status, said, ours = cells[1], cells[2], cells[3]
        phrase = status.split("<br>")[-1]
        passed, total = _tally(record["claims"], "replication")
        assert (f"{passed} of {total} replication claims hold" in phrase if total else
                "no replication claims" in phrase), (key, phrase)
        passed, total = _tally(record["claims"], "consistency")
        assert (f"{passed} of {total} consistency checks hold" in phrase) == bool(total), (key, phrase)
        if counted_nowhere(key):  # labelled (cpu_scale/, modified/), and its claims stay in their own section
            below = key.startswith("cpu_scale/")
            assert status.startswith("**reduced scale**<br>at this scale: " if below else
                                     "**modified settings**<br>so modified: "), key
            assert (said, ours) == (replication.BELOW_SCALE if below else replication.MODIFIED, "—"), key
            continue
        items = [item for item in coverage.ITEMS if key in item.figures]
        expected = [_status(item, records) if len(items) == 1 else f"{item.name}: {_status(item, records)}"
                    for item in items]
        assert status.split("<br>")[:-1] == [f"**{s}**" for s in expected], key
        # the quoted claim is one of the record's, its numbers and verdict are that claim's
        claim = next(c for c in record["claims"]
                     if said == c["claim"] + (f" (paper: {c['paper_value']})" if c.get("paper_value") else ""))
        result, verdict = ours.rsplit(" — ", 1)
        assert verdict.strip("*") == (claim.get("verdict") or ("PASS" if claim["passed"] else "FAIL")), key
        assert result == claim["result"] or (result.endswith(" …") and claim["result"].startswith(result[:-2])
                                             and claim["result"][len(result) - 2] in ";,"), key
        failing = [c for c in record["claims"] if c.get("kind", "replication") == "replication" and not c["passed"]]
        assert not failing or claim == failing[0], f"{key}: the summary must show a failing replication claim"


def test_the_readme_status_table_is_the_records_own():
    """The front page's counts are rendered from the claims records (``report.status``), never typed: the committed
    README holds exactly that block, and its totals are the records' replication claims, read here from the JSON."""
    from replicate.report import status

    readme = (paths.REPO / "README.md").read_text()
    assert status.block(replication.records_in(paths.figures_dir())) in readme
    claims = [c for key, r in _records().items() if not counted_nowhere(key) for c in r["claims"]]
    replication_claims = [c for c in claims if c.get("kind", "replication") == "replication"]
    total = f"**{sum(c['passed'] for c in replication_claims)} of {len(replication_claims)}**"
    assert total in readme.split(status.BEGIN)[1].split(status.END)[0]
