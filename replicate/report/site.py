"""The documentation site: ``docs/``, the repository pages they link to, and one page per committed figure.

``python -m replicate.report.site`` assembles the site's sources into ``build/site-src`` (``mkdocs.yml``'s
``docs_dir``); ``mkdocs build --strict`` turns them into ``build/site`` (``make docs`` runs both). Nothing it
writes lands in git. Each page is staged under its site name (``PAGES``; a page of ``docs/`` keeps its name), and
each relative link in it is rewritten to where its target was staged; a file a page links to that is no page (a
figure, the licence) is copied to the same path in the site, and a link to nothing stops the assembly. The pages
it generates come from the claims records under ``figures/`` (``report.replication``): per document, its
figures at a glance; per figure, its picture, the paper's quoted statements, every claim with its margin and
verdict, its deviations, the command and notebook that make it and its wall time.
"""
from __future__ import annotations

import json
import posixpath
import re
import shutil
import sys
from pathlib import Path

from replicate.core import paths
from replicate.core.errors import ReplicateError
from replicate.report import coverage, reduced, replication
from replicate.report.claims import counted_nowhere

STAGING = Path("build/site-src")  # mkdocs.yml's docs_dir, relative to the repository
# Repository markdown outside docs/ that the pages link to → its page in the site
PAGES = {"README.md": "readme.md", "REPLICATION.md": "replication.md", "BENCHMARKS.md": "benchmarks.md",
         "data/README.md": "data-files.md"}
FIGURE_WIDTH = 200  # pixels: a figure's thumbnail on its document's page
# mkdocs.yml's extra_css: room for the report's wide tables, and thumbnails a narrow column does not shrink
STYLE = """.md-grid { max-width: 90rem; }
.md-typeset table:not([class]) img { max-width: none; }
"""
_LINK = re.compile(r"(!?\[[^\]\n]*\]\()([^)\s]+)((?:\s+\"[^\"]*\")?\))")  # [text](target "title")
_ATTRIBUTE = re.compile(r"\b(src|href)=\"([^\"]+)\"")  # raw HTML, which mkdocs neither checks nor rewrites
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
_ITEM = re.compile(r"\s*(?:[-*+]|\d+\.)\s")  # a list item's start
_LONE_STAR = re.compile(r"(?<![*\\])\*(?!\*)")  # w*, F*, EMNIST*: a star of the mathematics, not emphasis


def sources(repo: Path) -> dict[str, str]:
    """Every staged page: its repository path → its site path."""
    pages = {f"docs/{p.relative_to(repo / 'docs').as_posix()}": p.relative_to(repo / "docs").as_posix()
             for p in sorted((repo / "docs").glob("*.md")) + sorted((repo / "docs" / "specs").glob("*.md"))}
    return pages | {name: site for name, site in PAGES.items() if (repo / name).is_file()}


def _rewrite(text: str, source: str, pages: dict[str, str], repo: Path, staging: Path) -> str:
    """``text`` of the page at repository path ``source`` with each relative link pointed at its staged target
    (files that are no page copied into ``staging``); code blocks are left as they are."""
    here = pages[source]

    def target(link: str, html: bool) -> str:
        path, hash_, anchor = link.partition("#")
        if not path or _SCHEME.match(path) or path.startswith("/"):
            return link
        repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if repo_path in pages:
            site = pages[repo_path]
            if html:  # mkdocs turns the .md of a markdown link into .html, never that of a raw HTML one
                site = site[:-len(".md")] + ".html"
        elif (repo / repo_path).is_file():
            site = repo_path
            (staging / site).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo / repo_path, staging / site)
        else:
            raise ReplicateError(f"{source} links to {link!r}: no file {repo_path} in the repository")
        return posixpath.relpath(site, posixpath.dirname(here) or ".") + hash_ + anchor

    lines, fenced = [], False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced:
            line = _elided(line)
            line = _LINK.sub(lambda m: m[1] + target(m[2], html=False) + m[3], line)
            line = _ATTRIBUTE.sub(lambda m: f'{m[1]}="{target(m[2], html=True)}"', line)
            if line.startswith("|"):  # a table's cells hold mathematics, never emphasis
                line = _LONE_STAR.sub(r"\\*", line)
            previous = lines[-1] if lines else "\n"
            if _ITEM.match(line) and previous.strip() and not _ITEM.match(previous) and not previous[0].isspace():
                lines.append("\n")  # a list right under a paragraph: GitHub starts one there, mkdocs' Markdown
                # only after a blank line (it ran the items into the paragraph)
        lines.append(line)
    return "".join(lines)


def _elided(text: str) -> str:
    """A quotation's "[...]" kept as text: after "[words] " markdown would read it as a reference link."""
    return text.replace("[...]", "\\[...\\]")


def _quoted(text) -> str:
    """Text of a record (a claim, a quotation) as markdown shows it: its "[...]" and lone stars kept as text."""
    return _LONE_STAR.sub(r"\\*", _elided(str(text)))


def _cell(text) -> str:
    return _quoted(text).replace("|", "\\|").replace("\n", " ")


def _short(paper: str) -> str:
    """A document's name for a page title: its title up to the dash."""
    return replication.PAPER_TITLES[paper].split(" — ")[0]


def _notebook(key: str) -> str:
    """The notebook that makes a figure (``cpu_scale/`` and ``modified/`` runs are the paper's notebook with
    overrides)."""
    paper, figure = key.split("/")[-2:]
    return f"notebooks/{paper}_{figure}.ipynb"


def _status_text(key: str, by_key: dict) -> str:
    rows = replication.statuses(key, by_key)
    return "; ".join(f"{name}: **{status}**" if name and len(rows) > 1 else f"**{status}**" for name, status in rows)


def figure_page(key: str, record: dict, what: str, by_key: dict, root: Path) -> str:
    """A figure's page: picture, the paper's quoted statements, claims, deviations, how it is made."""
    name = key.split("/")[-1]
    items = [item for item in coverage.ITEMS if key in item.figures]
    below = next((item for item in reduced.REDUCED if item.key == key), None)
    lines = [f"# {_short(record['paper'])}: {what}", "",
             f"Status: {_status_text(key, by_key)}. {replication.counts(record['claims'])}.", "",
             f"![{key}]({name}.png)", ""]
    if below:
        lines += [f"Below the paper's scale (labelled; counted nowhere): {below.scale}.", ""]
    lines += [f"- {item.name}: {item.text(by_key)}" for item in items if item.text(by_key)] + ([""] if items else [])
    quotes = list(dict.fromkeys(c["source"] for c in record["claims"] if c.get("source")))
    if quotes:
        lines += ["## What the paper says", ""] + [line for q in quotes for line in ("> " + _quoted(q), "")]
    lines += ["## Claims", "", "| kind | claim | paper | ours | margin | verdict |", "|---|---|---|---|---|---|"]
    for c in record["claims"]:
        verdict = replication.verdict_of(c)
        lines.append(f"| {c.get('kind', 'replication')} | {_cell(c['claim'])} | {_cell(c.get('paper_value', ''))} | "
                     f"{_cell(c['result'])} | {_cell(c.get('margin', ''))} | "
                     f"{verdict if c['passed'] else f'**{verdict}**'} |")
    lines.append("")
    deviations = list(dict.fromkeys(list(record.get("deviations", []))
                                    + [d for c in record["claims"] for d in c.get("deviations", [])]))
    if deviations:
        lines += ["## Deviations from the paper", ""] + [f"- {d}" for d in deviations] + [""]
    if record.get("notes"):
        lines += ["## Notes", "", record["notes"], ""]
    figure = key.split("/", 1)[1] if below else key  # the runner's name of the figure
    command = below.command if below else f"python -m replicate figures {key} --profile paper"
    lines += ["## How it is made", "", "```bash", command, "```", "",
              f"The notebook `{_notebook(key)}` makes it (`python -m replicate figures {figure}` runs it at smoke "
              "scale, in minutes). Wall time as the record states it: "
              f"{replication._wall(record)}.", ""]
    if below:
        note = below.text(root)
        lines += ([note, ""] if note else []) + [_knobs_line(record)] + [""]
    data = record.get("data") or {}
    if data.get("choice") == "stand-in":
        lines += [f"Data: this machine's offline stand-ins ({', '.join(data.get('loaders', []))}), so the figure "
                  "is data-limited (the replication report's Data section).", ""]
    return "\n".join(lines)


def _knobs_line(record: dict) -> str:
    knobs = record.get("changed_knobs") or {}
    return ("Knobs changed from the paper profile: " + ", ".join(f"`{k}` = {json.dumps(v)}" for k, v in knobs.items())
            + ".") if knobs else "The record names no changed knobs."


def document_page(paper: str, rows: list[tuple[str, dict, str]], by_key: dict) -> str:
    """A document's figures at a glance, each linked to its page."""
    counted = [c for key, r, _ in rows if not counted_nowhere(key) for c in r["claims"]]
    lines = [f"# {replication.PAPER_TITLES[paper]}", "",
             f"At the paper's scale: {replication.counts(counted)}. Runs below the paper's scale are labelled "
             "reduced scale and counted nowhere. The [replication report](../replication.md) has every claim of "
             "every document.", "", "| figure | what | status | claims |", "|---|---|---|---|"]
    for key, record, what in rows:
        lines.append(f'| <a href="{key}.html"><img src="{key}.png" width="{FIGURE_WIDTH}" alt="{key}"></a> | '
                     f"[{key.split('/')[-1]}]({key}.md): {_cell(what)} | {_cell(_status_text(key, by_key))} | "
                     f"{replication.counts(record['claims'])} |")
    return "\n".join(lines) + "\n"


def api_page() -> str:
    """The API reference: each name of ``replicate.__all__`` where it is defined, rendered by mkdocstrings."""
    import replicate

    lines = ["# API reference", "",
             "`import replicate as rp` offers each name below as `rp.<name>` (`replicate.__all__`); each loads when "
             "first used. Rendered from the docstrings.", ""]
    for name in replicate.__all__:
        module, attribute = replicate._API.get(name, (None, None))  # where the package's face loads each name from
        if module is None:
            value = getattr(replicate, name)
            if not hasattr(value, "__qualname__"):  # __version__
                continue
            module, attribute = value.__module__, value.__qualname__
        where = module if attribute is None else f"{module}.{attribute}"
        options = ["        show_root_heading: true", "        show_root_full_path: false", "        heading_level: 2"]
        value = getattr(replicate, name, None)
        if getattr(value, "__module__", "").startswith("replicate.fl.algorithms."):  # help() shows its module's
            where, options = value.__module__, [*options, f"        members: [{value.__name__}]"]  # statement
        lines += [f"::: {where}", "    options:", *options, ""]
    return "\n".join(lines)


def assemble(staging: Path | None = None, repo: Path | None = None) -> Path:
    """Write the site's sources into ``staging`` (emptied first) and return it."""
    repo = repo or paths.REPO
    staging = staging or repo / STAGING
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    pages = sources(repo)
    for source, site in pages.items():
        (staging / site).parent.mkdir(parents=True, exist_ok=True)
        (staging / site).write_text(_rewrite((repo / source).read_text(), source, pages, repo, staging))
    root = repo / "figures"
    records = replication.records_in(root)
    by_key = {f"{r['paper']}/{r['figure']}": r for r in records}
    (staging / "figures").mkdir(exist_ok=True)
    for paper, rows in replication.summary_rows(records, root).items():
        (staging / "figures" / f"{paper}.md").write_text(document_page(paper, rows, by_key))
        for key, record, what in rows:
            (staging / "figures" / key).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / f"{key}.png", staging / "figures" / f"{key}.png")
            (staging / "figures" / f"{key}.md").write_text(figure_page(key, record, what, by_key, root))
    (staging / "reference.md").write_text(api_page())
    (staging / "site.css").write_text(STYLE)
    return staging


def build(staging: Path, site_dir: Path) -> Path:
    """Build the assembled ``staging`` into ``site_dir`` with ``mkdocs.yml`` in strict mode: a broken link or a
    missing image fails (mkdocs' Abort)."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    config = load_config(str(paths.REPO / "mkdocs.yml"), docs_dir=str(staging), site_dir=str(site_dir), strict=True)
    mkdocs_build(config)
    return site_dir


if __name__ == "__main__":
    print(assemble(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else None))
