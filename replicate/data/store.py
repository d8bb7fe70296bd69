"""Dataset files on disk: where they come from, how they are checked, where they go.

Every dataset is a :class:`DatasetFiles` entry in a registry keyed by name. ``fetch``
copies its files into ``paths.data_dir()/<name>/``, either from a local directory
(``--from DIR``, ``REPLICATE_DATA_FROM``, or ``../shared/data`` beside the checkout)
or by downloading from the official mirrors. Each file is checked against a SHA-256 of
its *uncompressed* bytes, because redistributed copies are often recompressed (the
shared MNIST ``.gz`` files are) while their content stays canonical. Files are written
to a temporary name and moved into place only once verified, so a half-written or
corrupted file is never read as data.
"""
from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from replicate.core import paths
from replicate.core.errors import ReplicateError

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileSpec:
    """One file as stored under ``data_dir()/<dataset>/``."""

    name: str
    sha256: str  # of the stored bytes, i.e. after decompression
    gzipped: bool = True  # published (and possibly staged) as ``name + ".gz"``

    @property
    def published_name(self) -> str:
        return self.name + ".gz" if self.gzipped else self.name


@dataclass(frozen=True)
class DatasetFiles:
    """A dataset's files and where to get them."""

    name: str
    files: tuple[FileSpec, ...]
    mirrors: tuple[str, ...]  # base URLs, tried in order; each ends with "/"
    local_dirs: tuple[str, ...] = ()  # sub-folders of a source directory to look in
    citation: str = ""


_REGISTRY: dict[str, DatasetFiles] = {}


def register(spec: DatasetFiles) -> DatasetFiles:
    """Make ``spec`` fetchable by name (later datasets: femnist, shakespeare, cifar10)."""
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> list[str]:
    return sorted(_REGISTRY)


def spec(name: str) -> DatasetFiles:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ReplicateError(
            f"no downloadable dataset named {name!r}; known: {', '.join(registered())}") from None


# LeCun, Cortes & Burges, "The MNIST database of handwritten digits". Checksums are of
# the four uncompressed IDX files (header magic 2051/2049, 60,000/10,000 items).
MNIST = register(DatasetFiles(
    name="mnist",
    files=(
        FileSpec("train-images-idx3-ubyte",
                 "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
        FileSpec("train-labels-idx1-ubyte",
                 "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
        FileSpec("t10k-images-idx3-ubyte",
                 "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
        FileSpec("t10k-labels-idx1-ubyte",
                 "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
    ),
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    local_dirs=("mnist",),
    citation="Y. LeCun, C. Cortes, C. J. C. Burges: The MNIST database of handwritten digits.",
))


def dataset_dir(name: str) -> Path:
    """Where ``fetch(name)`` puts the files: ``paths.data_dir()/<name>``."""
    return paths.data_dir() / spec(name).name


def fetch_command(name: str) -> str:
    return f"python -m replicate data fetch {name}"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _mismatch(name: str, file: FileSpec, origin: str, actual: str) -> ReplicateError:
    return ReplicateError(
        f"{name}: {file.name} from {origin} has SHA-256 {actual}, expected {file.sha256}; "
        f"the file was not used. Replace it with the official file and run "
        f"`{fetch_command(name)}` again.")


def _write_verified(dest: Path, stream: BinaryIO, name: str, file: FileSpec, origin: str) -> None:
    """Copy ``stream`` to ``dest`` through a temporary file, publishing it only if its
    SHA-256 matches; a failed copy leaves ``dest`` untouched."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                for chunk in iter(lambda: stream.read(_CHUNK), b""):
                    digest.update(chunk)
                    out.write(chunk)
            except (OSError, EOFError, zlib.error) as exc:
                raise ReplicateError(
                    f"{name}: could not read {file.name} from {origin} ({exc}); "
                    f"the file was not used") from exc
        if digest.hexdigest() != file.sha256:
            raise _mismatch(name, file, origin, digest.hexdigest())
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _find_local(ds: DatasetFiles, source: Path, file: FileSpec) -> Path | None:
    """The file in ``source`` or one of its dataset sub-folders, compressed or not."""
    for folder in (*(source / d for d in ds.local_dirs), source):
        for candidate in (file.published_name, file.name):
            if (folder / candidate).is_file():
                return folder / candidate
    return None


def _stage_local(ds: DatasetFiles, path: Path, file: FileSpec, dest: Path) -> None:
    opener = gzip.open if path.name.endswith(".gz") and not file.name.endswith(".gz") else open
    with opener(path, "rb") as stream:
        _write_verified(dest, stream, ds.name, file, str(path))


def _download(ds: DatasetFiles, file: FileSpec, dest: Path) -> None:
    failures = []
    for base in ds.mirrors:
        url = base + file.published_name
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                stream = gzip.GzipFile(fileobj=response) if file.gzipped else response
                _write_verified(dest, stream, ds.name, file, url)
            return
        except (urllib.error.URLError, OSError, ReplicateError) as exc:
            failures.append(f"{url}: {exc}")
    raise ReplicateError(
        f"{ds.name}: could not download {file.published_name}:\n  " + "\n  ".join(failures)
        + f"\nIf this machine has no internet, copy the official files to a directory DIR and "
          f"run `{fetch_command(ds.name)} --from DIR` (or set REPLICATE_DATA_FROM=DIR).")


def fetch(name: str, source: str | os.PathLike | None = None, *,
          log: Callable[[str], None] | None = None) -> Path:
    """Stage dataset ``name`` into ``paths.data_dir()/<name>/`` and return that folder.

    Files already there with the right checksum are kept. Others are copied from
    ``source`` when given (an explicit source never falls back to downloading), else
    from ``paths.local_data_source()`` when it holds them, else downloaded from the
    official mirrors. Every file is verified before it is put in place.
    """
    ds = spec(name)
    folder = dataset_dir(name)
    explicit = source is not None
    root = Path(source) if explicit else paths.local_data_source()
    if explicit and not root.is_dir():
        raise ReplicateError(
            f"{name}: source directory {root} does not exist; pass the folder that holds "
            f"{', '.join(f.published_name for f in ds.files)}")
    for file in ds.files:
        dest = folder / file.name
        if dest.is_file() and _sha256_file(dest) == file.sha256:
            continue
        local = _find_local(ds, root, file) if root is not None else None
        if local is not None:
            _stage_local(ds, local, file, dest)
            origin = str(local)
        elif explicit:
            raise ReplicateError(
                f"{name}: {file.published_name} is not in {root}"
                + (f" or its sub-folder {', '.join(ds.local_dirs)}/" if ds.local_dirs else "")
                + f"; copy the official file there, or run `{fetch_command(name)}` "
                  f"without --from to download it")
        else:
            _download(ds, file, dest)
            origin = "download"
        if log is not None:
            log(f"{name}: {file.name} <- {origin}")
    return folder


def ensure(name: str) -> Path:
    """The verified folder of ``name``, staging it from the local source if it is there.

    Never downloads and never substitutes other data: if the files are missing and no
    local copy exists, the error says which command to run.
    """
    ds, folder = spec(name), dataset_dir(name)
    missing = [f for f in ds.files if not (folder / f.name).is_file()]
    if missing:
        source = paths.local_data_source()
        if source is None or any(_find_local(ds, source, f) is None for f in missing):
            raise ReplicateError(
                f"{name} is not in {folder}. Run `{fetch_command(name)}` to download it, or "
                f"`{fetch_command(name)} --from DIR` where DIR holds the official files "
                f"(or set REPLICATE_DATA_FROM=DIR).")
        return fetch(name, source)
    for file in ds.files:
        actual = _sha256_file(folder / file.name)
        if actual != file.sha256:
            raise _mismatch(name, file, str(folder / file.name), actual)
    return folder


def is_available(name: str) -> bool:
    """True when ``ensure(name)`` can work without a download (staged or stageable)."""
    ds, folder = spec(name), dataset_dir(name)
    source = paths.local_data_source()
    return all((folder / f.name).is_file()
               or (source is not None and _find_local(ds, source, f) is not None)
               for f in ds.files)

