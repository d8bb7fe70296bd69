"""Where the checkout's own folders are: the repository, its committed figures and notebooks. Folders a user
sets (build, cache, data, ledger) are settings: ``replicate.core.settings``."""
from __future__ import annotations

import os
from pathlib import Path

from replicate.core.errors import ReplicateError

REPO = Path(__file__).resolve().parents[2]


# The folders of figures/ that hold labelled records (report.reduced), counted nowhere: runs below the paper's scale,
# and runs at the paper's scale with a setting changed. Where a figure is published says its scale.
REDUCED_FOLDER, MODIFIED_FOLDER = "cpu_scale", "modified"
SCALE_OF_FOLDER = {REDUCED_FOLDER: "reduced", MODIFIED_FOLDER: "modified"}


def committed_figures_refused(folder) -> ReplicateError:
    """The one-line refusal of an ``out_dir`` inside figures/ that only a paper-profile run (or a labelled command)
    may write."""
    return ReplicateError(
        f"out_dir {folder} is inside the committed figures/: only `python -m replicate figures --profile paper` "
        "without --set writes there (and the labelled commands of replicate/report/reduced.py, into "
        "figures/cpu_scale or figures/modified); choose another folder, or leave out_dir unset for build/figures")


def figures_dir() -> Path:
    """Committed paper-scale outputs."""
    return REPO / "figures"


def notebooks_dir() -> Path:
    return REPO / "notebooks"


def labelled_folder(path: str | os.PathLike) -> str | None:
    """The labelled folder of figures/ (``REDUCED_FOLDER`` or ``MODIFIED_FOLDER``) that ``path`` is or lies in,
    else None."""
    figures = figures_dir()
    return next((folder for folder in SCALE_OF_FOLDER if within(path, figures / folder)), None)


def within(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """True when ``path`` is ``root`` or lies under it, once both are resolved (``..``, links, cwd)."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())
