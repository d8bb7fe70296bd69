"""Runs that stop at a round boundary and resume bitwise (``fl.resume``, ``runs.checkpoints``; issue #36)."""
import os

import pandas as pd
import pytest
import torch

from test_batched_runs import CASES, OWN_PACE, SCHEDULES, assert_same

from replicate.core import paths, settings
from replicate.fl.algorithms import ALGORITHMS, LocalWork, example
from replicate.fl.algorithms.protocol import own_pace
from replicate.fl.engine import LocalObjective, RunSpec, run, run_batch
from replicate.fl.resume import Checkpointed, Checkpoints
from replicate.runs import cache, checkpoints
from replicate.runs.config import RunConfig

ROUNDS = 6


class Memory(Checkpoints):
    """Checkpoints kept in memory, saved at every round, with a stop requested at round ``stop_at``
    (serialized as the files are, ``checkpoints.encode``)."""

    def __init__(self, stop_at=None):
        self.saved, self.stop_at, self.round = {}, stop_at, None

    def load(self, index):
        return checkpoints.decode(self.saved[index]) if index in self.saved else None

    def due(self):
        return True

    def stop(self):
        return self.stop_at is not None and self.round == self.stop_at

    def save(self, index, state):
        self.saved[index], self.round = checkpoints.encode(state), state["round"]


def _same(resumed, whole):
    for (h_resumed, w_resumed), (h_whole, w_whole) in zip(resumed, whole):
        pd.testing.assert_frame_equal(h_resumed, h_whole, check_exact=True)
        assert torch.equal(w_resumed, w_whole)


@pytest.mark.parametrize("name", ["fedavg-scheme1", "fedavg-stragglers", "fedprox-stragglers", "scaffold-I",
                                  "scaffold-II", "stem", "local-update", "fedadam", "quadratic-fedavg",
                                  "cnn-dropout"])
@pytest.mark.parametrize("alone", [True, False])
def test_a_run_stopped_at_a_round_resumes_bitwise(name, alone):
    """Every algorithm, alone and batched: stopped at round 3 (its state saved), then resumed from the
    saved state in a fresh problem, it records bit for bit what the uninterrupted run records."""
    build, algorithms, work = CASES[name]
    chosen = algorithms[:1] if alone else algorithms
    specs = [RunSpec(a, SCHEDULES[i % 3], seed=i + 1, rounds=ROUNDS - (i % 2)) for i, a in enumerate(chosen)]

    def compute(saved=None):
        return run_batch(build(), specs, work, objective=LocalObjective(weight_decay=1e-3), rounds=ROUNDS,
                         return_params=True, checkpoints=saved)

    whole = compute()
    saved = Memory(stop_at=3)
    with pytest.raises(Checkpointed):
        compute(saved)
    assert saved.round == 3 and len(saved.saved) == len(whole)
    saved.stop_at = None
    _same(compute(saved), whole)


class Apart(Memory):
    """Stops at the first boundary where the runs were saved at other rounds."""

    def due(self):
        self.rounds = {}
        return True

    def save(self, index, state):
        super().save(index, state)
        self.rounds[index] = state["round"]

    def stop(self):
        return self.stop_at is not None and len(set(self.rounds.values())) > 1


# every registered algorithm that goes at its own pace (``protocol.own_pace``), two runs whose rounds differ in
# length: seeds 2 and 3 sample other clients and stragglers (epochs of unequal clients)
PACED = {f"{name}-own-pace": (CASES["fedprox-own-pace"][0], [example(name)] * 2, LocalWork(3, "epochs", 16))
         for name in ALGORITHMS if own_pace(example(name))}


@pytest.mark.parametrize("name", [*OWN_PACE, *PACED])
def test_runs_at_their_own_pace_stopped_mid_round_resume(name):
    """At their own pace a stop finds the runs at other rounds, some inside one: each is saved at the boundary
    its round began at, and on resume redoes that round from its named draws. Bitwise the batch uninterrupted
    where rows compute bitwise as runs alone (the logistic model); the CNN, whose rows then share a stack with
    other rows than before, within the batched runs' float32 tolerance (tests/test_batched_runs.py)."""
    build, algorithms, work = CASES[name] if name in CASES else PACED[name]
    specs = [RunSpec(a, SCHEDULES[i % 3], seed=i + 1 + (name in PACED), rounds=ROUNDS - (i % 2))
             for i, a in enumerate(algorithms)]

    def compute(saved=None):
        return run_batch(build(), specs, work, objective=LocalObjective(weight_decay=1e-3), rounds=ROUNDS,
                         return_params=True, checkpoints=saved, fused=False)

    whole = compute()
    saved = Apart(stop_at=True)
    with pytest.raises(Checkpointed):
        compute(saved)
    assert len(set(saved.rounds.values())) > 1 and max(saved.rounds.values()) < ROUNDS - 1  # apart, none finished
    saved.stop_at = None
    problem = build()
    exact = getattr(problem.model, "batch_exact", True)
    assert exact == (not name.startswith("cnn"))
    assert_same(compute(saved), whole, problem.dtype, exact)
    alone = [run(build(), s.algorithm, work, s.schedule, objective=LocalObjective(weight_decay=1e-3), rounds=s.rounds,
                 seed=s.seed, return_params=True, fused=False) for s in specs]
    assert_same(whole, alone, problem.dtype, exact)  # and the batch at its own pace is each run alone


def test_a_finished_run_of_a_stopped_batch_is_not_trained_again():
    build, algorithms, work = CASES["fedavg-scheme1"]
    specs = [RunSpec(algorithms[0], SCHEDULES[0], seed=1, rounds=2), RunSpec(algorithms[1], SCHEDULES[1], seed=2, rounds=5)]
    whole = run_batch(build(), specs, work, rounds=5, return_params=True)
    saved = Memory(stop_at=4)
    with pytest.raises(Checkpointed):
        run_batch(build(), specs, work, rounds=5, return_params=True, checkpoints=saved)
    state = checkpoints.decode(saved.saved[0])
    assert state["done"] and len(state["rows"]) == 3  # rounds 0-2, finished before the stop
    saved.stop_at = None
    _same(run_batch(build(), specs, work, rounds=5, return_params=True, checkpoints=saved), whole)


CONFIG = RunConfig(dataset="synthetic(1,1)", num_clients=10, rounds=12)


def test_a_cached_run_resumes_from_its_checkpoint_file_and_clears_it(monkeypatch):
    """Through the run layer: a stop file makes the run save and stop; the next call resumes from the file
    (fewer rounds trained) and stores the run bitwise as computed in one go; the file is then removed."""
    whole = cache.compute(CONFIG)[0]
    file = _cut_off(monkeypatch)
    name = cache.entry(CONFIG)
    saved = checkpoints.decode(file.read_bytes())
    assert saved["round"] == 1 and saved["name"] == name  # stopped at the first round boundary
    from replicate.fl import engine
    trained = []
    real = engine._begin
    monkeypatch.setattr(engine, "_begin", lambda run, *a: trained.append(a[-1]) or real(run, *a))
    pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), whole, check_exact=True)
    assert trained == list(range(1, 12)) and not file.exists()


def test_an_unreadable_checkpoint_starts_the_run_over(capsys):
    name = cache.entry(CONFIG)
    file = checkpoints.folder() / f"{name}.pt"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"not a checkpoint")
    pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), cache.compute(CONFIG)[0], check_exact=True)
    assert "is unreadable" in capsys.readouterr().err


def test_a_damaged_checkpoint_is_never_resumed_from(monkeypatch, tmp_path, capsys):
    """A checkpoint whose bytes changed after it was written (one bit of its model flipped: PyTorch's loader
    itself loads that without a word) or that has no checksum (plain ``torch.save``, as before checkpoints
    carried one) is refused: the run starts over and stores the uninterrupted run's numbers, the planner counts
    no head start from it, and the warning says why."""
    import hashlib
    import io

    whole = cache.compute(CONFIG)[0]

    def flipped(good):
        state = checkpoints.decode(good)
        at = good.index(state["flat"].numpy().tobytes()[:32])  # the model's bytes in the file
        data = bytearray(good)
        data[at + 8] ^= 0x10
        payload = bytes(data).partition(b"\n")[2]  # resealed, the flip is a changed model, not a broken file
        resealed = checkpoints.HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
        assert not torch.equal(checkpoints.decode(resealed)["flat"], state["flat"])
        return bytes(data)

    def plain(good):
        buffer = io.BytesIO()
        torch.save(checkpoints.decode(good), buffer)
        return buffer.getvalue()

    for damage, why in ((flipped, "do not match their sha256"), (plain, "no checksum line")):
        monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / damage.__name__))
        file = _cut_off(monkeypatch)
        good = file.read_bytes()
        assert checkpoints.round_of(good) == checkpoints.decode(good)["round"] > 0
        file.write_bytes(damage(good))
        assert checkpoints.round_of(file.read_bytes()) is None and checkpoints.reached_by(file.stem) is None
        pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), whole, check_exact=True)
        err = capsys.readouterr().err
        assert "is unreadable" in err and why in err and "starts over" in err


def test_a_stop_makes_pool_workers_save_their_runs_instead_of_finishing(monkeypatch, tmp_path):
    """A spent budget (KeyboardInterrupt in the driver) while two worker processes train: they save at the next
    round boundary and stop; rerunning resumes from the saves and stores the runs as computed in one go."""
    from replicate.runs import executors, pool

    configs = [CONFIG.replace(rounds=400, seed=s, model="mlp", local_steps=2, eval_every=100) for s in (0, 1)]
    calls = {"n": 0}
    real_wait = executors.concurrent.futures.wait

    def interrupt_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:  # once both workers are into their runs (each has saved once), as a budget would
            import time
            deadline = time.monotonic() + 120
            while len(list(checkpoints.folder().glob("*.pt"))) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(executors.concurrent.futures, "wait", interrupt_once)
    monkeypatch.setattr(pool, "PARALLEL_ABOVE", 0)
    monkeypatch.setenv("REPLICATE_BATCH_RUNS", "1")
    monkeypatch.setenv("REPLICATE_CHECKPOINT_S", "1")
    with pytest.raises(KeyboardInterrupt):
        pool.compute([(c,) for c in configs], workers=2, progress=False)
    rounds = {f.stem: checkpoints.round_of(f.read_bytes()) for f in checkpoints.folder().glob("*.pt")}
    assert set(rounds) == {cache.entry(c) for c in configs} and all(0 < r < 400 for r in rounds.values())
    assert not list(checkpoints.folder().glob("stop.*"))  # the stop file is gone with the pool
    monkeypatch.setattr(executors.concurrent.futures, "wait", real_wait)
    pool.compute([(c,) for c in configs], workers=2, progress=False)
    assert not list(checkpoints.folder().glob("*.pt"))
    from replicate.core.threads import threads
    with threads(1):
        for config in configs:
            stored = pd.read_csv(settings.current().cache / "runs" / f"{cache.entry(config)}.csv")
            pd.testing.assert_frame_equal(stored, cache.compute(config)[0], check_exact=True)
    assert os.environ.get("REPLICATE_STOP_FILE") is None  # the workers were handed it, not the environment


def _cut_off(monkeypatch):
    """CONFIG stopped at its first round boundary by a stop file: its checkpoint is in this cache."""
    stop = settings.current().cache / "checkpoints" / "stop.test"
    monkeypatch.setenv("REPLICATE_STOP_FILE", str(stop))
    monkeypatch.setenv("REPLICATE_CHECKPOINT_S", "0")
    checkpoints.request_stop(stop)
    with pytest.raises(Checkpointed):
        cache.run(CONFIG, progress=False)
    stop.unlink()
    return checkpoints.folder() / f"{cache.entry(CONFIG)}.pt"


def _gpu_scripts():
    """This project's GPU-session scripts (``.ci/gpu``: the queue and its checkpoint packs), not the package's."""
    import importlib.util
    import sys

    folder = paths.REPO / ".ci" / "gpu"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    import travel

    spec = importlib.util.spec_from_file_location("gpu_queue", folder / "gpu_queue.py")
    queue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(queue)
    return queue, travel


def test_a_cut_off_run_travels_to_the_next_gpu_session_and_resumes_there(monkeypatch, tmp_path, capsys):
    """A GPU session packs its cut-off runs' checkpoints (``.ci/gpu/gpu_queue.py checkpoints-out``), the next, with
    an empty cache, unpacks them (``checkpoints-in``) and the run goes on from the round it reached, storing
    what it computes in one go, bitwise."""
    main = _gpu_scripts()[0].main

    whole = cache.compute(CONFIG)[0]
    saved = _cut_off(monkeypatch)
    assert main(["checkpoints-out", str(tmp_path / "out")]) == 0
    assert "checkpoints-1.tar" in capsys.readouterr().out
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "next_job"))  # another machine: an empty cache
    assert not checkpoints.folder().exists()
    assert main(["checkpoints-in", str(tmp_path / "out" / "checkpoints-1.tar")]) == 0
    assert "unpacked 1 checkpoints" in capsys.readouterr().out
    assert (checkpoints.folder() / saved.name).read_bytes() == saved.read_bytes()
    from replicate.fl import engine
    trained, real = [], engine._begin
    monkeypatch.setattr(engine, "_begin", lambda run, *a: trained.append(a[-1]) or real(run, *a))
    pd.testing.assert_frame_equal(cache.run(CONFIG, progress=False), whole, check_exact=True)
    assert trained == list(range(1, 12))  # round 0 was trained in the first job


def test_a_damaged_or_foreign_checkpoint_pack_is_refused_whole(monkeypatch, tmp_path):
    import io
    import json
    import tarfile

    from replicate.core.errors import ReplicateError

    travel = _gpu_scripts()[1]

    saved = _cut_off(monkeypatch)
    (pack,), left = travel.pack(tmp_path)
    assert not left
    members = {}
    with tarfile.open(pack) as tar:
        for info in tar:
            members[info.name] = tar.extractfile(info).read()

    def write(name, blobs):
        path = tmp_path / name
        with tarfile.open(path, "w") as tar:
            for member, data in blobs.items():
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    saved.unlink()
    flipped = dict(members) | {saved.name: members[saved.name][:-1] + bytes([members[saved.name][-1] ^ 1])}
    cases = {"flipped.tar": (flipped, "does not match its manifest's sha256"),
             "foreign.tar": (members | {"../evil.pt": b"x"}, "is not a run's checkpoint"),
             "unlisted.tar": ({"manifest.json": json.dumps({"format": 1, "checkpoints": {saved.name: "0"}}).encode()},
                              "is listed but absent")}
    for name, (blobs, why) in cases.items():
        with pytest.raises(ReplicateError, match=why):
            travel.unpack(write(name, blobs))
        assert not saved.exists()  # nothing written
    (tmp_path / "cut.tar").write_bytes(pack.read_bytes()[:2000])
    with pytest.raises(ReplicateError, match="nothing unpacked"):
        travel.unpack(tmp_path / "cut.tar")
    assert travel.unpack(pack) == [saved.stem] and saved.exists()
    assert travel.unpack(pack) == []  # this cache's own checkpoint is kept
    good = saved.read_bytes()
    saved.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # this cache's own, damaged: the pack's copy replaces it
    assert travel.reached() == {} and travel.unpack(pack) == [saved.stem] and saved.read_bytes() == good


def test_checkpoint_packs_stay_under_the_size_a_session_returns(monkeypatch, tmp_path):
    travel = _gpu_scripts()[1]

    folder = checkpoints.folder()
    folder.mkdir(parents=True)
    for i, size in enumerate((300, 300, 500, 900, 2000)):
        (folder / f"{i:020x}.pt").write_bytes(bytes(size))
    (folder / "stop.123").touch()  # a driver's stop file is not a checkpoint
    written, left = travel.pack(tmp_path, limit=1000, parts=2)
    assert [p.name for p in written] == ["checkpoints-1.tar", "checkpoints-2.tar"]
    assert left == [f"{3:020x}", f"{4:020x}"]  # the largest left out, named
    assert all(p.stat().st_size <= 1000 + 10 * 1024 for p in written)  # the tar's headers aside


def test_the_estimate_counts_a_checkpointed_run_from_the_round_it_reached(monkeypatch, tmp_path):
    """A run cut off in one GPU session costs the next only its rounds left. ``travel.reached`` reads the
    round of each checkpoint this machine holds (its cache's, and the packs it will carry; a damaged pack is
    no head start), and ``estimate.progress`` scales that run's projected seconds by the share of rounds left."""
    from replicate.experiments import estimate as plan

    travel = _gpu_scripts()[1]

    saved = _cut_off(monkeypatch)
    assert travel.reached() == {saved.stem: 1}
    (pack,), _ = travel.pack(tmp_path / "carry")
    saved.unlink()
    assert travel.reached() == {} and travel.reached(tmp_path / "carry") == {saved.stem: 1}
    whole = pack.read_bytes()
    middle = whole.index(checkpoints.HEADER) + 200  # inside the checkpoint's bytes
    pack.write_bytes(whole[:middle])  # cut: left out, as unpack would refuse it
    assert travel.reached(tmp_path / "carry") == {}

    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    row = next(r for r in plan.table("cuda") if not r.done and r.tuning[0] < r.tuning[1])
    tuning = {cache.key(c, device="cuda"): c for c in plan._figure(row.unit.key).plan()[0]}
    key = next(k for k in row.left if k in tuning)
    half = tuning[key].rounds // 2
    again = next(r for r in plan.table("cuda", {key: half}) if r.unit == row.unit)
    assert again.resumed == 1 and row.resumed == 0
    assert again.left[key] == pytest.approx(row.left[key] * (1 - half / tuning[key].rounds))
    assert {k: s for k, s in again.left.items() if k != key} == {k: s for k, s in row.left.items() if k != key}
