"""Papermill runner: selection, parameter checks, and never overwriting figures on failure."""
import dataclasses
import json

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from replicate.core import paths, settings
from replicate.experiments import catalog, knobs
from replicate.runs import cache, keys

from replicate.report import replication as report

from replicate.cli import progress, runner
from replicate.report.claims import check, consistency, publish
from replicate.core.errors import ReplicateError


def _notebook(folder, name, body):
    params = new_code_cell('profile = "smoke"\nout_dir = None')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell(f"# {name} title"), params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")


GOOD = ('import pandas as pd\nfrom replicate.report.claims import publish, check\n'
        'publish(None, pd.DataFrame({"x": [1], "y": [2.0]}), [check("y is two", True, "y = 2")],\n'
        '        paper="notes", figure="figA", profile=profile, out_dir=out_dir)')


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "figures" / "notes").mkdir(parents=True)
    monkeypatch.setattr(paths, "notebooks_dir", lambda: tmp_path / "notebooks")
    monkeypatch.setattr(paths, "figures_dir", lambda: tmp_path / "figures")
    monkeypatch.setattr(paths, "REPO", tmp_path)
    return tmp_path


def test_resolve_and_unknown_figure(project):
    _notebook(project / "notebooks", "notes_figA", GOOD)
    assert [nb.key for nb in runner.resolve(["notes/figA"])] == ["notes/figA"]
    assert [nb.key for nb in runner.resolve(["notes"])] == ["notes/figA"]
    assert runner.discover()[0].title == "notes_figA title"
    with pytest.raises(ReplicateError, match="unknown figure 'notes/figZ'; did you mean notes/figA or notes\\?.*--list"):
        runner.resolve(["notes/figZ"])
    with pytest.raises(ReplicateError, match="unknown figure 'elsewhere' \\(`python -m replicate figures --list`"):
        runner.resolve(["elsewhere"])


def test_wrong_parameter_is_rejected_before_running(project):
    _notebook(project / "notebooks", "notes_figA", GOOD)
    with pytest.raises(ReplicateError, match="no parameter.*rounds.*profile, out_dir"):
        runner.run(["notes/figA"], "smoke", {"rounds": 3})


def test_success_promotes_and_failure_keeps_committed_figures(project):
    _notebook(project / "notebooks", "notes_figA", GOOD)
    assert runner.run(["notes/figA"], "paper") == 0
    committed = project / "figures" / "notes" / "figA.csv"
    record = json.loads((project / "figures" / "notes" / "figA.claims.json").read_text())
    assert committed.read_text().startswith("x,y") and record["wall_time_s"] >= 0
    assert "y is two" in (project / "REPLICATION.md").read_text()
    before = committed.read_text()
    _notebook(project / "notebooks", "notes_figA", GOOD.replace("[1]", "[1/0]"))
    assert runner.run(["notes/figA"], "paper") == 1
    assert committed.read_text() == before


def test_verbose_streams_each_cell_and_the_notebooks_output(project, capfd):
    _notebook(project / "notebooks", "notes_figA", GOOD + "\nprint('said by the cell')")
    assert runner.run(["notes/figA"], "smoke", log_output=True) == 0
    err = capfd.readouterr().err
    assert "Executing Cell 2" in err and "said by the cell" in err
    assert runner.run(["notes/figA"], "smoke") == 0 and "Executing Cell" not in capfd.readouterr().err


def test_only_an_unmodified_paper_run_writes_committed_figures(project, tmp_path):
    _notebook(project / "notebooks", "notes_figA", GOOD)
    committed = project / "figures" / "notes" / "figA.csv"
    with pytest.raises(ReplicateError, match="profile once"):
        runner.run(["notes/figA"], "paper", {"profile": "smoke"})
    elsewhere = tmp_path / "elsewhere"
    assert runner.run(["notes/figA"], "paper", {"out_dir": str(elsewhere)}) == 0  # the README's example
    assert (elsewhere / "notes" / "figA.csv").exists() and (elsewhere / "notes" / "figA.claims.json").exists()
    assert not committed.exists() and not (project / "REPLICATION.md").exists()
    assert runner.run(["notes/figA"], "smoke") == 0
    assert not committed.exists() and not (project / "REPLICATION.md").exists()
    assert not (settings.current().build / "staging").exists()  # nothing left behind


@dataclasses.dataclass(frozen=True)
class _SourceConfig(knobs.DataChoice, knobs.FigureConfig):
    """A figure whose one knob is its data source."""

    @classmethod
    def smoke(cls):
        return cls()


def test_a_paper_run_that_only_names_its_data_source_still_updates_the_committed_figures(project, monkeypatch):
    """``data_source`` is recorded apart (a stand-in labels the figure and its row), not a change of settings: the
    GPU jobs' publish command (``--set data_source=stand-in``) writes figures/ like the plain paper run."""
    body = GOOD.replace("import pandas as pd", "data_source = None\nimport pandas as pd")
    _notebook(project / "notebooks", "notes_figA", body)
    nb = json.loads((project / "notebooks" / "notes_figA.ipynb").read_text())
    nb["cells"][1]["source"] += "\ndata_source = None"  # a parameter of its parameters cell
    (project / "notebooks" / "notes_figA.ipynb").write_text(json.dumps(nb))
    monkeypatch.setitem(catalog.FIGURES, "notes/figA", f"{__name__}:_SourceConfig")
    assert runner.run(["notes/figA"], "paper", {"data_source": "stand-in"}) == 0
    assert (project / "figures" / "notes" / "figA.csv").exists()


def test_data_fetch_without_a_name_is_an_error(capsys):
    from replicate.cli.main import main

    assert main(["data", "fetch"]) == 2
    err = capsys.readouterr().err
    assert "name the dataset(s) to fetch:" in err and "mnist" in err


def test_staged_files_are_world_readable(tmp_path):
    from replicate.core.fileio import atomic_file, atomic_write_text

    atomic_write_text(tmp_path / "a.txt", "x")
    with atomic_file(tmp_path / "b.bin") as fh:
        fh.write(b"y")
    assert {oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == {"0o644"}
    with pytest.raises(RuntimeError):
        with atomic_file(tmp_path / "c.bin") as fh:
            fh.write(b"half")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]  # no half file, no temp file


def test_publish_writes_data_claims_and_report(tmp_path):
    import pandas as pd

    out = tmp_path / "out"
    claims = [check("a holds", True, "1.5", paper_value="1.4", margin="±10%"),
              check("b holds", False, "no", ("PROPOSED thing",)),
              consistency("c is an identity", True, "0 error")]
    table = publish(None, pd.DataFrame({"series": ["a"], "x": [0], "y": [1.5]}), claims,
                    paper="li2020", figure="fig9", profile="paper", out_dir=out, deviations=["dev one"])
    assert list(table.frame.verdict) == ["PASS", "FAIL", "holds"]
    assert list(table.frame.paper) == ["1.4", "", ""] and "1 of 2 replication claims hold" in repr(table)
    assert "<table" in table._repr_html_()  # Jupyter renders it once, as a table
    assert (out / "li2020" / "fig9.csv").read_text().splitlines() == ["series,x,y", "a,0,1.5"]
    text = report.render(out)
    assert "1 of 2 replication claims hold; 1 of 1 consistency checks hold" in text
    assert "### Consistency checks" in text and "**FAIL**" in text and "PROPOSED thing" in text and "dev one" in text
    coverage_table = text.split("## Coverage of every figure and table")[1].split("## Data")[0]
    assert all(f"| {paper} |" in coverage_table for paper in ("li2020", "charles2021", "fedprox2020",
                                                              "khanduri2021", "notes"))
    publish(None, pd.DataFrame({"x": [1]}), [consistency("d is an identity", True, "0 error")],
            paper="khanduri2021", figure="fig1", profile="paper", out_dir=out)
    analytic = report.render(out).split("## Khanduri et al. 2021")[1]
    assert "no replication claims (nothing measured); 1 of 1 consistency checks hold" in analytic
    smoke = publish(None, pd.DataFrame({"x": [1]}), claims, paper="li2020", figure="fig9", profile="smoke", out_dir=out)
    assert all(v.startswith("smoke scale: not a replication verdict") for v in smoke.frame.verdict)
    assert "PASS" not in repr(smoke) and "FAIL" not in repr(smoke)
    with pytest.raises(ReplicateError, match="unknown paper key"):
        publish(None, pd.DataFrame(), [], paper="li2021", figure="x", profile="paper", out_dir=out)


def test_reduced_scale_runs_are_shown_labelled_and_never_counted(tmp_path):
    """A below-paper-scale run under figures/cpu_scale/<paper>/ (reduced.REDUCED) gets its own
    labelled section in REPLICATION.md; the headline counts only the paper-scale figures."""
    import pandas as pd

    from replicate.report import reduced

    out = tmp_path / "figures"
    publish(None, pd.DataFrame({"x": [0]}), [check("a holds", True, "1")], paper="fedprox2020", figure="fig2",
            profile="paper", out_dir=out)
    item = reduced.REDUCED[0]
    folder, paper, figure = item.key.split("/")
    publish(None, pd.DataFrame({"x": [0]}), [check("reduced b holds", False, "2"), check("reduced c", True, "3")],
            paper=paper, figure=figure, profile="paper", out_dir=out / folder)
    assert (out / f"{item.key}.claims.json").is_file()
    text = report.render(out)
    assert "**1 of 1 replication claims hold** across 1 figures." in text
    reduced = text.split("## Reduced-scale runs (labelled; not counted above)")[1]
    assert item.scale in reduced and item.command in reduced
    assert "| reduced b holds |" in reduced and "| FAIL |" in reduced and "| reduced c |" in reduced
    assert "reduced b holds" not in text.split("## Reduced-scale runs")[0]


def test_modified_runs_are_shown_labelled_modified_and_never_counted(tmp_path):
    """A run at the paper's scale with a setting changed, under figures/modified (a ``Reduced.modified`` entry:
    STEM's second grid), is shown in the labelled section as modified (its record's scale, no "Stale" line), in the
    summary as modified settings, and counted nowhere."""
    import pandas as pd

    from replicate.report import reduced

    out = tmp_path / "figures"
    publish(None, pd.DataFrame({"x": [0]}), [check("a holds", True, "1")], paper="fedprox2020", figure="fig2",
            profile="paper", out_dir=out)
    item = next(i for i in reduced.REDUCED if i.modified)
    *folder, paper, figure = item.key.split("/")
    publish(None, pd.DataFrame({"x": [0]}), [check("modified b holds", False, "2")], paper=paper, figure=figure,
            profile="paper", out_dir=out.joinpath(*folder))
    assert json.loads((out / f"{item.key}.claims.json").read_text())["scale"] == "modified"
    text = report.render(out)
    assert "**1 of 1 replication claims hold** across 1 figures." in text
    section = text.split("## Reduced-scale runs (labelled; not counted above)")[1]
    assert "Those under figures/modified ran at the paper's scale with a setting changed" in section
    mine = section.split(f"### {item.what}")[1].split("\n### ")[0]
    assert item.command in mine and "| modified b holds |" in mine and "**Stale:**" not in mine
    assert "modified settings" in text.split("## Reduced-scale runs")[0]
    assert "| modified b holds |" not in text.split("## Reduced-scale runs")[0]


def _sleeping_batch(tmp_path, **popen):
    """``figures notes/figA`` in a subprocess on a notebook that sleeps a minute, returned once its kernel runs."""
    import os
    import subprocess
    import sys
    import time

    (tmp_path / "notebooks").mkdir()
    _notebook(tmp_path / "notebooks", "notes_figA", "import time\ntime.sleep(60)")
    script = (f"import sys\nfrom replicate.core import paths\nfrom pathlib import Path\n"
              f"paths.notebooks_dir = lambda: Path({str(tmp_path / 'notebooks')!r})\n"
              f"paths.figures_dir = lambda: Path({str(tmp_path / 'figures')!r})\n"
              "from replicate.cli.main import main\nsys.exit(main(['figures', 'notes/figA']))\n")
    env = {**os.environ, "REPLICATE_BUILD": str(tmp_path / "build")}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)
    deadline = time.time() + 60
    while time.time() < deadline and not list((tmp_path / "build").glob("executed/smoke/*.ipynb")):
        time.sleep(0.5)  # papermill writes the executed notebook once the kernel runs
    time.sleep(3)
    return proc


def _stopped(proc) -> list[str]:
    """The lines it wrote on stderr once it ended, the progress bar's redraws aside."""
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    return [line for line in err.replace("\r", "\n").splitlines() if line.strip() and "figures (smoke)" not in line]


def test_ctrl_c_ends_with_one_line_and_keeps_figures(tmp_path):
    """SIGINT in the middle of a notebook: exit 130, one line saying how to resume, no traceback."""
    import os
    import signal

    proc = _sleeping_batch(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C in a terminal: the whole process group
    lines = _stopped(proc)
    assert len(lines) == 1 and "interrupted during notes/figA" in lines[0] and "rerun the same command" in lines[0]
    assert not (tmp_path / "figures").exists()
    assert not (tmp_path / "build" / "staging").exists()  # not even an empty folder


def test_sigint_stops_a_batch_started_with_sigint_ignored(tmp_path):
    """A batch started as a background job of a non-interactive shell (`nohup … &`) inherits SIGINT ignored; an
    explicit `kill -INT` of the command still stops it as Ctrl-C does: exit 130, one line."""
    import signal

    proc = _sleeping_batch(tmp_path, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    proc.send_signal(signal.SIGINT)  # the command alone, not its process group
    lines = _stopped(proc)
    assert len(lines) == 1 and "interrupted during notes/figA" in lines[0]


class _Bar:
    text = ""

    def set_postfix_str(self, text):
        self.text = text


def test_batch_progress_shows_runs_and_eta(tmp_path):
    """A notebook's RunLog reports to the file the runner polls; the bar shows runs and an ETA."""
    from replicate.runs.cache import RunLog

    progress_file = tmp_path / "progress.json"
    log = RunLog(progress_file=str(progress_file))
    log.planned(["a", "b", "c", "d"])
    log.finished(by_worker=True)
    log.record(1.0, cached=True)
    state = json.loads(progress_file.read_text())
    assert state == {"runs": 1, "from_cache": 1, "to_compute": 4, "computed": 1}
    shown = progress.Progress(_Bar(), "li2020/fig1a", {"wall_time_s": 600.0, "runs": 46}, progress_file)
    shown.show(state)
    assert "li2020/fig1a, computing runs 1/4, ETA" in shown.bar.text
    shown.show({"runs": 5, "from_cache": 2, "to_compute": 0})
    assert shown.bar.text == "li2020/fig1a, runs 5/46 (2 from cache)"
    shown.show({"runs": 63, "from_cache": 63, "to_compute": 0})  # more runs than last time (a larger grid)
    assert shown.bar.text == "li2020/fig1a, runs 63 (63 from cache)"


def _cached(folder: str, name: str) -> None:
    """A whole cache entry (a CSV and the sidecar that verifies it) of a run nothing computed."""
    (settings.current().cache / folder).mkdir(parents=True, exist_ok=True)
    (settings.current().cache / folder / f"{name}.csv").write_text("round\n0\n")
    (settings.current().cache / folder / f"{name}.json").write_text(json.dumps(cache.integrity("round\n0\n")))


def test_eta_is_the_recorded_compute_of_the_runs_still_missing(tmp_path):
    """A warm-cache run took 31 s of wall time; its runs took 163 s to compute from scratch. With
    one of them cached, the ETA is the recorded compute of the other two, not the 31 s."""
    record = {"profile": "smoke", "wall_time_s": 31.0, "runs": 3, "cache_version": keys.VERSION,
              "run_seconds": {"aaa": 100.0, "bbb": 60.0, "ccc_to_0.5": 3.0}}
    _cached("runs", "aaa")
    shown = progress.Progress(_Bar(), "li2020/fig1a", record, tmp_path / "progress.json")
    shown.show({})
    assert shown.bar.text == "li2020/fig1a, ETA 63 s (recorded compute of the 2 runs still missing)"
    _cached("to_target", "ccc_to_0.5")  # finished meanwhile
    shown.show({"runs": 2, "from_cache": 1, "to_compute": 2, "computed": 1})
    assert shown.bar.text == ("li2020/fig1a, computing runs 1/2, ETA 60 s (recorded compute of the 1 runs "
                              "still missing)")
    assert "31 s" not in shown.bar.text
    older = {"profile": "smoke", "wall_time_s": 31.0, "runs": 10, "runs_compute_s": 600.0}  # no run_seconds
    shown = progress.Progress(_Bar(), "li2020/fig1a", older, tmp_path / "progress.json")
    shown.show({"runs": 7, "from_cache": 6, "to_compute": 4, "computed": 1})
    assert shown.bar.text == ("li2020/fig1a, computing runs 1/4, ETA 3 min (mean recorded compute of a run × "
                              "3 runs left)")
    stale = older | {"run_seconds": record["run_seconds"]}  # names of another cache VERSION: keyed otherwise now
    shown = progress.Progress(_Bar(), "li2020/fig1a", stale, tmp_path / "progress.json")
    shown.show({"runs": 7, "from_cache": 6, "to_compute": 4, "computed": 1})
    assert shown.bar.text.endswith("(mean recorded compute of a run × 3 runs left)")


def test_eta_drops_recorded_runs_once_the_computed_ones_are_others(tmp_path):
    """Charles & Konečný's CPU-scale Figure 6, resumed after its FEMNIST model's numerics changed, showed "ETA
    237 min (recorded compute of the 20 runs still missing)" for hours: the record names its runs under the old
    numerics, so none of them is ever cached. Once runs are computed and none of the record's appears, the ETA is
    the record's mean compute of a run times the runs left."""
    record = {"profile": "paper", "wall_time_s": 900.0, "runs": 3, "cache_version": keys.VERSION,
              "run_seconds": {"old1": 600.0, "old2": 600.0, "old3": 900.0}}
    shown = progress.Progress(_Bar(), "charles2021/fig6", record, tmp_path / "progress.json")
    shown.show({"runs": 0, "from_cache": 0, "to_compute": 5, "computed": 0})
    assert shown.bar.text.endswith("ETA 35 min (recorded compute of the 3 runs still missing)")  # nothing known yet
    shown.show({"runs": 1, "from_cache": 0, "to_compute": 5, "computed": 1})
    assert shown.bar.text == ("charles2021/fig6, computing runs 1/5, ETA 47 min (mean recorded compute of a run × "
                              "4 runs left)")
    shown = progress.Progress(_Bar(), "charles2021/fig6", record, tmp_path / "progress.json")
    _cached("runs", "old2")  # the run computed is one of the record's: the record's runs are what is left
    shown.show({"runs": 1, "from_cache": 0, "to_compute": 3, "computed": 1})
    assert shown.bar.text.endswith("ETA 25 min (recorded compute of the 2 runs still missing)")


def test_eta_with_overrides_reads_only_the_target_record(project):
    """A ``--set`` run (another scale) takes no run count or wall time from the committed figure."""
    record = {"profile": "paper", "wall_time_s": 60.0, "runs": 16}
    (project / "figures" / "notes" / "figA.claims.json").write_text(json.dumps(record))
    target = project / "elsewhere"
    assert progress.previous("notes", "figA", "paper", target) == record  # no overrides: the committed record
    assert progress.previous("notes", "figA", "paper", target, {"rounds": 200}) == {}
    (target / "notes").mkdir(parents=True)
    (target / "notes" / "figA.claims.json").write_text(json.dumps({**record, "runs": 8}))
    assert progress.previous("notes", "figA", "paper", target, {"rounds": 200})["runs"] == 8


def test_report_says_where_a_figures_compute_goes():
    record = {"wall_time_s": 60.0, "runs": 3, "runs_from_cache": 3, "runs_compute_s": 120.0,
              "runs_compute_by_dataset_s": {"small": 30.0, "big": 90.0}}
    assert report._wall(record) == ("60 s (3/3 runs from cache; runs take 120 s from scratch: "
                                    "big 1.5 min (75%), small 0.5 min (25%))")
    assert report._wall({**record, "runs_compute_by_dataset_s": {"big": 120.0}}).endswith("from scratch)")
    one = {**record, "runs_compute_by_dataset_s": {}, "machines": {"Intel(R) Xeon(R), x86_64 AVX512, torch 2.13.0": 3}}
    assert report._wall(one).endswith("from scratch; computed on Intel(R) Xeon(R), x86_64 AVX512, torch 2.13.0)")
    two = {**one, "machines": {"NVIDIA H200, torch 2.13.0": 2, "x86_64": 1}}  # "x86_64": a sidecar of an older format
    assert report._wall(two).endswith("; computed on NVIDIA H200, torch 2.13.0: 2, x86_64: 1)")


def test_paper_compute_counts_each_run_once():
    shared = {"run_seconds": {"a": 10.0, "b": 20.0}, "runs_compute_s": 30.0}
    records = [shared, dict(shared), {"run_seconds": {"c": 5.0}, "runs_compute_s": 5.0}, {"runs_compute_s": 7.0}]
    assert report._unique_compute(records) == 42.0  # a and b once, c, and an unkeyed record's total



def test_asyncio_reports_go_to_the_kernel_log_while_a_notebook_runs(tmp_path, capsys):
    """After Ctrl-C, papermill's cell task may still die with the kernel; asyncio's report of it goes
    to the notebook's kernel log, not the terminal (the one-line promise of the Ctrl-C test)."""
    import logging

    from replicate.cli import runner

    log, logger = tmp_path / "notes_figA.kernel.log", logging.getLogger("asyncio")
    runner._route_asyncio_log(log)
    try:
        logger.error("Task exception was never retrieved", exc_info=RuntimeError("Kernel died"))
        assert "Kernel died" in log.read_text() and "Kernel died" not in capsys.readouterr().err
    finally:
        runner._route_asyncio_log(None)
    assert logger.propagate and not logger.handlers  # the batch's end restores the default


def test_two_runs_of_one_notebook_at_once_both_succeed(project, monkeypatch):
    """Two batches of the same notebook on one build folder: each stages into its own folder,
    both publish, and no staging folder is left behind."""
    import threading

    import papermill

    _notebook(project / "notebooks", "notes_figA", GOOD)
    both_published = threading.Barrier(2)

    def execute(_input, _output, parameters, **_):  # publishes its own data, then waits for the other run's
        import pandas as pd

        publish(None, pd.DataFrame({"run": [threading.get_ident()]}), [check("y is two", True, "y = 2")],
                paper="notes", figure="figA", profile=parameters["profile"], out_dir=parameters["out_dir"])
        try:
            both_published.wait(timeout=10)
        except threading.BrokenBarrierError:
            pass

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    failed = []

    def batch(out):
        out.mkdir()
        (out / "run").write_text(str(threading.get_ident()))
        try:
            failed.append(runner.run(["notes/figA"], "smoke", {"out_dir": str(out)}))
        except Exception as exc:  # noqa: BLE001  (a clash may raise instead of counting a failure)
            failed.append(repr(exc))

    threads = [threading.Thread(target=batch, args=(project / f"out{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [0, 0]
    for out in (project / "out0", project / "out1"):  # each batch published its own run's files
        assert (out / "notes" / "figA.csv").read_text().split() == ["run", (out / "run").read_text()]
    assert not (settings.current().build / "staging").exists()
    import os  # each handed its kernel its settings: neither wrote them into the process's environment

    assert not {"REPLICATE_PROGRESS", "REPLICATE_STOP_FILE", "REPLICATE_CACHE"} & set(os.environ)


def _never_runs(monkeypatch):
    import papermill

    def never(*args, **kwargs):
        raise AssertionError("a notebook ran although its out_dir was refused")
    monkeypatch.setattr(papermill, "execute_notebook", never)


def test_no_override_writes_into_the_committed_figures(project, monkeypatch, capsys):
    """``--set out_dir=figures`` (any folder inside figures/, relative or not, any profile) is refused
    in one line before anything runs; only the documented reduced-scale commands write figures/cpu_scale."""
    from replicate.cli.main import main
    from replicate.experiments.li2020.fig2 import Fig2Config

    _notebook(project / "notebooks", "notes_figA", GOOD)
    monkeypatch.chdir(project)
    _never_runs(monkeypatch)
    for profile, out_dir in [("smoke", "figures"), ("smoke", "figures/notes"), ("paper", "figures"),
                             ("paper", str(project / "figures" / "cpu_scale")), ("smoke", "build/../figures")]:
        with pytest.raises(ReplicateError, match="inside the committed figures/"):
            runner.run(["notes/figA"], profile, {"out_dir": out_dir})
    assert main(["figures", "notes/figA", "--set", "out_dir=figures"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not any(p.is_file() for p in (project / "figures").rglob("*"))
    with pytest.raises(ReplicateError, match="inside the committed figures/"):  # interactive: config cell
        Fig2Config.for_profile("smoke", out_dir=project / "figures" / "li2020")
    import pandas as pd

    with pytest.raises(ReplicateError, match="inside the committed figures/"):  # and publish itself
        publish(None, pd.DataFrame({"x": [1]}), [], paper="notes", figure="figA", profile="paper",
                out_dir=project / "figures")


def test_a_damaged_data_cache_met_in_a_notebook_is_said_on_the_terminal(project, monkeypatch, capsys):
    """Issue #37 item 4: a corrupt derived data cache is rebuilt with a warning the kernel prints into its
    notebook; the terminal of the batch hears of it too, in one line naming the file."""
    monkeypatch.setenv("REPLICATE_DATA", str(project / "data"))
    damage = ("import numpy as np\nfrom replicate.data import cache\nf = cache.path('toy', 'k')\n"
              "cache.save(f, {'a': np.arange(3)})\nf.write_bytes(f.read_bytes()[:40])\nassert cache.load(f) is None\n")
    _notebook(project / "notebooks", "notes_figA", damage + GOOD)
    assert runner.run(["notes/figA"], "smoke", {"out_dir": str(project / "out")}) == 0
    line, = [line for line in capsys.readouterr().err.splitlines() if "corrupt cache" in line]
    assert line.startswith("warning: ") and "toy-k.npz" in line and "rebuilding it" in line


def test_a_refusal_in_a_notebook_cell_is_its_one_line(tmp_path):
    """A ``ReplicateError`` raised in a kernel that imported the package is reported as its message alone,
    so papermill (which copies the kernel's report into its own error) and JupyterLab show one line, not the
    30-line traceback through the library a refused ``out_dir`` gave (issue #37 item 3)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    _notebook(tmp_path, "refused", "import replicate\nfrom replicate.core.errors import ReplicateError\n"
                                   "def config():\n    raise ReplicateError('out_dir x is refused: do y')\nconfig()")
    with pytest.raises(PapermillExecutionError) as raised:
        papermill.execute_notebook(str(tmp_path / "refused.ipynb"), str(tmp_path / "out.ipynb"),
                                   kernel_name="python3", progress_bar=False)
    assert raised.value.ename == "ReplicateError"
    assert raised.value.traceback == ["ReplicateError: out_dir x is refused: do y"]


def test_reduced_scale_commands_still_write_figures_cpu_scale(project, monkeypatch, capsys):
    """reduced.REDUCED's commands (--profile paper ... --set out_dir=figures/cpu_scale) keep working, and say
    that what they write is a labelled record (not "not figures/", which it is inside)."""
    from replicate.report import reduced

    from replicate.experiments import requirements

    paper, figure = reduced.REDUCED[0].key.split("/")[1:]
    _notebook(project / "notebooks", f"{paper}_{figure}", GOOD.replace('"notes"', f'"{paper}"')
              .replace('"figA"', f'"{figure}"'))
    monkeypatch.setattr(requirements, "blocked", lambda *args: {})  # this stand-in notebook reads no data
    monkeypatch.chdir(project)
    assert runner.run([f"{paper}/{figure}"], "paper", {"out_dir": "figures/cpu_scale"}) == 0
    record = json.loads((project / "figures" / "cpu_scale" / paper / f"{figure}.claims.json").read_text())
    assert record["scale"] == "reduced"  # staged under cpu_scale: the title and the record say so
    assert not (settings.current().build / "staging").exists()
    assert "a labelled record" in capsys.readouterr().err
    with pytest.raises(ReplicateError, match="inside the committed figures/"):
        runner.run([f"{paper}/{figure}"], "smoke", {"out_dir": "figures/cpu_scale"})


def test_a_modified_command_writes_figures_modified_labelled_modified(project, monkeypatch):
    """A labelled run at the paper's scale with a setting changed (report.reduced's ``figures/modified`` entries,
    e.g. STEM's second grid) is recorded as modified, not reduced; a figure not listed there is refused."""
    from replicate.report import reduced

    monkeypatch.setattr(reduced, "REDUCED", (reduced.Reduced("modified/grid/notes/figA", "figA, another grid",
                                                             "the paper's", "python -m replicate figures notes/figA "
                                                             "--profile paper --set out_dir=figures/modified/grid"),))
    assert reduced.REDUCED[0].modified and not reduced.REDUCED[0].knobs
    _notebook(project / "notebooks", "notes_figA", GOOD)
    _notebook(project / "notebooks", "notes_figB", GOOD.replace("figA", "figB"))
    monkeypatch.chdir(project)
    assert runner.run(["notes/figA"], "paper", {"out_dir": "figures/modified/grid"}) == 0
    record = json.loads((project / "figures" / "modified" / "grid" / "notes" / "figA.claims.json").read_text())
    assert record["scale"] == "modified"
    assert not (settings.current().build / "staging").exists()
    with pytest.raises(ReplicateError, match="inside the committed figures/"):
        runner.run(["notes/figB"], "paper", {"out_dir": "figures/modified/grid"})


def test_an_unwritable_out_dir_is_one_line_before_anything_runs(project, monkeypatch, capsys):
    from replicate.cli.main import main
    from replicate.experiments.li2020.fig2 import Fig2Config

    _notebook(project / "notebooks", "notes_figA", GOOD)
    _notebook(project / "notebooks", "notes_figB", GOOD)
    _never_runs(monkeypatch)
    blocked = project / "a_file"
    blocked.write_text("not a folder")
    bad = blocked / "out"
    with pytest.raises(ReplicateError, match=f"cannot write into {bad}"):
        runner.run(["notes"], "smoke", {"out_dir": str(bad)})
    assert main(["figures", "notes", "--set", f"out_dir={bad}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot write into {bad}")
    with pytest.raises(ReplicateError, match="cannot write into"):  # interactive: the config cell, before compute
        Fig2Config.for_profile("smoke", out_dir=bad)
    monkeypatch.setenv("REPLICATE_BUILD", str(blocked / "build"))  # the default build/figures, unwritable
    with pytest.raises(ReplicateError, match="cannot write into"):
        Fig2Config.for_profile("smoke", out_dir=None)
    assert Fig2Config.for_profile("smoke") == Fig2Config.smoke()  # without out_dir: no check (library use)


def test_time_budget_is_a_duration_checked_before_anything_runs(project, monkeypatch, capsys):
    from replicate.cli import budget
    from replicate.cli.main import main

    assert [budget.parse(text) for text in ("25m", "90s", "1h30m", "1.5h", " 2m30s ")] == [1500, 90, 5400, 5400, 150]
    assert [budget.describe(s) for s in (90, 1500, 5400, 3600)] == ["90 s", "25 min", "1 h 30 min", "1 h"]
    for bad in ("", "25", "m", "5x", "0s", "-5m", "30s5m"):
        with pytest.raises(ReplicateError, match="--time-budget"):
            budget.parse(bad)
    _notebook(project / "notebooks", "notes_figA", GOOD)
    _never_runs(monkeypatch)
    assert main(["figures", "notes/figA", "--time-budget", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--time-budget expects a duration such as 25m" in err[0]


def _fake_executor(monkeypatch, bodies):
    """papermill.execute_notebook, as each notebook's ``bodies[name](parameters)`` does it."""
    import papermill

    def execute(input_path, _output, parameters, **_):
        bodies[input_path.rsplit("/", 1)[-1].removesuffix(".ipynb")](parameters)
    monkeypatch.setattr(papermill, "execute_notebook", execute)


def _publish(figure):
    def body(parameters):
        import pandas as pd

        publish(None, pd.DataFrame({"x": [1]}), [check("x is one", True, "1")], paper="notes", figure=figure,
                profile=parameters["profile"], out_dir=parameters["out_dir"])
    return body


def test_time_budget_stops_the_running_notebook_as_ctrl_c_does(project, monkeypatch, capsys):
    """The deadline interrupts the notebook that runs then: one line, exit status 75, the notebooks that
    finished before it published (and REPLICATION.md written), the interrupted one untouched."""
    import time

    from replicate.cli import budget
    from replicate.cli.main import main

    for name in ("notes_figA", "notes_figB", "notes_figC"):
        _notebook(project / "notebooks", name, GOOD)
    committed_b = project / "figures" / "notes" / "figB.csv"
    committed_b.write_text("x\nbefore\n")
    _fake_executor(monkeypatch, {"notes_figA": _publish("figA"), "notes_figB": lambda _: time.sleep(30),
                                 "notes_figC": _publish("figC")})
    monkeypatch.setattr(budget, "GRACE_S", 1.0)  # figB ignores the request to save: the grace runs out whole
    start = time.monotonic()
    assert main(["figures", "notes/figA", "notes/figB", "notes/figC", "--profile", "paper",
                 "--time-budget", "4s"]) == budget.STATUS == 75  # figA takes well under 4 s
    assert time.monotonic() - start < 20 + budget.GRACE_S  # the deadline first asks runs in flight to save
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines()
             if line.strip() and "figures (paper)" not in line and not line.startswith("done ")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("time budget of 4 s spent during notes/figB: its finished runs are cached in")
    assert "finished and saved: notes/figA; not started: notes/figC; rerun the same command" in lines[0]
    assert (project / "figures" / "notes" / "figA.csv").exists() and "notes/figA" in (project / "REPLICATION.md").read_text()
    assert committed_b.read_text() == "x\nbefore\n" and not (project / "figures" / "notes" / "figC.csv").exists()
    assert not (settings.current().build / "staging").exists()


def test_a_notebook_ending_as_the_budget_runs_out_is_published(project, monkeypatch):
    """An interrupt sent as a notebook ends is taken before publishing, not in the middle of it; the
    next notebook does not start."""
    import time

    from replicate.cli.budget import BudgetSpent

    _notebook(project / "notebooks", "notes_figA", GOOD)
    _notebook(project / "notebooks", "notes_figB", GOOD)

    def swallows_the_interrupt(parameters):
        try:
            time.sleep(30)
        except KeyboardInterrupt:  # as a cell that catches it and finishes anyway
            pass
        _publish("figA")(parameters)

    _fake_executor(monkeypatch, {"notes_figA": swallows_the_interrupt, "notes_figB": _publish("figB")})
    monkeypatch.setattr("replicate.cli.budget.GRACE_S", 1.0)  # figA ignores the request to save: the grace runs out
    with pytest.raises(BudgetSpent, match="spent between notebooks; finished and saved: notes/figA; not started: "
                                          "notes/figB"):
        runner.run(["notes"], "smoke", time_budget=1.0)
    assert (settings.current().build / "figures" / "notes" / "figA.csv").exists()
    assert not (settings.current().build / "figures" / "notes" / "figB.csv").exists()


def test_with_a_budget_figures_whose_runs_are_all_cached_go_first(project):
    for name in ("notes_figA", "notes_figB", "notes_figC"):
        _notebook(project / "notebooks", name, GOOD)
    record = {"profile": "paper", "wall_time_s": 5.0, "run_seconds": {"aaa": 100.0, "bbb_to_0.5": 3.0},
              "cache_version": keys.VERSION}
    (project / "figures" / "notes" / "figC.claims.json").write_text(json.dumps(record))
    (project / "figures" / "notes" / "figA.claims.json").write_text(json.dumps({**record, "runs_compute_s": 9.0}
                                                                               | {"run_seconds": {"ccc": 1.0}}))
    notebooks = runner.resolve(["notes"])
    order = lambda: [nb.figure for nb in runner.ready_first(notebooks, "paper", project / "figures", {})]  # noqa: E731
    assert order() == ["figA", "figB", "figC"]  # nothing cached: the order given
    for folder, name in (("runs", "aaa"), ("to_target", "bbb_to_0.5")):
        _cached(folder, name)
    assert order() == ["figC", "figA", "figB"]  # figC only re-plots
    assert [nb.figure for nb in runner.ready_first(notebooks, "smoke", project / "figures", {})] == \
        ["figA", "figB", "figC"]  # its record is of the paper profile


def test_a_spent_budget_first_asks_runs_in_flight_to_save_then_interrupts():
    """At the deadline the runs in flight are asked to save at their round boundary (``on_deadline``: the
    stop file of runs.checkpoints); Ctrl-C follows ``grace`` seconds later if the notebook still runs."""
    import time

    from replicate.cli.budget import Budget

    asked = []
    budget = Budget(0.3, on_deadline=lambda: asked.append(time.monotonic()), grace=1.0)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with budget.watching():
            time.sleep(10)
    assert len(asked) == 1 and 0.25 < asked[0] - start < 1.0
    assert 1.2 < time.monotonic() - start < 5 and budget.fired


def test_a_cut_json_list_in_set_is_one_line_that_shows_the_right_form(capsys):
    from replicate.cli.main import main

    assert main(["figures", "li2020/fig2", "--set", "local_steps=[1,5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a whole JSON list" in err[0] and "--set 'local_steps=[1, 5]'" in err[0]
