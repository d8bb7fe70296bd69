"""Official data is the paper profile's default; this machine's offline stand-ins are one explicit, recorded choice
(issue #39 items 1-2): the ``data_source`` knob, defaulted by ``REPLICATE_STAND_INS``."""
import json

import pytest

from replicate.core.errors import ReplicateError
from replicate.data import store, variants
from replicate.experiments import catalog, knobs, requirements
from replicate.report import claims as report_claims
from replicate.report import coverage
from tests import substituted

# The figures whose paper profile read a stand-in before issue #39 (every dataset of theirs had one)
SUBSTITUTED = substituted.FIGURES
LSTM = {"datasets": ["sent140"]}  # FedProx's Sent140 panels, runnable where named


@pytest.fixture
def official(monkeypatch):
    monkeypatch.delenv("REPLICATE_STAND_INS", raising=False)


@pytest.fixture
def stand_ins(monkeypatch):
    monkeypatch.setenv("REPLICATE_STAND_INS", "1")


def test_every_figure_reads_only_downloadable_data_at_the_paper_profile(official):
    for key in catalog.FIGURES:
        for overrides in ({}, LSTM) if key in SUBSTITUTED[4:9] else ({},):
            for name in requirements.needs(key, "paper", overrides):
                assert store.spec(name).downloadable, (key, name)


def test_the_switch_selects_the_stand_ins_and_nothing_else(stand_ins):
    read = {key: requirements.needs(key, "paper") for key in SUBSTITUTED}
    assert read["charles2021/fig12"] == ("femnist", "shakespeare_tff")  # TFF's Shakespeare has no stand-in
    assert read["khanduri2021/fig2"] == ("cifar10_jpg",)
    assert requirements.needs("fedprox2020/fig2", "paper", LSTM) == ("sent140",)
    assert all(any(not store.spec(n).downloadable for n in names) for names in read.values())
    # a figure without stand-ins is untouched (MNIST is official everywhere)
    assert requirements.needs("khanduri2021/fig5", "paper") == ("mnist",)


def test_the_knob_wins_over_the_environment_and_a_bad_value_is_one_line(stand_ins, monkeypatch):
    cls = catalog.config_class("khanduri2021/fig2")
    assert cls.for_profile("paper").data_source == "stand-in"
    assert cls.for_profile("paper", data_source="official").dataset_name() == "cifar10_stem_moderate"
    with pytest.raises(ReplicateError, match="data_source must be one of official, stand-in"):
        cls.for_profile("paper", data_source="jpeg")
    monkeypatch.setenv("REPLICATE_STAND_INS", "yes")
    with pytest.raises(ReplicateError, match="REPLICATE_STAND_INS must be 1"):
        cls.for_profile("paper")
    # the choice is recorded apart, never as a changed knob: the paper profile on a stand-in is data-limited
    assert cls.for_profile("paper", data_source="stand-in").changed() == {}


@pytest.mark.parametrize("key", SUBSTITUTED)
def test_official_and_stand_in_runs_never_share_a_loader(key, official):
    """The run cache keys on the run config, whose dataset is the loader: two loaders, two entries."""
    cls = catalog.config_class(key)
    overrides = LSTM if key in SUBSTITUTED[5:9] else {}
    ours = knobs.configure(cls, "paper", overrides)
    offline = knobs.configure(cls, "paper", {**overrides, "data_source": "stand-in"})
    substituted = set(ours.dataset_names()) - set(offline.dataset_names())
    assert substituted and not any(variants.is_stand_in(n) for n in ours.dataset_names())
    assert set(offline.stand_in_loaders()) == set(offline.dataset_names()) - set(ours.dataset_names())
    assert ours.stand_in_loaders() == []


def test_run_configs_follow_the_choice():
    from replicate.experiments.fedprox2020 import common

    official = common.run_config("emnist", prox_mu=0.0, epochs=1, seed=0)
    offline = common.run_config("emnist", prox_mu=0.0, epochs=1, seed=0, data=variants.STAND_IN)
    assert (official.dataset, official.clients_per_round) == ("emnist_draft_tff", 45)  # 5% of 900 writers
    assert (offline.dataset, offline.clients_per_round) == ("femnist", 5)  # 5% of the copy's 105
    assert common.run_config("sent140", prox_mu=0.0, epochs=1, seed=0).dataset == "sent140_leaf"


def test_a_figure_on_a_stand_in_says_so_and_its_row_is_data_limited(tmp_path, stand_ins):
    import matplotlib.pyplot as plt
    import pandas as pd

    config = catalog.config_class("charles2021/table3").for_profile("paper")
    fig = plt.figure()
    fig.suptitle("Table 3")
    table = report_claims.publish(fig, pd.DataFrame({"x": [1]}), [], paper="charles2021", figure="table3",
                                  profile="paper", out_dir=tmp_path / "out", config=config)
    record = json.loads((tmp_path / "out" / "charles2021" / "table3.claims.json").read_text())
    assert record["data"] == {"choice": "stand-in", "loaders": ["femnist"]}
    assert "offline stand-in data: femnist" in table.title
    assert fig.get_suptitle().startswith(report_claims.STAND_IN_LABEL)
    plt.close(fig)
    # the coverage rule reads the record: a row its figures computed on a stand-in is data-limited, whatever the
    # row says by hand
    item = coverage.Item("charles2021", "Table 3", "statistics", "paper", "full", figures=("charles2021/table3",))
    assert item.status({"charles2021/table3": record}) == "data-limited"
    assert item.status({"charles2021/table3": {**record, "data": {}}}) == "not yet"  # no claims: as before


def test_fedprox_draft_emnist_is_a_seeded_draw_of_tff_writers(tmp_path, monkeypatch):
    import h5py
    import numpy as np

    from replicate.data import emnist_tff

    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = tmp_path / "fed"
    root.mkdir()
    for split in ("train", "test"):
        with h5py.File(root / f"fed_emnist_{split}.h5", "w") as f:
            for w in range(6):
                f[f"examples/w{w}/pixels"] = np.full((w + 1, 28, 28), 1.0, np.float32)
                f[f"examples/w{w}/label"] = np.full(w + 1, w, np.int32)
    a = emnist_tff.emnist_draft_tff(seed=0, num_writers=3, root=str(root))
    b = emnist_tff.emnist_draft_tff(seed=0, num_writers=3, root=str(root))
    c = emnist_tff.emnist_draft_tff(seed=5, num_writers=3, root=str(root))
    assert a.num_clients == 3 and a.meta["users"] == b.meta["users"]
    assert list(a.meta["users"]) == sorted(a.meta["users"])  # kept in the file's order
    # each writer keeps its own images and labels, train and test
    assert all(set(a.train.client(k)[1].tolist()) == {int(u[1:])} for k, u in enumerate(a.meta["users"]))
    assert a.test.sizes.tolist() == [int(u[1:]) + 1 for u in a.meta["users"]]
    draws = {tuple(emnist_tff.emnist_draft_tff(seed=s, num_writers=3, root=str(root)).meta["users"])
             for s in range(6)}
    assert len(draws) > 1 and c.num_clients == 3  # the seed chooses the writers
    with pytest.raises(ReplicateError, match="num_writers must be between 1 and 6"):
        emnist_tff.emnist_draft_tff(num_writers=7, root=str(root))


@pytest.mark.smoke  # runs two notebooks through --check
def test_committed_figures_computed_on_stand_ins_reproduce_with_the_switch(tmp_path, monkeypatch):
    """``--check`` with ``REPLICATE_STAND_INS=1`` regenerates the committed stand-in tables bitwise: the stand-in's
    run configs, loaders and the rows' words are those the committed figures were computed with."""
    import os
    import subprocess
    import sys

    from replicate.core import paths

    monkeypatch.setenv("REPLICATE_STAND_INS", "1")
    keys = ("charles2021/table3", "fedprox2020/table1")
    absent = sorted({name for key in keys for name in requirements.missing(key, "paper")})
    if absent:
        pytest.skip(f"{', '.join(absent)} not available: the committed tables read them")
    env = {**os.environ, "REPLICATE_STAND_INS": "1", "REPLICATE_BUILD": str(tmp_path / "build"),
           "REPLICATE_LEDGER": "off"}
    ran = subprocess.run([sys.executable, "-m", "replicate", "figures", "--check", "--profile", "paper", *keys],
                         env=env, cwd=paths.REPO, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-2000:]
    rows = [line for line in ran.stdout.splitlines() if line.startswith(keys)]
    assert len(rows) == 2 and all("0.00e+00" in row and "reproduced within tolerance" in row for row in rows), rows


def test_a_missing_official_dataset_points_at_the_stand_in_this_machine_holds(official, tmp_path, monkeypatch):
    """The one line that says an official dataset is missing also says where a stand-in for it is staged here, and
    how to choose it; it says nothing of the kind where none is."""
    stand_in = tmp_path / "data" / "cifar10_jpg"
    stand_in.mkdir(parents=True)
    for file in store.spec("cifar10_jpg").files:
        (stand_in / file.name).write_bytes(b"x")  # staged (is_available looks for the files, ensure checks them)
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")
    with pytest.raises(ReplicateError, match=r"offline stand-in for it \(cifar10_jpg: lossy\): REPLICATE_STAND_INS=1"):
        store.ensure("cifar10")
    assert "REPLICATE_STAND_INS=1" in requirements.skip_reason("khanduri2021/fig2", "smoke")
    with pytest.raises(ReplicateError) as err:
        store.ensure("mnist")  # MNIST has no stand-in
    assert "stand-in" not in str(err.value)


def test_each_official_download_names_the_staged_stand_in_its_figures_read():
    """The error for a missing official download points at the stand-in its figures would read: derived from
    STAND_INS and the builders' reads, so a new stand-in pair needs no second table."""
    from replicate.data.registry import READS

    mapping = variants.staged_stand_ins()
    assert mapping == {"emnist_tff": "femnist", "sent140_raw": "sent140", "glove": "sent140",
                       "cifar10": "cifar10_jpg"}
    for loader, (stand_in, _) in variants.STAND_INS.items():
        assert all(mapping[official] in READS[stand_in] for official in READS[loader])
    with pytest.raises(ReplicateError, match="data_source must be one of"):
        variants.check("offline")
