"""figures --check: committed vs regenerated CSVs within the stated tolerance, same verdicts."""
import json
from pathlib import Path

import pandas as pd
import pytest

from replicate.cli import check, main


def _write(root, values, passed=True, labels=("a", "b"), scale="paper", machines=None):
    (root / "li2020").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"series": list(labels), "loss": values}).to_csv(root / "li2020" / "fig3.csv", index=False)
    claims = {"scale": scale, "claims": [{"claim": "K barely matters", "passed": passed}]}
    if machines is not None:
        claims["machines"] = machines
    (root / "li2020" / "fig3.claims.json").write_text(json.dumps(claims))


def test_identical_and_within_tolerance_pass(tmp_path):
    _write(tmp_path / "old", [0.5, 1.25])
    _write(tmp_path / "new", [0.5, 1.25])
    same = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert same.ok and same.max_abs == 0 and same.values == 2
    _write(tmp_path / "new", [0.5 * (1 + 3e-3), 1.25])  # round-off across CPUs
    close = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert close.ok and close.max_rel == pytest.approx(3e-3, rel=1e-2)
    assert "reproduced within tolerance" in check.report([close])



def test_a_target_never_reached_on_both_sides_is_no_difference(tmp_path):
    import warnings

    _write(tmp_path / "old", [float("inf"), 1.25])
    _write(tmp_path / "new", [float("inf"), 1.25])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf − inf must not be computed (a RuntimeWarning in every report)
        same = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert same.ok and same.max_abs == 0 and same.max_rel == 0
    _write(tmp_path / "new", [3.0, 1.25])  # reached now: a difference
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reached = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert reached.outside == 1 and reached.max_rel == float("inf") and not reached.ok

def test_drift_verdict_change_and_shape_change_fail(tmp_path):
    _write(tmp_path / "old", [0.5, 1.25])
    _write(tmp_path / "new", [0.6, 1.25])
    drift = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert not drift.ok and drift.outside == 1
    _write(tmp_path / "new", [0.5, 1.25], passed=False)
    flipped = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert not flipped.ok and flipped.verdicts_differ == ("K barely matters",)
    assert "CHANGED" in check.report([flipped])
    _write(tmp_path / "new", [0.5, 1.25], labels=("a", "c"))
    assert check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new").problem == "labels differ in series"
    assert "missing" in check.compare("li2020/fig1a", tmp_path / "old", tmp_path / "new").problem
    _write(tmp_path / "new", [0.5, 1.25], scale="modified")  # same numbers, but not from the paper's settings
    assert check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new").problem == \
        "regenerated at modified scale, not paper"


def test_the_report_names_both_processors_when_they_differ(tmp_path):
    """Rounding differs between processors: the report says which processors computed each side, so a user
    reads a difference as rounding (other processors) or as a change (the same one)."""
    amd, intel = {"AMD EPYC 7B13, x86_64 AVX2, torch 2.13.0": 10}, {"Intel(R) Xeon(R), x86_64 AVX512, torch 2.13.0": 10}
    _write(tmp_path / "old", [0.5, 1.25], machines=amd)
    _write(tmp_path / "new", [0.5 * (1 + 3e-3), 1.25], machines=intel)
    other = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert other.ok and other.other_machine
    text = check.report([other])
    assert "committed runs computed on: AMD EPYC 7B13, x86_64 AVX2, torch 2.13.0 (10 runs)" in text
    assert "regenerated runs computed on: Intel(R) Xeon(R), x86_64 AVX512, torch 2.13.0 (10 runs)" in text
    _write(tmp_path / "new", [0.5, 1.25], labels=("a", "c"), machines=intel)  # a failure names them too
    assert "committed runs computed on" in check.report([check.compare("li2020/fig3", tmp_path / "old",
                                                                       tmp_path / "new")])
    _write(tmp_path / "new", [0.5, 1.25], machines=amd)
    same = check.compare("li2020/fig3", tmp_path / "old", tmp_path / "new")
    assert not same.other_machine and "computed on" not in check.report([same])
    _write(tmp_path / "old", [0.5, 1.25])  # a record published before records named processors
    assert "committed runs computed on: not recorded" in check.report([check.compare(
        "li2020/fig3", tmp_path / "old", tmp_path / "new")])


def test_check_needs_the_paper_profile(capsys):
    assert main.main(["figures", "--check", "li2020/fig2"]) == 2
    assert "--profile paper" in capsys.readouterr().err
    assert main.main(["figures", "--check", "--profile", "paper", "--set", "rounds=3", "li2020/fig2"]) == 2
    assert "no --set" in capsys.readouterr().err


def test_a_reduced_scale_command_is_checked_against_figures_cpu_scale(tmp_path, monkeypatch, capsys):
    """--check with a reduced-scale command's --set (out_dir=figures/cpu_scale) regenerates with the same knobs
    into build/check/cpu_scale and compares with the committed figures/cpu_scale files."""
    from replicate.cli import runner
    from replicate.core import paths

    monkeypatch.setattr(paths, "figures_dir", lambda: tmp_path / "figures")
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    _write(tmp_path / "figures" / "cpu_scale", [0.5, 1.25], scale="reduced")
    calls = []

    def regenerate(names, profile, overrides, **_):
        calls.append(overrides)
        _write(Path(overrides["out_dir"]), [0.5, 1.25], scale="reduced")
        return []

    monkeypatch.setattr(runner, "run", regenerate)
    args = ["figures", "--check", "--profile", "paper", "--set", "rounds=100", "li2020/fig3",
            "--set", f"out_dir={tmp_path / 'figures' / 'cpu_scale'}"]
    assert main.main(args) == 0
    assert calls == [{"rounds": 100, "out_dir": str(tmp_path / "build" / "check" / "cpu_scale")}]
    assert "reproduced within tolerance" in capsys.readouterr().out
    _write(tmp_path / "figures" / "cpu_scale", [0.9, 1.25], scale="reduced")  # the committed numbers differ
    assert main.main(args) == 1


def _aligned(header: str, rows: list[str], right: tuple[str, ...]) -> None:
    """Each column of ``rows`` starts (text) or ends (numbers, ``right``) where its header does."""
    names = [name for name in header.split("  ") if name]
    for name in names:
        start = header.index(name)
        at = start + len(name) - 1 if name in right else start
        for row in rows:
            assert row[at] != " " and (row[at + 1] if name in right else row[at - 1 if at else 0]) in " " + row[0], \
                f"column {name!r} misaligned in:\n{header}\n{row}"


def test_check_report_columns_line_up():
    results = [check.FigureCheck("li2020/fig3", 12, 1e-9, 2e-3, 0, 1e-2, ()),
               check.FigureCheck("charles2021/fig_measured", 12345, 0.5, 0.25, 123, 5e-2, ("a claim",))]
    header, *rows = check.report(results).splitlines()
    rows = [r for r in rows if not r.startswith("    verdict changed")]
    assert len(rows) == 2
    _aligned(header, rows, right=("values", "max abs diff", "max rel diff", "outside tol"))


def test_data_list_columns_line_up(capsys):
    from replicate.data import store

    assert main.main(["data", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(store.registered())
    states = ("staged", "stageable", "not fetched")  # the words of `data fetch --dry-run`
    starts = {min(line.index(f" {word} ") for word in states if f" {word} " in line) for line in lines}
    assert len(starts) == 1 and all(any(f" {w} " in line for w in states) for line in lines), lines


def test_bench_help_shows_a_plain_percent_sign(capsys):
    with pytest.raises(SystemExit):
        main.main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "90% stragglers" in text and "%%" not in text


def test_bench_records_the_sections_asked_for_and_keeps_cuda_timings_apart(tmp_path, monkeypatch, capsys):
    """A short GPU job times the sections it needs first (--sections, in that order); a CUDA recording
    goes to docs/BENCHMARKS.cuda.md, so a later CPU recording cannot erase it."""
    from replicate.cli import bench
    from replicate.core import paths

    monkeypatch.setattr(paths, "REPO", tmp_path)
    monkeypatch.setattr(bench, "describe_machine", lambda device=None: f"a {device} machine")
    timed = []
    monkeypatch.setattr(bench, "op_table", lambda: timed.append("ops") or "| char_lstm | 340 |")  # no counting
    cpu = "# Benchmarks\n\nevery section, recorded earlier\n"
    (tmp_path / "BENCHMARKS.md").write_text(cpu)
    assert main.main(["bench", "--sections", "ops", "--device", "cpu", "--record"]) == 2  # would drop the others
    assert "would replace BENCHMARKS.md's other sections" in capsys.readouterr().err and timed == []  # refused first
    (tmp_path / "docs").mkdir()
    assert main.main(["bench", "--sections", "ops", "--device", "cuda", "--record"]) == 0
    cuda = (tmp_path / "docs" / "BENCHMARKS.cuda.md").read_text()
    assert "bench --record --device cuda" in cuda and "Sections timed: ops" in cuda and "| char_lstm" in cuda
    assert "Runs as a tensor dimension" not in cuda  # the batched section was not asked for
    assert (tmp_path / "BENCHMARKS.md").read_text() == cpu
    assert main.main(["bench", "--sections", "ops", "engines"]) == 2
    assert "unknown bench section(s) engines; choose from engine, profile" in capsys.readouterr().err


def test_timing_columns_are_not_compared(tmp_path):
    """The notes figures record how long their constants took (constants_s): a machine's speed, not a result."""
    import pandas as pd

    for root, seconds in (("old", 157.5), ("new", 88.3)):
        (tmp_path / root / "notes").mkdir(parents=True)
        pd.DataFrame({"E": [1, 2], "bound": [0.5, 0.25], "constants_s": [seconds, seconds]}).to_csv(
            tmp_path / root / "notes" / "convex.csv", index=False)
    result = check.compare("notes/convex", tmp_path / "old", tmp_path / "new")
    assert result.ok and result.values == 4
