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
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable

from replicate.core import paths
from replicate.core.errors import ReplicateError
from replicate.core.fileio import atomic_file

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


def _sums(text: str, gzipped: bool = False) -> tuple[FileSpec, ...]:
    """FileSpecs from ``sha256sum`` lines (``HASH  relative/path``)."""
    return tuple(FileSpec(name, digest, gzipped) for digest, name in map(str.split, text.strip().splitlines()))


# LEAF FEMNIST (Caldas et al. 2018, from NIST SD19) as JSON, produced by LEAF
# `preprocess.sh -s niid --sf 0.05 -k 0 -t sample --tf 0.9`. These are the checksums of the
# shared copy, which is PARTIAL: 20 of the 35 train files survived. No official host serves
# this JSON. LEAF builds it from https://s3.amazonaws.com/nist-srd/SD19/by_class.zip and
# by_write.zip, and the store cannot run that pipeline, so there is no mirror. Stage a
# LEAF-built folder with `--from DIR`, or load a complete release with
# `femnist(root=DIR)`. Unsampled LEAF output has different file names and checksums.
FEMNIST = register(DatasetFiles(
    name="femnist",
    files=_sums("""
e52c8724a9a3ea3ff3fecc179b3f322efa25fe84a1d712a37ee94586f08123c6  train/all_data_0_niid_05_keep_0_train_9.json
dc687d0b52afc4cb038ba59504f5962217947b58be77708502f27aace6481f9d  train/all_data_10_niid_05_keep_0_train_9.json
927bb8cc27658e539c0781ac39918397b3ad712f42fff8ac687778dfabab2451  train/all_data_16_niid_05_keep_0_train_9.json
9fe910f90e73eb87989f8dbcbab94bd713b1ada05dad8c438f19d0febe4ea5d6  train/all_data_17_niid_05_keep_0_train_9.json
b0acfd82f3e3854d6a105928c46f66c25868b3ae1305488a9e91572dce0396b0  train/all_data_18_niid_05_keep_0_train_9.json
6e3184a7b11c700f89af4a779dcca275796768c48fa84e4e150af7d4bf4db513  train/all_data_19_niid_05_keep_0_train_9.json
e7e9a1b23bc206e1feeb94d4f993d911ed950adc47e92ce52954597197b99c13  train/all_data_1_niid_05_keep_0_train_9.json
46a4e20479468057c9b9462cc60ad2ad48c2b0c000e740d94d4a8310b23715bf  train/all_data_20_niid_05_keep_0_train_9.json
a71f9d0d1ab95b98bb95f20cdcab02097125efab27d9ce341045cb07d565409d  train/all_data_2_niid_05_keep_0_train_9.json
a2438bbf6e17a45d05ea9e28b9c7085dde298e1ed02e00372eee6da8161d6701  train/all_data_31_niid_05_keep_0_train_9.json
8c82d19646fbc0a96483d886c36a3502bdfc657e758c40cae12ee9eef83e3daf  train/all_data_32_niid_05_keep_0_train_9.json
b6f89d29618747d8431396bd2a9d2e54fd2286d1d8939a9b32c72f569d6ffd05  train/all_data_33_niid_05_keep_0_train_9.json
655a68578d2edd76a02f6ee8141e32c5aad079f48d4edeece711b0e04c84c1fc  train/all_data_34_niid_05_keep_0_train_9.json
1623ade048b1c1991d3aa6d5a658dcb67e83fe1def41c2b2647f466f3f3c91db  train/all_data_3_niid_05_keep_0_train_9.json
133facbc92bfaffe3b315a147cd458ca20e3283d3f48882ad72e953c4906e435  train/all_data_4_niid_05_keep_0_train_9.json
2a2b8dccb528033995b0d29ddd953edf002242ed4869c99b23983570b37348de  train/all_data_5_niid_05_keep_0_train_9.json
be03dc6a7fef7197501f75cb25285f03b9dbf6ae0e1367e48d82096da41cb32c  train/all_data_6_niid_05_keep_0_train_9.json
2e1008e286bdb71110e47ab0010edde2d5bcabfb96ba988926481aa401e85532  train/all_data_7_niid_05_keep_0_train_9.json
b72ad0551d01fa0b031f2580aac5bc415f4ffb8613a8cf62048389923d44be90  train/all_data_8_niid_05_keep_0_train_9.json
4c8ed42c941fa95250f21125cf35141b57147cce5063e6acb1bf1d02c7684b8d  train/all_data_9_niid_05_keep_0_train_9.json
979c4ab82ccbc6de67656cfdfc7412900910099014a7c134d64a36347ca6be41  test/all_data_0_niid_05_keep_0_test_9.json
9ed09f6d45455c66d8d442a8451d96d7f53b64e159149a2ccc0931651ae52851  test/all_data_10_niid_05_keep_0_test_9.json
3735eb6c5cf0f4393b4752187c4271a7b6e792f2e6c23c4ace9c503b43cbef5f  test/all_data_11_niid_05_keep_0_test_9.json
8f9439b09a7451e8126564224694b107fc126d693592fd38cb5a8042b32898c6  test/all_data_12_niid_05_keep_0_test_9.json
b3b6db681b6c9309afbad12e51743a822a0e95dfbc0b3409f4780186a9d74d8b  test/all_data_13_niid_05_keep_0_test_9.json
d5f6f40c0fe2ea1eb3a517da22a36ddbb756ce4f8065dd020578102a1d6e665d  test/all_data_14_niid_05_keep_0_test_9.json
32ce99e3a6e9297521e479a3f8de7ceb4135c2d737edbf97e1db7f4170563dcf  test/all_data_15_niid_05_keep_0_test_9.json
b326cd7652b00073ae157e517b6d90e5bd45257bcdf8b6d6781f5e9beafdf628  test/all_data_16_niid_05_keep_0_test_9.json
40b93f70a73598b133443a7c5e332e706d82c2611de7d5cfd6066d2a2a3c9052  test/all_data_17_niid_05_keep_0_test_9.json
fefe2cf9c2f14fdb6cb757774ff841519fed1adf214c786c680492a94d6b63fc  test/all_data_18_niid_05_keep_0_test_9.json
c3f5506ff72efbce185955fb4778d7887389a31c0bb4d9090a08dbcb90101e82  test/all_data_19_niid_05_keep_0_test_9.json
e7dabc622469a0941c32ba03c14ba8c1f2f2c24e03378926f2b4d60a10f5a537  test/all_data_1_niid_05_keep_0_test_9.json
34a4aedc5b4e7a7c88c3ddb2f8f5beff944a5f3619e98a634879de9e509588f6  test/all_data_20_niid_05_keep_0_test_9.json
0e3b90d6f75309f7c333b812d0ba0c5977ec96ec4922561b81bbe6fa968801fe  test/all_data_21_niid_05_keep_0_test_9.json
2af47360f2b706b23fb7bc6364a7f93acc9256db69c642eebb29c412ba82227b  test/all_data_22_niid_05_keep_0_test_9.json
cdb1f00240e26b714225923da6a2fb285868a03c498e785caaffc255c89e6291  test/all_data_23_niid_05_keep_0_test_9.json
68238e36c23cf3b0af30abfbad0c15c197037b0f94126a8261e72aa03b3769bd  test/all_data_24_niid_05_keep_0_test_9.json
dd4a7974c0e85eeb11962cf256961e8e62d473858bba7d1201203bb42f52b126  test/all_data_25_niid_05_keep_0_test_9.json
81814ee722899ca03ffaa2db24a9b68325f614a6150657f3b2f8cef998991355  test/all_data_26_niid_05_keep_0_test_9.json
c89b26290f5d9cc89ecea6bee3dfbcfc433272709e59d4525cdde5d603804f4b  test/all_data_27_niid_05_keep_0_test_9.json
92639bdf4eea5fdaf90ea23c0706e6157e757e204d5aed609ace1b59eaf50ada  test/all_data_28_niid_05_keep_0_test_9.json
c20d153946500cfc4d5cc3b5eab947c670b11c6aa431a30fe4a94f6259585b36  test/all_data_29_niid_05_keep_0_test_9.json
86f292986d0843c50f08d069125f73fddd4fff59a990e6a4c7cc7fff472696b1  test/all_data_2_niid_05_keep_0_test_9.json
8dc95959147a8f3a2f63edbab08a965e986945d1e8288f08411c62166f4ee537  test/all_data_30_niid_05_keep_0_test_9.json
7534a28d664082283e1fd678ced09faf2883b344cc87f12acdc8490c60562ece  test/all_data_31_niid_05_keep_0_test_9.json
83e62e7c499bf1211424b0a38082df3efd80de66f9f2a16a094d8f971f8f6f03  test/all_data_32_niid_05_keep_0_test_9.json
b5eec2f3d839cf2934a9581aaaee94b40bf368fcdf1c918b9107fd67f1fde519  test/all_data_33_niid_05_keep_0_test_9.json
1ccf595d2c2442141ba555cba762d4c72d76d8e7341314e45e7830d196013fe0  test/all_data_34_niid_05_keep_0_test_9.json
99f701d9394a8516a4cb86eb96e3565bf8a405e490ae00487f882419ca86d6fc  test/all_data_3_niid_05_keep_0_test_9.json
2a4c61b74d2efd1dcd6b7eaa6a970ca10da82f6b1f3b419839c6ae314e85b14b  test/all_data_4_niid_05_keep_0_test_9.json
63b48265b8ccae669c770ce7846976dbd62e7b848e9c36563d93a364f0109607  test/all_data_5_niid_05_keep_0_test_9.json
a7ece8a2f53b40671c5a58150d6b7f846bb44003a9b4b8c4628a1973387607ca  test/all_data_6_niid_05_keep_0_test_9.json
a2094cd1048f01072f4a9b8cbff2bd1f69c4e24c03f871e0b23796c19f2f8c97  test/all_data_7_niid_05_keep_0_test_9.json
3939db329891ce9a9b1def83e55af6193eabaa11672344d8129d4a9ab6300e86  test/all_data_8_niid_05_keep_0_test_9.json
09707e362bd5cf273c1948170eb0e3aed4264659b9b7efbb4d7bd0fd38be4b12  test/all_data_9_niid_05_keep_0_test_9.json
"""),
    mirrors=(),
    local_dirs=("femnist-leaf",),
    citation="S. Caldas et al.: LEAF: A Benchmark for Federated Settings (2018); "
             "G. Cohen et al.: EMNIST (2017); NIST Special Database 19.",
))

# The Complete Works of Shakespeare, Project Gutenberg etext #100 (January 1994), which
# FedProx's `data/shakespeare/preprocess/get_data.sh` downloads as
# http://www.gutenberg.org/files/100/old/1994-01-100.zip (member 100.txt). The checksum
# is of the uncompressed shared copy t8.shakespeare.txt (5,458,199 bytes). I have not
# verified that 100.txt inside the official zip has the same bytes. The store can only
# unpack .gz, so the zip is not a mirror here: unzip it, gzip or rename 100.txt to
# t8.shakespeare.txt, and stage it with `--from DIR`. Current LEAF downloads the later
# edition 100-0.txt, which has a different layout and is not this file.
SHAKESPEARE = register(DatasetFiles(
    name="shakespeare",
    files=(FileSpec("t8.shakespeare.txt",
                    "c5601d266987ac885ca96522b1b4e439feb7eca39f0fe1111f7342b63b6468f3"),),
    mirrors=(),
    local_dirs=("shakespeare",),
    citation="W. Shakespeare: The Complete Works, Project Gutenberg etext #100 (1994); "
             "split by speaking role as in LEAF (Caldas et al. 2018).",
))

# Sent140 (Go, Bhayani & Huang 2009) through LEAF `-s niid --sf 1.0 -k 30 -t sample`
# (train fraction 0.9). Only the TEST split exists in the shared copy, and this is its
# checksum. LEAF builds the JSON from
# http://cs.stanford.edu/people/alecmgo/trainingandtestdata.zip, which the store cannot
# preprocess, so there is no mirror. Load a complete LEAF release with `sent140(root=DIR)`.
SENT140 = register(DatasetFiles(
    name="sent140",
    files=(FileSpec("all_data_niid_0_keep_30_test_9.json",
                    "08257b88eee7fa98f0c9d89d4445348dc06831b03b426b9072b0d64e8b6df4c1", gzipped=False),),
    mirrors=(),
    local_dirs=("sent140-leaf",),
    citation="A. Go, R. Bhayani, L. Huang: Twitter sentiment classification using distant "
             "supervision (2009); LEAF (Caldas et al. 2018).",
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
    with atomic_file(dest) as out:
        digest = hashlib.sha256()
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

