"""TFF's Shakespeare (Charles & Konečný Table 3, Reddi et al.'s input convention): snippets →
[BOS] + characters + [EOS] padded to 81-token chunks, inputs and next-token targets; a hand-made
HDF5 file read back; bad files are refused; the real copy has Table 3's counts, and Table 3's
claims can fail."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from replicate import data
from replicate.core.errors import ReplicateError
from replicate.data import store, tff
from replicate.experiments.charles2021 import table3

h5py = pytest.importorskip("h5py")


def test_vocabulary_is_86_characters_plus_four_tokens():
    assert len(tff.CHARACTERS) == len(set(tff.CHARACTERS)) == 86
    assert (tff.PAD, tff.OOV, tff.BOS, tff.EOS, tff.VOCAB_SIZE) == (0, 87, 88, 89, 90)


def test_snippet_chunks():
    one = tff.chunks("ab}")  # "}" is not in the vocabulary
    assert one.shape == (1, 81)
    ids = tff._IDS
    assert one[0, :5].tolist() == [tff.BOS, ids["a"], ids["b"], tff.OOV, tff.EOS]
    assert not one[0, 5:].any()  # padded with PAD = 0
    long = tff.chunks("x" * 80)  # BOS + 80 + EOS = 82 tokens: two chunks, the second nearly all padding
    assert long.shape == (2, 81) and long[1, 0] == tff.EOS and long[1, 1:].sum() == 0
    exact = tff.chunks("x" * 79)  # 81 tokens: exactly one chunk, no padding
    assert exact.shape == (1, 81) and exact[0, -1] == tff.EOS


def _write(path, clients):
    with h5py.File(path, "w") as f:
        for client, snippets in clients.items():
            f.create_dataset(f"examples/{client}/snippets", data=np.array([s.encode() for s in snippets], dtype=object),
                             dtype=h5py.string_dtype())


def test_hand_made_files(tmp_path):
    (tmp_path / "tff").mkdir()
    _write(tmp_path / "tff/shakespeare_train.h5", {"PLAY_A": ["To be", "or not " * 20], "PLAY_B": ["Hi"],
                                                   "ONLY_TRAIN": ["x"]})
    _write(tmp_path / "tff/shakespeare_test.h5", {"PLAY_A": ["to be"], "PLAY_B": ["Bye", "Now"]})
    ds = tff.shakespeare_tff(root=str(tmp_path))
    assert ds.meta["users"] == ("PLAY_A", "PLAY_B") and ds.meta["train_only_clients"] == 1
    assert ds.meta["snippets"] == {"train": [2, 1], "test": [1, 2]}
    # PLAY_A: "To be" → 1 chunk, "or not " × 20 (140 chars + 2) → 2 chunks; PLAY_B: 1
    assert ds.train.offsets.tolist() == [0, 3, 4] and ds.test.offsets.tolist() == [0, 1, 3]
    assert ds.train.x.shape == (4, 80) and ds.train.x.dtype == torch.int64
    assert torch.equal(ds.train.x[:, 1:], ds.train.y[:, :-1])  # targets are the inputs shifted by one
    assert ds.train.x[0, 0] == tff.BOS and ds.train.y[0, 5] == tff.EOS


def test_bad_file_is_refused(tmp_path):
    with h5py.File(tmp_path / "shakespeare_train.h5", "w") as f:
        f.create_dataset("other", data=[1, 2])
    with pytest.raises(ReplicateError, match="not a TFF Shakespeare file"):
        tff.read_snippets(tmp_path / "shakespeare_train.h5")


def test_table3_claims_fail_on_other_counts():
    import pandas as pd

    rows = [{"dataset": "shakespeare", "ours_name": "x", "column": c, "ours": float(p + (i == 1)), "paper": float(p),
             "why": ""} for i, (c, p) in enumerate(zip(table3.COLUMNS, table3.PAPER["shakespeare"]))]
    rows += [{"dataset": "cifar100", "ours_name": "—", "column": c, "ours": float("nan"), "paper": float(p), "why": ""}
             for c, p in zip(table3.COLUMNS, table3.PAPER["cifar100"])]
    claims = table3.table3_claims(pd.DataFrame(rows), table3.Table3Config())
    assert len(claims) == 1 and not claims[0].passed  # one example off; CIFAR-100 (missing) is not counted


def test_real_tff_shakespeare_has_table3s_counts():
    if not store.is_available("shakespeare_tff"):
        pytest.skip("shakespeare_tff is neither staged nor in a local source; run "
                    "`python -m replicate data fetch shakespeare_tff --from DIR`")
    ds = data.load("shakespeare_tff")
    assert ds.num_clients == ds.test.num_clients == 715
    assert (sum(ds.meta["snippets"]["train"]), sum(ds.meta["snippets"]["test"])) == (16_068, 2_356)
    assert (ds.train.x.shape, ds.test.x.shape) == ((37_784, 80), (5_490, 80))
    assert int(ds.train.x.max()) < tff.VOCAB_SIZE
    config = table3.Table3Config(datasets=("shakespeare",))
    (claim,) = table3.table3_claims(table3.table3(config), config)
    assert claim.passed, claim.result


def test_real_tff_shakespeare_first_roles_and_its_model():
    if not store.is_available("shakespeare_tff"):
        pytest.skip("shakespeare_tff is neither staged nor in a local source")
    from replicate.fl import models

    small = data.load("shakespeare_tff", num_clients=3)
    assert small.num_clients == 3 and len(small.meta["snippets"]["train"]) == 3
    model = models.for_dataset("char_lstm_tff", small)
    assert model.num_params == 820_522  # Keras' count for Reddi et al.'s 8-d embedding, 2×256 LSTM, dense 90
    assert (model.loss_kind, model.uncounted) == ("token", (tff.PAD, tff.OOV, tff.BOS, tff.EOS))
