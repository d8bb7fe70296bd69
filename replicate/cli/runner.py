"""Run figure notebooks headlessly with papermill and publish their outputs.

Each notebook run writes into a staging folder of its own (two batches may run the same
notebook at once); only when it finishes without error are its files (PNG, PDF, CSV, claims)
moved into ``figures/`` — and only for the paper profile (or ``--set out_dir``, which may not
point inside ``figures/``). A failed notebook is reported with its error and leaves the
committed figures untouched; the batch carries on and exits non-zero at the end.
Runs inside notebooks are cached (``replicate.runs.cache``), so rerunning an
interrupted batch resumes where it stopped. Ctrl-C (SIGINT) and SIGTERM (a job at its time limit, a
preempted machine) ask the runs in flight to save at their next round boundary and stop (``cli.signals``); the
command then exits with 130 or 75. With a time budget (``replicate.cli.budget``) the batch stops at its
deadline the same way, after publishing what finished before.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

from tqdm.auto import tqdm

from replicate.core import paths
from replicate.core import settings
from replicate.cli.budget import Budget, BudgetSpent, Terminated, describe
from replicate.cli.progress import Progress, previous
from replicate.core.paths import committed_figures_refused
from replicate.report.claims import PROFILES
from replicate.report.coverage import held
from replicate.core.fileio import atomic_file, atomic_write_text, check_writable
from replicate.core.errors import ReplicateError
from replicate.experiments import catalog, knobs, requirements
from replicate.data import cache as data_cache
from replicate.runs import cache, checkpoints, keys
from replicate.cli.notebooks import FigureNotebook, discover, resolve  # noqa: F401  (runner.resolve, ...)
from replicate.cli.signals import Interrupted, NotStarted, Signals  # noqa: F401  (runner.Interrupted)


def _papermill():
    """papermill, imported without ``rfc3987_syntax``: nbformat validates notebooks with jsonschema, whose format
    checkers import that package, and it compiles about 35 Lark grammars at import — 2 s of every command that
    runs a notebook, for the ``iri`` formats no notebook schema uses (jsonschema leaves out a checker whose package
    cannot be imported; python-jsonschema/jsonschema#1428)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # None: "cannot be imported", which jsonschema expects
    import papermill

    return papermill


def parameters(notebook: FigureNotebook, profile: str, out_dir: Path, overrides: dict) -> dict:
    """Papermill parameters, checked against the notebook's ``parameters`` cell."""
    papermill = _papermill()
    declared = papermill.inspect_notebook(str(notebook.path))
    if not declared:
        raise ReplicateError(f"{notebook.path.name} has no cell tagged 'parameters'")
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise ReplicateError(f"{notebook.key} has no parameter(s) {', '.join(unknown)}; "
                             f"its parameters are: {', '.join(declared)}")
    try:  # type and range of every value, against the figure's config, before anything runs
        if overrides:
            knobs.configure(catalog.config_class(notebook.key), profile, overrides)
    except ReplicateError as exc:
        raise ReplicateError(f"{notebook.key}: {exc}") from None
    return {"profile": profile, "out_dir": str(out_dir), **overrides}


def _reduced_scale(target: Path, profile: str, notebooks: list[FigureNotebook]) -> bool:
    """A documented labelled command (``report.reduced.REDUCED``): a paper-profile run with ``--set`` into
    ``figures/cpu_scale`` (below the paper's scale) or ``figures/modified`` (the paper's scale, a setting changed),
    or a folder of either (e.g. ``figures/cpu_scale/second_grid``), of figures listed there. Those committed runs
    are labelled in REPLICATION.md and never counted; anything else inside ``figures/`` is refused."""
    from replicate.report.reduced import REDUCED

    listed = {item.key for item in REDUCED}
    if profile != "paper" or not paths.labelled_folder(target):
        return False
    folder = target.resolve().relative_to(paths.figures_dir().resolve()).as_posix()
    return all(f"{folder}/{nb.key}" in listed for nb in notebooks)


def _promote(staged: Path, destination: Path) -> list[Path]:
    """Copy the staged files into ``destination``, each through its own temporary file and a rename:
    a reader (or a concurrent batch promoting the same figure) never sees half a file."""
    moved = []
    for src in sorted(p for p in staged.rglob("*") if p.is_file()):
        dest = destination / src.relative_to(staged)
        with atomic_file(dest) as out, open(src, "rb") as data:
            shutil.copyfileobj(data, out)
        moved.append(dest)
    return moved


def _staging(nb: FigureNotebook, labelled: str = "") -> Path:
    """A fresh folder for one run of ``nb``: ``build/staging/<notebook>-<pid>-<random>``, so two batches
    of the same notebook on one build folder never share (or delete) each other's files. A labelled run
    stages under ``build/staging/cpu_scale/`` or ``build/staging/modified/`` (``labelled``): the notebook's
    ``out_dir`` is then what ``publish`` reads the scale from (``claims.scale_of``), so its title and record say
    "reduced" or "modified"."""
    root = settings.current().build / "staging" / labelled
    for _ in range(3):  # a concurrent batch may remove the empty root between our mkdir and mkdtemp
        try:
            root.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=f"{nb.path.stem}-{os.getpid()}-", dir=root))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ReplicateError(f"cannot write into {root}: {exc.strerror or exc}") from None
    raise ReplicateError(f"cannot create a staging folder in {root}")


def _unstage(staging: Path) -> None:
    """Remove one run's staging folder, and ``build/staging`` itself once no other run uses it."""
    shutil.rmtree(staging, ignore_errors=True)
    labelled = staging.parent.name in paths.SCALE_OF_FOLDER
    for folder in (staging.parent, staging.parent.parent) if labelled else (staging.parent,):
        try:
            folder.rmdir()
        except OSError:  # another batch is staging there, or it is gone already
            break


def _kernel_manager(log: Path, given: settings.Settings):
    """A kernel manager whose kernel starts with ``given`` settings (in its environment: the one channel to a
    kernel) and writes its own stderr (TCP warnings, the traceback it logs when the batch is interrupted) to
    ``log`` instead of the batch's terminal."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def _async_start_kernel(self, **kw):
            kw.setdefault("stderr", open(log, "ab"))  # noqa: SIM115  (the kernel process owns it)
            kw["env"] = settings.child_environment(given)
            return await super()._async_start_kernel(**kw)

        start_kernel = _async_start_kernel

    return QuietKernelManager


def _route_asyncio_log(kernel_log: Path | None):
    """Send asyncio's log to the running notebook's kernel log (``None``: back to the default). On Ctrl-C,
    papermill's cell task can still fail with "Kernel died" once the interrupted kernel exits, and asyncio
    prints that orphaned task's traceback when the task is collected, at a moment no ``except`` controls
    (seen in CI about once in five runs); the terminal keeps its one line."""
    logger = logging.getLogger("asyncio")
    for handler in logger.handlers:
        handler.close()
    logger.handlers = [] if kernel_log is None else [logging.FileHandler(kernel_log)]
    logger.propagate = kernel_log is None


@contextmanager
def _papermill_log(signals: Signals, log_output: bool = False):
    """papermill's log: with ``-v`` shown at INFO (each cell, and the notebook's output), which no handler shows by
    default; and dropped once a stop is asked: nbclient logs "Kernel died while waiting for execute reply." when
    the kernel interrupted at a second Ctrl-C exits before it replies, and the command's one line already says
    what happened."""
    def quiet(record) -> bool:  # a logging filter may be a plain callable
        return signals.signum is None

    logger, handler, level = logging.getLogger("papermill"), logging.StreamHandler(sys.stderr), None
    logger.addFilter(quiet)
    if log_output:
        level = logger.level
        logger.setLevel(logging.INFO), logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeFilter(quiet)
        if level is not None:
            logger.setLevel(level), logger.removeHandler(handler)


def run(names: list[str], profile: str = "smoke", overrides: dict | None = None,
        log_output: bool = False, time_budget: float | None = None) -> int:
    """Execute the selected notebooks; returns the number that failed. With ``time_budget`` (seconds),
    the notebooks whose recorded runs are all cached go first (``ready_first``), no notebook starts once
    it is spent and the one running then is asked to stop: its runs in flight save at their next round
    boundary (``runs.checkpoints``), and after ``budget.GRACE_S`` it is interrupted as by Ctrl-C
    (``BudgetSpent``)."""
    if profile not in PROFILES:
        raise ReplicateError(f"--profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    notebooks = resolve(names)
    overrides = dict(overrides or {})
    if "profile" in overrides and overrides.pop("profile") != profile:
        raise ReplicateError("give the profile once, with --profile (--set profile=... disagrees with it)")
    out_dir = overrides.pop("out_dir", None)
    for nb in notebooks:  # validate every parameter before spending time on any notebook
        parameters(nb, profile, Path("."), overrides)
    executed_dir = settings.current().build / "executed" / profile
    # Only a paper-profile run with no overrides may replace the committed figures and REPLICATION.md; the data
    # source is recorded apart (a stand-in labels the figure and makes its row data-limited), not a change of settings
    from replicate.experiments.knobs import FigureConfig

    committed = profile == "paper" and not set(overrides) - set(FigureConfig.RECORDED_APART) and out_dir is None
    target = (Path(out_dir).resolve() if out_dir
              else paths.figures_dir() if committed else settings.current().build / "figures")
    reduced = not committed and _reduced_scale(target, profile, notebooks)
    if not committed and paths.within(target, paths.figures_dir()) and not reduced:
        raise committed_figures_refused(out_dir)
    check_writable(target)  # before any notebook runs: one line, not a traceback after the compute
    if profile == "paper" and not committed:
        tqdm.write(f"writing into {target}: " + ("a labelled record below or beside the paper's settings "
                   "(report.reduced), counted nowhere" if reduced else "not figures/: only an unmodified "
                   "paper-profile run updates the committed figures"), file=sys.stderr)
    if profile == "paper":  # the committed runs computed elsewhere (figures/ledger): read, never recomputed
        from replicate.runs import ledger

        written, _, replaced = ledger.sync()
        if written:
            tqdm.write(f"ledger: {written} committed runs copied into {settings.current().cache}"
                       + (f" ({replaced} cached runs with other numbers moved to replaced/)" if replaced else ""),
                       file=sys.stderr)
    if older := cache.older_entries():
        tqdm.write(f"note: {older} runs in {settings.current().cache} were cached by an older version of the run cache "
                   f"(before VERSION {keys.VERSION}, or before it recorded checksums); they are not read and are "
                   "recomputed when needed "
                   "(`make clean-cache` frees their space)", file=sys.stderr)
    blocked = requirements.blocked([nb.key for nb in notebooks], profile, overrides)  # said before any kernel starts
    if blocked and len(blocked) == len(notebooks):
        raise ReplicateError(f"{', '.join(blocked)} cannot run here: {'; '.join(dict.fromkeys(blocked.values()))}")
    for key, why in blocked.items():  # the others run; these count as failed
        tqdm.write(f"skipped {key}: {why}", file=sys.stderr)
    notebooks = [nb for nb in notebooks if nb.key not in blocked]
    # the runs in flight, in the kernels and their workers, save and stop at a round boundary when asked
    stop = checkpoints.stop_file()
    budget = Budget(time_budget, on_deadline=lambda: checkpoints.request_stop(stop)) if time_budget else None
    try:
        with (settings.use(settings.current().replace(stop_file=stop)), Signals(stop, budget).installed() as signals,
              _papermill_log(signals, log_output)):
            return len(blocked) + _run_all(notebooks, profile, overrides, executed_dir, committed, target, budget,
                                           log_output, signals)
    finally:
        stop.unlink(missing_ok=True)


def _run_all(notebooks, profile, overrides, executed_dir, committed, target, budget, log_output,
             signals: Signals) -> int:
    papermill = _papermill()

    failures, finished = [], []
    if budget is not None:
        notebooks = ready_first(notebooks, profile, target, overrides)
    # a bar only on a terminal: in a log (CI, a batch job) its updates would pile onto one line; the "done" and
    # "FAILED" lines below say the same there, one line a notebook
    bar = tqdm(notebooks, desc=f"figures ({profile})", unit="notebook", file=sys.stderr, disable=None)
    for nb in bar:
        left = notebooks[notebooks.index(nb):]
        if (budget is not None and budget.spent()) or signals.signum is not None:
            raise _stop(None, finished, left, budget, committed, signals)
        # a labelled command (and its --check into build/check/cpu_scale or build/check/modified) stages under its
        # folder's name, which publish reads its scale from
        labelled = next((f for f in paths.SCALE_OF_FOLDER if f in target.parts), "")
        staging = _staging(nb, labelled if profile == "paper" and not committed else "")
        executed_dir.mkdir(parents=True, exist_ok=True)
        progress_file = staging / "progress.json"
        kernel_settings = settings.current().replace(progress_file=progress_file)  # handed to the kernel
        start, started = time.perf_counter(), time.time()
        kernel_log = executed_dir / f"{nb.path.stem}.kernel.log"
        _route_asyncio_log(kernel_log)  # left in place if interrupted: the process is about to exit
        try:
            try:
                with (signals.running(),
                      Progress(bar, nb.key, previous(nb.paper, nb.figure, profile, target, overrides), progress_file),
                      budget.watching() if budget is not None else nullcontext()):
                    papermill.execute_notebook(str(nb.path), str(executed_dir / nb.path.name),
                                               parameters=parameters(nb, profile, staging, overrides),
                                               kernel_name="python3", progress_bar=False, log_output=log_output,
                                               cwd=str(paths.notebooks_dir()),
                                               kernel_manager_class=_kernel_manager(kernel_log, kernel_settings))
            except NotStarted:
                raise _stop(None, finished, left, budget, committed, signals) from None
            except KeyboardInterrupt:
                raise _stop(nb, finished, left[1:], budget, committed, signals) from None
            except Exception as exc:  # papermill re-raises the cell's error; report it and go on
                ename = getattr(exc, "ename", "")
                if ename in ("KeyboardInterrupt", "Checkpointed") or signals.signum is not None:  # asked to stop
                    raise _stop(nb, finished, left[1:], budget, committed, signals,
                                saved=ename == "Checkpointed") from None
                failures.append(nb.key)
                message = getattr(exc, "evalue", None) or str(exc).strip().splitlines()[-1]
                tqdm.write(f"FAILED {nb.key}: {getattr(exc, 'ename', type(exc).__name__)}: {message}\n"
                           f"  executed notebook with the traceback: {executed_dir / nb.path.name}\n"
                           f"  committed figures were left unchanged", file=sys.stderr)
                continue
            finally:
                for name in cache.damaged_since(started):  # the kernel's warning reached its notebook, not here
                    tqdm.write(f"warning: cached run {name} was damaged: moved to "
                               f"{settings.current().cache / 'damaged'} and recomputed, not used", file=sys.stderr)
                for line in data_cache.damaged_since(started):
                    tqdm.write(f"warning: {line}", file=sys.stderr)
            elapsed = time.perf_counter() - start
            claims_file = staging / nb.paper / f"{nb.figure}.claims.json"
            if not claims_file.exists():
                failures.append(nb.key)
                tqdm.write(f"FAILED {nb.key}: the notebook did not publish its claims (no {claims_file.name})",
                           file=sys.stderr)
                continue
            progress_file.unlink(missing_ok=True)
            record = json.loads(claims_file.read_text())
            record["wall_time_s"] = round(elapsed, 1)
            atomic_write_text(claims_file, json.dumps(record, indent=2) + "\n")
            _promote(staging, target)
        finally:  # promoted, failed or interrupted: build/staging is not left behind
            _unstage(staging)
        finished.append(nb.key)
        holding, counted = held(record["claims"], "replication")
        status = (f"{holding}/{counted} replication claims "
                  + ("would hold: smoke scale, not a replication verdict" if profile == "smoke" else "hold"))
        if not counted:  # an analytic figure (consistency checks); the arena, external statements (shown only)
            parts = []
            for kind, words in (("consistency", "consistency checks hold"),
                                ("context", "shown beside the figure agree, not counted")):
                holding, total = held(record["claims"], kind)
                if total:
                    parts.append(f"{holding}/{total} {words}")
            status = "; ".join(["no replication claims"] + parts)
        if record.get("runs_resumed"):  # the rerun of a command cut off: where it went on from
            status += f"; {record['runs_resumed']} runs went on from their checkpoints"
        tqdm.write(f"done   {nb.key} in {elapsed:.0f}s ({status}) -> {target / nb.paper}", file=sys.stderr)
    _route_asyncio_log(None)
    if committed:
        from replicate.report import replication as report

        report.write()
    if failures:
        tqdm.write(f"{len(failures)} notebook(s) failed: {', '.join(failures)}", file=sys.stderr)
    return len(failures)


def ready_first(notebooks: list[FigureNotebook], profile: str, target: Path, overrides: dict) -> list[FigureNotebook]:
    """The order of a batch with a time budget: first the notebooks whose last record at this profile
    names runs that are all in the cache (they only re-plot, so every figure whose runs are there is
    published), then the others; each group in the order given (``resolve``)."""
    def ready(nb: FigureNotebook) -> bool:
        named = cache.recorded_runs(previous(nb.paper, nb.figure, profile, target, overrides))
        return named is not None and all(map(cache.is_cached, named))

    return sorted(notebooks, key=lambda nb: not ready(nb))


def _stop(nb: FigureNotebook | None, finished: list[str], left: list[FigureNotebook], budget: Budget | None,
          committed: bool, signals: Signals | None = None, saved: bool = False) -> KeyboardInterrupt:
    """The exception that ends the batch in ``nb`` (None: between two notebooks; ``saved``: its runs in flight
    saved at their round boundary): ``BudgetSpent`` once the time budget is spent, ``Terminated`` on SIGTERM,
    else (Ctrl-C) ``Interrupted``; a signal that came after the budget stopped the batch leaves it the budget's."""
    signalled = signals is not None and signals.signum is not None and not signals.after_budget
    spent = budget is not None and (budget.fired or (nb is None and budget.spent()))
    if committed and finished:  # what it published before it stopped goes into REPLICATION.md
        from replicate.report import replication as report

        report.write()
    where = (f"during {nb.key}: its finished runs are cached in {settings.current().cache}" if nb
             else "between notebooks")
    if signalled or not spent:
        terminated = signalled and signals.signum == signal.SIGTERM
        if saved and nb is not None:
            where += f", its runs in flight saved at their round boundary in {checkpoints.folder()}"
        done = f"; finished and saved: {', '.join(finished)}" if finished else ""
        return (Terminated if terminated else Interrupted)(
            f"{'terminated (SIGTERM)' if terminated else 'interrupted'} {where}{done}; rerun the same command to "
            "resume (committed figures were not touched)")
    names = [item.key for item in left]
    waiting = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return BudgetSpent(f"time budget of {describe(budget.seconds)} spent {where}; "
                       f"finished and saved: {', '.join(finished) or 'none'}; not started: {waiting or 'none'}; "
                       "rerun the same command to go on (unfinished figures' committed files were not touched)")

