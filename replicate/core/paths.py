"""Where the checkout's own folders are: the repository, its committed figures and notebooks. Folders a user
sets (build, cache, data, ledger) are settings: ``replicate.core.settings``."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def figures_dir() -> Path:
    """Committed paper-scale outputs."""
    return REPO / "figures"


def notebooks_dir() -> Path:
    return REPO / "notebooks"


def within(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """True when ``path`` is ``root`` or lies under it, once both are resolved (``..``, links, cwd)."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())
