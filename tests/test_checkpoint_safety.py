"""A checkpoint from elsewhere can hand back numbers only, never run code (``runs.checkpoints``).

PyTorch's ``torch.save`` writes a pickle, and loading a pickle may call anything its author chose: a file whose
``__reduce__`` names ``open`` (or ``os.system``) runs it when loaded. Checkpoints are now data only (a JSON tree
and raw tensor bytes); these tests plant crafted files where a user's machine would meet them (its own cache,
and a pack imported as this project's GPU sessions carry them, ``.ci/gpu/gpu_queue.py checkpoints-in``), resume and plan from them, and check that the crafted code
never ran and that the run recomputed equals the clean one.
"""
import hashlib
import importlib.util
import io
import json
import pickle
import re
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import torch

from test_resume import CONFIG, _cut_off

from replicate.experiments import estimate
from replicate.runs import cache, checkpoints

GPU = Path(__file__).resolve().parents[1] / ".ci" / "gpu"  # the packs this project's GPU sessions carry
sys.path.insert(0, str(GPU))
import travel  # noqa: E402

_spec = importlib.util.spec_from_file_location("gpu_queue", GPU / "gpu_queue.py")
gpu_queue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_queue)

PACKAGE = Path(__file__).resolve().parents[1] / "replicate"


class _Writes:
    """Unpickled, it calls ``open(path, "w")``: a file appears if the pickle is ever loaded."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _crafted(marker: Path, header: bytes) -> bytes:
    """A file made of a checkpoint header, the sha256 of a pickle and that pickle (whose object writes ``marker``
    when loaded), inside a state of the right keys, as a ``torch.save`` of it would look."""
    buffer = io.BytesIO()
    torch.save({"round": 5, "flat": torch.zeros(3), "server": _Writes(marker), "rows": [], "name": "x"}, buffer)
    payload = buffer.getvalue()
    return header + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _evil_pickle(marker: Path, header: bytes) -> bytes:
    payload = pickle.dumps(_Writes(marker))
    return header + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


CRAFTS = {"format 1 header": (_crafted, checkpoints.OLDER), "format 2 header": (_crafted, checkpoints.HEADER),
          "bare pickle, format 1": (_evil_pickle, checkpoints.OLDER),
          "bare pickle, format 2": (_evil_pickle, checkpoints.HEADER)}


def test_the_crafted_file_is_what_the_old_loader_ran(tmp_path):
    """The attack is real: the old loader (``torch.load(weights_only=False)`` after the file's own sha256) runs
    the crafted object's code. What follows would be vacuous without it."""
    marker = tmp_path / "ran"
    data = _crafted(marker, checkpoints.OLDER)
    payload = data.partition(b"\n")[2]
    loaded = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)
    assert marker.exists() and not isinstance(loaded["server"], torch.Tensor)  # its "server state": an open file
    loaded["server"].close()


@pytest.mark.parametrize("craft", sorted(CRAFTS))
def test_a_crafted_checkpoint_in_the_cache_never_runs_and_the_run_is_recomputed(craft, tmp_path, capsys):
    make, header = CRAFTS[craft]
    marker = tmp_path / "ran"
    whole = cache.compute(CONFIG)[0]
    file = checkpoints.folder() / f"{cache.entry(CONFIG)}.pt"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(make(marker, header))
    assert checkpoints.round_of(file.read_bytes()) is None  # the planner's head start: none
    assert checkpoints.reached_by(file.stem) is None and estimate.reached() == {} and travel.reached() == {}
    pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), whole, check_exact=True)
    err = capsys.readouterr().err
    assert "is unreadable" in err and "starts over" in err
    assert not marker.exists()


def test_a_crafted_checkpoint_in_an_imported_pack_never_runs(monkeypatch, tmp_path, capsys):
    """A pack someone shares, its manifest its own (so its checksums vouch for nothing): unpacked, planned from
    and resumed from, its code never runs and the run stored is the clean one."""
    marker = tmp_path / "ran"
    whole = cache.compute(CONFIG)[0]
    name = f"{cache.entry(CONFIG)}.pt"
    data = _crafted(marker, checkpoints.HEADER)
    pack = tmp_path / "shared" / "checkpoints-1.tar"
    pack.parent.mkdir()
    with tarfile.open(pack, "w") as tar:
        for member, blob in ((name, data),
                             ("manifest.json", json.dumps({"format": 1, "checkpoints": {
                                 name: hashlib.sha256(data).hexdigest()}}).encode())):
            info = tarfile.TarInfo(member)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    assert travel.reached(pack.parent) == {}  # the planner counts no head start from it
    assert gpu_queue.main(["checkpoints-in", str(pack)]) == 0
    capsys.readouterr()
    assert checkpoints.reached_by(name[:-3]) is None
    pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), whole, check_exact=True)
    assert "starts over" in capsys.readouterr().err
    assert not marker.exists()


def test_a_checkpoint_of_the_older_format_is_refused_in_one_line_and_recomputed(monkeypatch, capsys):
    """A checkpoint written before checkpoints were data only (a pickle behind the format-1 header) is never
    loaded, even one this machine wrote itself: its run starts over, said in one line."""
    whole = cache.compute(CONFIG)[0]
    file = _cut_off(monkeypatch)
    state = checkpoints.decode(file.read_bytes())
    buffer = io.BytesIO()
    torch.save({**state, "server": None}, buffer)
    payload = buffer.getvalue()
    file.write_bytes(checkpoints.OLDER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    monkeypatch.delenv("REPLICATE_STOP_FILE")
    pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), whole, check_exact=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if "checkpoint" in line]
    assert len(lines) == 1 and "older format" in lines[0] and "starts over" in lines[0]


def test_a_checkpoint_round_trips_every_state_exactly():
    """Data only, and exact: tensors of every kind the runs hold (a NaN, −0.0, an empty and a 0-d tensor), a
    frozen dataclass server state, history rows of floats, ints, strings, NaN and None."""
    from replicate.fl.algorithms.scaffold import ScaffoldState
    from replicate.fl.resume import restore

    server = ScaffoldState(torch.tensor([1.5, float("nan"), -0.0]), torch.arange(6, dtype=torch.float64).view(2, 3))
    state = {"round": 7, "flat": torch.tensor([0.1, -0.0, float("inf")]), "server": server,
             "rows": [{"round": 0, "lr": 0.05, "train_loss": float("nan"), "label": "a", "none": None}],
             "done": False, "name": "n", "extra": [torch.zeros(0), torch.tensor(3, dtype=torch.int64),
                                                   torch.ones(2, dtype=torch.bool)]}
    back = checkpoints.decode(checkpoints.encode(state))
    assert back["round"] == 7 and back["name"] == "n" and back["done"] is False
    assert back["flat"].numpy().tobytes() == state["flat"].numpy().tobytes()
    rebuilt = restore(ScaffoldState(torch.zeros(3), torch.zeros(2, 3, dtype=torch.float64)), back["server"], "cpu")
    assert isinstance(rebuilt, ScaffoldState)
    assert rebuilt.control.numpy().tobytes() == server.control.numpy().tobytes()
    assert torch.equal(rebuilt.client_controls, server.client_controls)
    row = back["rows"][0]
    assert row["lr"] == 0.05 and row["label"] == "a" and row["none"] is None and row["train_loss"] != row["train_loss"]
    empty, scalar, flags = back["extra"]
    assert empty.shape == (0,) and scalar.shape == () and int(scalar) == 3 and flags.dtype == torch.bool
    with pytest.raises(ValueError, match="this run's"):  # the class is the run's own, never the file's
        restore(torch.zeros(3), back["server"], "cpu")


def test_nothing_in_the_package_loads_a_pickle_it_did_not_restrict():
    """The audit, kept: every loader reads data without code. ``torch.load`` and ``pickle.load`` appear nowhere
    but behind a restricted unpickler (CIFAR-10's batches: arrays only), and no numpy load allows pickles."""
    risky = re.compile(r"torch\.load\(|weights_only\s*=\s*False|allow_pickle\s*=\s*True|pickle\.loads?\(|"
                       r"\beval\(|\bexec\(|marshal\.|shelve\.|yaml\.load\(")
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) for n, line in enumerate(path.read_text().splitlines(), 1)
             if risky.search(line.split("#")[0]) and not line.lstrip().startswith(('"', "'", "``"))]
    assert found == []
    cifar = (PACKAGE / "data" / "cifar.py").read_text()
    assert "class _ArraysOnly(pickle.Unpickler)" in cifar and "def find_class" in cifar
