"""Project-level promises: dependency lists agree, import stays light, notebooks stay thin."""
import ast
import json
import re
import subprocess
import sys

import pytest
from pathlib import Path

from replicate.core import paths

NOTEBOOKS = sorted(paths.notebooks_dir().glob("*.ipynb"))


def _pins(lines):
    return {line.strip().lstrip("- ").strip() for line in lines
            if re.match(r"^\s*-?\s*[A-Za-z0-9_.\[\]-]+==", line)}


def test_environment_yml_and_pip_requirements_agree():
    env = _pins((paths.REPO / "environment.yml").read_text().splitlines())
    pip = _pins((paths.REPO / "requirements.txt").read_text().splitlines())
    pip |= _pins((paths.REPO / "requirements-vision.txt").read_text().splitlines())
    pip |= _pins((paths.REPO / "requirements-ray.txt").read_text().splitlines())
    assert env == pip
    names = {p.split("==")[0] for p in pip}
    assert {"jupyterlab", "papermill", "numpy", "torch", "torchvision", "matplotlib", "seaborn",
            "pytest", "nbval", "ray[default]"} <= names
    ray = next(p for p in pip if p.startswith("ray"))  # the pyproject extra pins the same Ray
    assert f'ray = ["{ray}"]' in (paths.REPO / "pyproject.toml").read_text()


def test_import_does_not_load_torchvision_or_data():
    code = ("import sys, replicate, replicate.data, replicate.fl.engine, replicate.experiments.li2020.table2,"
            " replicate.experiments.li2020.fig2;"
            "print('torchvision' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_ci_runs_the_readme_test_command():
    readme = (paths.REPO / "README.md").read_text()
    ci = (paths.REPO / ".ci" / "run").read_text()
    command = re.search(r"^make test$", ci, re.M)
    assert command and "make test" in readme


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_papermill_sees_the_notebook_parameters(path):
    import papermill

    from replicate.experiments import catalog, knobs

    declared = papermill.inspect_notebook(str(path))
    assert {"profile", "out_dir"} <= set(declared)
    assert declared["profile"]["default"] == '"smoke"'
    paper, _, figure = path.stem.partition("_")
    # every knob reaches papermill (an "=" in a comment once hid two of them from its parser)
    assert set(knobs.names(catalog.config_class(f"{paper}/{figure}"))) <= set(declared)
    # and the paper profile, as built from them, is the paper's: nothing labelled "modified" (report.claims)
    assert catalog.config_class(f"{paper}/{figure}").for_profile("paper").changed() == {}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_thin_and_parameterized(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    src = ["".join(c["source"]) for c in code]
    params = [s for c, s in zip(code, src) if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and "profile" in params[0] and "out_dir" in params[0]
    assert len(code) <= 8
    assert not any(re.search(r"^\s*(def|class|for|while)\s", s, re.M) for s in src)
    assert all(not c.get("outputs") or "NBVAL_CHECK_OUTPUT" in s for c, s in zip(code, src))
    assert "publish(" in src[-1]  # ends with the claims cell
    assert "config=config" in src[-1]  # so a paper-profile run with edited knobs is labelled "modified"
    # and the figure shown inline says so too, before the claims cell publishes it
    assert any(s.startswith("fig = ") and "claims.label(fig, profile, config, out_dir)" in s for s in src)
    assert nb["cells"][0]["cell_type"] == "markdown"
    paper, _, figure = path.stem.partition("_")
    assert nb["metadata"].get("replicate", {}).get("figure", figure) == figure
    # every repository file its markdown names in code quotes (a spec, a module) exists: a clone has no shared/
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    named = re.findall(r"`((?:docs|replicate|figures|notebooks|data|tests)/[\w./-]+\.(?:md|py|ipynb|csv|json))`",
                       markdown)
    assert all((paths.REPO / name).exists() for name in named), [n for n in named if not (paths.REPO / n).exists()]
    assert "shared/" not in markdown


def test_the_figures_page_lists_every_figure_notebook():
    """The README links docs/figures.md, whose table names every notebook and the command that regenerates it."""
    page = (paths.REPO / "docs" / "figures.md").read_text()
    assert "docs/figures.md" in (paths.REPO / "README.md").read_text()
    missing = [p.name for p in NOTEBOOKS if f"notebooks/{p.name}" not in page]
    assert not missing, f"add these notebooks to the figures table of docs/figures.md: {missing}"


def test_relative_locations_from_the_environment_are_made_absolute(monkeypatch, tmp_path):
    """`REPLICATE_BUILD=build/x make …`: the runner's kernels start in notebooks/, so the folder the
    command means must reach them absolute (once it reached them relative and the guard's cache landed in
    notebooks/build/, where nothing cleaned it)."""
    import os

    from replicate.core import settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REPLICATE_BUILD", "build/x")
    monkeypatch.delenv("REPLICATE_CACHE", raising=False)
    read = settings.Settings.read()
    assert read.build == tmp_path / "build" / "x" and read.cache == tmp_path / "build" / "x" / "cache"
    elsewhere = tmp_path / "notebooks"
    elsewhere.mkdir()
    child = subprocess.run([sys.executable, "-c", "from replicate.core import settings; "
                            "print(settings.current().cache)"],  # as the batch runner starts a kernel
                           cwd=elsewhere, env=settings.child_environment(read), capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(tmp_path / "build" / "x" / "cache")
    assert os.environ["REPLICATE_BUILD"] == "build/x"  # this process's environment is left alone
    handed = settings.child_environment(read.replace(progress_file="p.json", workers=None))
    assert handed["REPLICATE_PROGRESS"] == str(tmp_path / "p.json") and "REPLICATE_WORKERS" not in handed
    assert handed["PATH"] == os.environ["PATH"]  # the rest of the environment as it is


def _environment_reads(tree) -> list[int]:
    """Lines of ``tree`` that read the environment: ``os.getenv``, and every use of ``os.environ`` but a write
    (``os.environ[...] = …``, ``del``, ``.pop``, ``.setdefault``, ``.update``: the way a process sets a variable
    for a library it calls): ``.get``, ``.items()``, ``os.environ[...]`` read, ``in os.environ``, ``os.environ`` as
    a value."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "getenv":
            found.append(node.lineno)
        if not (isinstance(node, ast.Attribute) and node.attr == "environ"):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
            continue  # os.environ[...] = …, del os.environ[...]
        if isinstance(parent, ast.Attribute) and parent.attr in ("pop", "setdefault", "update"):
            continue
        found.append(node.lineno)
    return found


def test_the_environment_is_read_in_one_module_and_every_variable_is_a_setting():
    """Issue #41 item 4: core/settings.py is the one reader of the environment (``settings.VARIABLES``); the
    package names no variable it does not declare there, and each is documented for users."""
    from replicate.core import settings

    readers, named = {}, set()
    for path in (paths.REPO / "replicate").rglob("*.py"):
        text = path.read_text()
        if lines := _environment_reads(ast.parse(text)):
            readers[str(path.relative_to(paths.REPO))] = lines
        named |= set(re.findall(r"\b(REPLICATE_[A-Z_]+|RAY_ADDRESS)\b", text))
    assert set(readers) == {"replicate/core/settings.py"}, readers
    assert named == set(settings.VARIABLES), named ^ set(settings.VARIABLES)
    assert {field for field, _ in settings.VARIABLES.values()} == {f.name for f in
                                                                  __import__("dataclasses").fields(settings.Settings)}
    assert "docs/settings.md" in (paths.REPO / "README.md").read_text()  # the README links the users' table
    page = (paths.REPO / "docs" / "settings.md").read_text().split("## Environment variables")[1].split("\n## ")[0]
    assert [name for name in settings.VARIABLES if f"`{name}`" not in page] == []  # each documented for users
    assert sorted(_environment_reads(ast.parse(
        "import os\nos.environ.get('A'); os.getenv('B'); os.environ['C']\n'D' in os.environ\nos.environ['E'] = '1'\n"
        "dict(os.environ.items()); x = {**os.environ}\nos.environ.pop('F', None); os.environ.setdefault('G', '1')\n"
        "del os.environ['H']"))) == [2, 2, 2, 3, 5, 5]


def test_settings_are_read_once_at_the_edge_and_handed_down():
    """Issue #41 item 4: below the edge nothing reads the environment. A process reads it once, at its first
    ``current()`` (a kernel) or where ``python -m replicate`` starts (which checks and exports it for the
    kernels it starts); a caller gives a scope other settings with ``use``; worker processes are handed
    their driver's settings, not its environment."""
    import os

    from replicate.core import settings
    from replicate.runs import executors

    os.environ["REPLICATE_WORKERS"] = "3"  # not through monkeypatch: a change no one announces
    try:
        settings.forget()
        assert settings.current().workers == 3
        os.environ["REPLICATE_WORKERS"] = "5"
        assert settings.current().workers == 3  # read once: this process's settings are what they were
        assert executors.LocalExecutor().workers == 3
        with settings.use(settings.current().replace(workers=2)) as given:
            assert executors.LocalExecutor().workers == 2 and settings.current() is given
        assert settings.current().workers == 3
    finally:
        del os.environ["REPLICATE_WORKERS"]
        settings.forget()
    # a pool worker computes under the settings it was handed as it started: those of its driver's scope
    import concurrent.futures
    import multiprocessing

    given = settings.Settings(workers=4, checkpoint_s=7.0, stop_file="stop.here")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=executors._worker_init, initargs=(given,)) as pool:
        assert pool.submit(settings.current).result() == given
    # a Ray task: the driver's settings on a private instance (this machine), a cluster node's own but the data
    from replicate.runs import ray_executor

    with settings.use(given):
        assert ray_executor.task_settings(None) is given
        carried = ray_executor.task_settings("10.0.0.1:6379")
        assert carried == {"data": given.data, "data_from": given.data_from}
    node = settings.Settings(checkpoint_s=3.0, data_from=None)
    with settings.use(node):  # on the node: its own settings, the driver's data folders
        assert executors.worker_settings(carried) == node.replace(data=given.data, data_from=given.data_from)
        assert executors.worker_settings(given) is given and executors.worker_settings(None) is node
    with pytest.raises(Exception, match="REPLICATE_WORKERS must be a positive whole number"):
        settings.Settings(workers=0)  # checked however they are made, not only when read
    with pytest.raises(Exception, match="REPLICATE_EXECUTOR"):
        settings.current().replace(executor="spark")
    # folders are absolute however given (a kernel starts elsewhere), and the cache follows the build folder
    moved = settings.Settings().replace(build="build/x")
    assert moved.build == Path.cwd() / "build" / "x" and moved.cache == moved.build / "cache"
    assert moved.environment()["REPLICATE_BUILD"] == str(Path.cwd() / "build" / "x") and given.stop_file.is_absolute()


def test_a_thread_of_a_scope_sees_its_settings(tmp_path):
    """The batch runner's progress poll runs in a thread; a thread starts with no context of its own, so it
    is started in its creator's: under ``settings.use`` it reads that scope's cache, not the process's."""
    from replicate.cli import progress
    from replicate.core import settings

    seen = []
    mine = settings.current().replace(cache=tmp_path / "mine")
    with settings.use(mine):
        shown = progress.Progress(None, "li2020/fig2", {}, tmp_path / "progress.json")
    shown.show = lambda state: seen.append(settings.current())  # what the poll calls every 2 s
    shown.thread.start()
    import time

    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.1)
    shown.stop.set()
    shown.thread.join()
    assert seen and all(s is mine for s in seen)


def _imports_paths(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that import ``replicate.core.settings`` or ``replicate.core.paths`` (the settings and
    the checkout's folders), in any form."""
    found, modules = [], ("paths", "settings")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "replicate.core":
            found += [node.lineno for alias in node.names if alias.name in modules]
        elif isinstance(node, ast.ImportFrom) and node.module in [f"replicate.core.{m}" for m in modules]:
            found.append(node.lineno)
        elif isinstance(node, ast.Import):
            found += [node.lineno for alias in node.names if alias.name in [f"replicate.core.{m}" for m in modules]]
    return found


def test_the_engine_floor_reads_no_setting():
    """Issue #41 item 4: models, problems, algorithms and the engine (``replicate/fl``) take everything a run's
    numbers depend on as arguments, the device included; the run layer decides it (``runs.config.run_device``,
    from ``REPLICATE_DEVICE``) and names it in the cache key. Before, ``engine.default_device()`` read the setting."""
    readers = {str(path.relative_to(paths.REPO)): lines for path in (paths.REPO / "replicate" / "fl").rglob("*.py")
               if (lines := _imports_paths(ast.parse(path.read_text())))}
    assert readers == {}, readers
    assert _imports_paths(ast.parse("from replicate.core import rng, paths\nimport replicate.core.paths\n"
                                    "from replicate.core.paths import REPO\nfrom replicate.core import rng\n"
                                    "from replicate.core import settings\nimport replicate.core.settings\n"
                                    "from replicate.core.settings import current")) == [1, 2, 3, 5, 6, 7]


def test_every_setting_is_checked_at_the_edge_in_one_line(monkeypatch, capsys):
    from replicate.cli.main import main
    from replicate.core import settings

    monkeypatch.setenv("REPLICATE_CHECKPOINT_S", "soon")
    monkeypatch.setenv("REPLICATE_DEVICE", "tpu")
    assert main(["figures", "--list"]) == 2  # any command, before it does anything
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "REPLICATE_CHECKPOINT_S must be" in err and "REPLICATE_DEVICE must be" in err
    monkeypatch.delenv("REPLICATE_CHECKPOINT_S")
    monkeypatch.delenv("REPLICATE_DEVICE")
    monkeypatch.setenv("REPLICATE_WORKERS", "0")
    assert main(["figures", "--list", "--workers", "2"]) == 0  # a command's flag replaces the variable it sets
    capsys.readouterr()
    monkeypatch.setenv("REPLICATE_WORKERS", "2")
    monkeypatch.setenv("REPLICATE_DATA_FROM", "/nonexistent/folder")
    assert main(["figures", "--list"]) == 2 and "REPLICATE_DATA_FROM=/nonexistent/folder" in capsys.readouterr().err
    assert settings.Settings.read(skip=("REPLICATE_DATA_FROM",)).data_from != "/nonexistent/folder"  # `data fetch --from`
    monkeypatch.delenv("REPLICATE_DATA_FROM")
    monkeypatch.setenv("REPLICATE_DEVICE", "tpu")  # a flag's bad value is named in the same line as the variables'
    assert main(["figures", "--list", "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "REPLICATE_DEVICE must be" in err and "--workers must be" in err  # the flag typed
    monkeypatch.delenv("REPLICATE_DEVICE")
    assert settings.current().checkpoint_s == 120.0 and settings.current().workers == 2


def test_listing_and_naming_figures_load_no_heavy_floor():
    """`figures --list` and an unknown figure name answer before torch, pandas or papermill are imported."""
    import subprocess
    import sys

    code = ("import sys; from replicate.cli.main import main; main(['figures', '--list']); "
            "assert main(['figures', 'nosuch/fig']) == 2; "
            "heavy = [m for m in ('torch', 'pandas', 'papermill', 'matplotlib') if m in sys.modules]; "
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "li2020/fig2" in out.stdout and "unknown figure 'nosuch/fig'" in out.stderr


def test_modules_stay_readable_sizes():
    """docs/design.md, "Modules a reader can hold": no module of the package over 400 lines, and each
    algorithm's module (one per registered algorithm) within 250, so that an update reads on one screen or two."""
    from replicate.fl.algorithms import ALGORITHMS

    sizes = {str(path.relative_to(paths.REPO)): len(path.read_text().splitlines())
             for path in (paths.REPO / "replicate").rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 400} == {}
    algorithm_files = {sys.modules[cls.__module__].__file__ for cls in ALGORITHMS.values()}
    assert len(algorithm_files) >= 5
    long = {path: n for path in algorithm_files if (n := len(Path(path).read_text().splitlines())) > 250}
    assert long == {}


def test_figures_list_shows_the_figures_named_and_refuses_an_unknown_name(capsys):
    """`figures --list li2020` lists that paper's figures only; a misspelt name is refused as it is without --list."""
    from replicate.cli.main import main

    assert main(["figures", "--list", "li2020"]) == 0
    keys = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert keys and all(key.startswith("li2020/") for key in keys) and "li2020/fig2" in keys
    assert main(["figures", "--list", "li2099"]) == 2
    assert "unknown figure 'li2099'; did you mean li2020?" in capsys.readouterr().err


def test_the_command_says_its_version(capsys):
    import replicate
    from replicate.cli.main import main

    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0 and capsys.readouterr().out.strip() == f"replicate {replicate.__version__}"


def test_an_unknown_option_is_refused_naming_the_command_whose_help_lists_them(capsys):
    from replicate.cli.main import main

    for argv, prog in ((["arena", "--frobnicate"], "python -m replicate arena"),
                       (["figures", "li2020/fig2", "--frob"], "python -m replicate figures")):
        with pytest.raises(SystemExit) as exit:
            main(argv)
        err = capsys.readouterr().err.strip()
        assert exit.value.code == 2 and err == (f"{prog}: error: unrecognized arguments: {argv[-1]} "
                                                f"(`{prog} --help` lists its options)"), err
