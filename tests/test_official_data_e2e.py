"""The paper profile's data, proven end to end without the internet (issue #39 item 3).

An HTTP server on 127.0.0.1 serves fabricated files in each official layout (MNIST's IDX .gz files, TFF's
EMNIST-62 and Shakespeare HDF5 archives, Project Gutenberg's text, the Sentiment140 and GloVe zips, the
CIFAR-10 and CIFAR-100 python batches); ``REPLICATE_CATALOG_OVERRIDE`` (test-only) points the catalogue's URLs
and checksums at them. ``python -m replicate data fetch --all`` then runs the real download, verify and unpack
code, and the twelve figures that once read stand-ins run at smoke scale on what it fetched, with no stand-in
(``REPLICATE_STAND_INS=0``). The faults of a download (a corrupted byte, a cut, a 404, a stall) are tested
against a real server in tests/test_data_download.py.
"""
import functools
import gzip
import hashlib
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from replicate.core import paths
from tests import substituted

pytestmark = pytest.mark.smoke  # runs the figures command: the notebook tier
h5py = pytest.importorskip("h5py")
papermill = pytest.importorskip("papermill")

FIGURES = substituted.FIGURES  # the twelve whose notebooks `make test` runs only here
OFFICIAL = ("cifar10", "cifar100", "emnist_tff", "glove", "mnist", "sent140_raw", "shakespeare", "shakespeare_tff")
STAND_INS = ("cifar10_jpg", "femnist", "sent140")  # no download: not available on a machine without them


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _tar(members: dict, mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _h5(build) -> bytes:
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        build(f)
    return buffer.getvalue()


def _mnist() -> dict:
    """The four IDX files: 60,000 / 10,000 images of a non-constant pattern, labels 0-9 in turn."""
    out = {}
    for prefix, n in (("train", 60_000), ("t10k", 10_000)):
        labels = (np.arange(n) % 10).astype(np.uint8)
        pixels = ((np.arange(784)[None, :] * (labels[:, None].astype(np.int64) + 1) + np.arange(n)[:, None]) % 256)
        out[f"{prefix}-images-idx3-ubyte"] = struct.pack(">IIII", 2051, n, 28, 28) + pixels.astype(np.uint8).tobytes()
        out[f"{prefix}-labels-idx1-ubyte"] = struct.pack(">II", 2049, n) + labels.tobytes()
    return out


def _emnist(split: str):
    def build(f):
        for w in range(12):  # 12 writers, 6 (train) or 2 (test) images each
            n = 6 if split == "train" else 2
            labels = (np.arange(n) * 11 + w) % 62
            f[f"examples/f{w:04d}/pixels"] = np.stack([np.full((28, 28), (k + 1) / 255, np.float32) for k in labels])
            f[f"examples/f{w:04d}/label"] = labels.astype(np.int32)
    return build


def _shakespeare(split: str):
    def build(f):
        for c in range(12):
            lines = [f"line {k} of role {c}, to be or not to be." for k in range(3 if split == "train" else 2)]
            f.create_dataset(f"examples/ROLE_{c}/snippets", data=np.array([s.encode() for s in lines], dtype=object),
                             dtype=h5py.string_dtype())
    return build


def _cifar_batch(n: int, seed: int, key: bytes = b"labels") -> bytes:
    rs = np.random.RandomState(seed)
    return pickle.dumps({b"batch_label": b"fabricated", key: [i % 10 for i in range(n)],
                         b"data": rs.randint(0, 256, (n, 3072)).astype(np.uint8), b"filenames": [b"x.png"] * n},
                        protocol=2)


@functools.lru_cache(maxsize=1)
def _site() -> tuple[dict, dict]:
    """(files served by path, the catalogue override)."""
    served, override = {}, {}
    mnist = _mnist()
    served |= {f"mnist/{name}.gz": gzip.compress(data, compresslevel=1) for name, data in mnist.items()}
    override["mnist"] = {"mirrors": ["BASE/mnist/"], "files": {n: {"sha256": _sha(d)} for n, d in mnist.items()}}
    for name, archive, members, build in (
            ("emnist_tff", "fed_emnist.tar.bz2", ("fed_emnist_train.h5", "fed_emnist_test.h5"), _emnist),
            ("shakespeare_tff", "shakespeare.tar.bz2", ("shakespeare_train.h5", "shakespeare_test.h5"), _shakespeare)):
        files = {m: _h5(build("train" if "train" in m else "test")) for m in members}
        served[f"tff/{archive}"] = data = _tar(files, "w:bz2")
        override[name] = {"archives": {archive: {"urls": [f"BASE/tff/{archive}"], "sha256": _sha(data)}}}
        if name == "shakespeare_tff":  # its members' checksums are computed from the real files: ours replace them
            override[name]["files"] = {f"tff/{m}": {"sha256": _sha(d)} for m, d in files.items()}
    text = b"THE TRAGEDY OF FABRICATION\n\nACT I. SCENE I.\n  FIRST.  A line.\n"
    served["gutenberg/t8.shakespeare.txt"] = text
    override["shakespeare"] = {"mirrors": ["BASE/gutenberg/"], "files": {"t8.shakespeare.txt": {"sha256": _sha(text)}},
                               "archives": {"1994-01-100.zip": {"urls": ["BASE/gutenberg/missing.zip"]}}}
    rows = "".join(f'"{4 * (k % 2)}","{k}","Mon Apr 06 22:19:45 PDT 2009","NO_QUERY","user{k % 3}","the cat {k}"\n'
                   for k in range(40))
    served["sent140/trainingandtestdata.zip"] = _zip({"training.1600000.processed.noemoticon.csv": rows,
                                                      "testdata.manual.2009.06.14.csv": rows[:200]})
    override["sent140_raw"] = {"archives": {"trainingandtestdata.zip": {"urls": ["BASE/sent140/trainingandtestdata.zip"]}}}
    glove = "".join(f"{w} " + " ".join(f"{(i + j) / 1000:.3f}" for j in range(300)) + "\n"
                    for i, w in enumerate(["the", "cat", ".", "!"]))
    served["glove/glove.6B.zip"] = _zip({"glove.6B.300d.txt": glove})
    override["glove"] = {"archives": {"glove.6B.zip": {"urls": ["BASE/glove/glove.6B.zip"]}}}
    c10 = {f"cifar-10-batches-py/data_batch_{k}": _cifar_batch(210, k) for k in range(1, 6)}
    c10 |= {"cifar-10-batches-py/test_batch": _cifar_batch(1010, 9),
            "cifar-10-batches-py/batches.meta": pickle.dumps({b"label_names": [b"c%d" % k for k in range(10)]}, 2)}
    c100 = {f"cifar-100-python/{n}": _cifar_batch(20, 3, b"fine_labels") for n in ("train", "test", "meta")}
    for name, archive, members in (("cifar10", "cifar-10-python.tar.gz", c10), ("cifar100", "cifar-100-python.tar.gz", c100)):
        served[f"cifar/{archive}"] = data = _tar(members, "w:gz")
        override[name] = {"files": {m: {"md5": _md5(d)} for m, d in members.items()},
                          "archives": {archive: {"urls": [f"BASE/cifar/{archive}"], "md5": _md5(data)}}}
    return served, override


@pytest.fixture(scope="module")
def official_site(tmp_path_factory):
    """The fabricated official files served on 127.0.0.1, and the environment that points the catalogue there."""
    root = tmp_path_factory.mktemp("e2e")
    served, override = _site()
    for path, data in served.items():
        (root / "www" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "www" / path).write_bytes(data)
    handler = functools.partial(_Quiet, directory=str(root / "www"))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    (root / "override.json").write_text(json.dumps(override).replace("BASE", base))
    env = {**os.environ, "REPLICATE_CATALOG_OVERRIDE": str(root / "override.json"), "REPLICATE_DATA": str(root / "data"),
           "REPLICATE_DATA_FROM": "none", "REPLICATE_STAND_INS": "0", "REPLICATE_BUILD": str(root / "build"),
           "REPLICATE_LEDGER": "off", "PYTHONPATH": str(paths.REPO)}
    yield root, env
    httpd.shutdown()
    httpd.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _replicate(env, *args, timeout=1200):
    return subprocess.run([sys.executable, "-m", "replicate", *args], env=env, cwd=paths.REPO, capture_output=True,
                          text=True, timeout=timeout)


def test_fetch_all_downloads_every_official_dataset_then_the_twelve_figures_run_on_it(official_site):
    root, env = official_site
    fetched = _replicate(env, "data", "fetch", "--all")
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    outcome = {line.split()[0]: line.split()[1] for line in fetched.stdout.splitlines() if line and line[0] != " "}
    assert {name: outcome.get(name) for name in OFFICIAL} == dict.fromkeys(OFFICIAL, "downloaded"), fetched.stdout
    assert all(outcome.get(name) == "not" for name in STAND_INS), fetched.stdout  # "not available"
    assert (root / "data" / "cifar10" / "cifar-10-batches-py" / "test_batch").is_file()
    again = _replicate(env, "data", "fetch", "--all")  # everything verified in place: nothing downloaded again
    assert all(f"{name} " in again.stdout and "ready" in line for name in OFFICIAL
               for line in again.stdout.splitlines() if line.startswith(f"{name} "))

    ran = _replicate(env, "figures", *FIGURES, "--profile", "smoke")
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    for key in FIGURES:
        paper, figure = key.split("/")
        record = json.loads((root / "build" / "figures" / paper / f"{figure}.claims.json").read_text())
        assert "data" not in record, key  # no stand-in was read: the official data, fetched above
    stem = (root / "build" / "figures" / "khanduri2021" / "fig2.csv").read_text()
    assert "cifar10_stem_moderate" in stem and "cifar10_jpg" not in stem  # the official batches, not the JPEG copy
    smoke = os.environ.get("REPLICATE_SMOKE_FIGURES")  # `make test`: the first-look test reads them there next
    if smoke:
        import shutil

        for key in FIGURES:
            paper, figure = key.split("/")
            (Path(smoke) / paper).mkdir(parents=True, exist_ok=True)
            for suffix in (".csv", ".claims.json"):
                shutil.copy2(root / "build" / "figures" / paper / f"{figure}{suffix}", Path(smoke) / paper)
