"""Writing files so that readers never see half of one, and records that say when they were changed since."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from replicate.core.errors import ReplicateError


@contextmanager
def atomic_file(path: Path, mode: str = "wb"):
    """Yield a handle on a temporary file in ``path``'s folder; if the block finishes, the file
    becomes world-readable (0644, as a normal file, not mkstemp's 0600) and is renamed to
    ``path``; if it raises, the temporary file is removed and ``path`` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` via :func:`atomic_file`."""
    with atomic_file(path, "w") as fh:
        fh.write(text)


def seal_of(record: dict, field: str = "sha256") -> str:
    """The sha256 of a JSON record's fields other than ``field`` (canonical: sorted keys): written into the
    record as ``field``, it says on reading whether any other field changed since (a flipped digit still
    parses). JSON's floats read back as written, so a record sealed in memory verifies once loaded."""
    return hashlib.sha256(json.dumps({k: v for k, v in record.items() if k != field}, sort_keys=True)
                          .encode()).hexdigest()


def sealed(record: dict, field: str = "sha256") -> dict:
    """``record`` with its ``seal_of`` in ``field``."""
    return {**record, field: seal_of(record, field)}


def check_writable(folder: Path) -> None:
    """Create ``folder`` if needed and write (then remove) a temporary file in it, so that an
    unwritable output folder is reported in one line before any work, not after it."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ReplicateError(f"cannot write into {folder}: {exc.strerror or exc}") from None
