"""The package is lint-clean under the repository's ruff configuration (``[tool.ruff]`` in pyproject.toml)."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _ruff() -> list[str] | None:
    """The ruff command: this interpreter's ``ruff`` module, else a ``ruff`` on PATH; None when neither exists."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    return [found] if found else None


def test_ruff_check_passes_on_the_package():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install ruff==0.17.6)")
    # --no-cache: the check leaves nothing behind in the working tree
    result = subprocess.run([*ruff, "check", "--no-cache", "replicate"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check replicate failed:\n{result.stdout}{result.stderr}"
