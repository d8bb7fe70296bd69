"""Sent140 from the raw Sentiment140 CSVs through LEAF's pipeline, and GloVe: tiny files in the
official layouts, built here."""
import csv
import zipfile

import numpy as np
import pytest

from replicate.core.errors import ReplicateError
from replicate.data import archives, sent140, store


def _rows(user, n, polarity="4", start=0):
    return [[polarity, str(start + i), "Mon Apr 06 22:19:45 PDT 2009", "NO_QUERY", user,
             f"the cat {user} number {i} . caf\xe9 !"] for i in range(n)]


def _csvs(folder, train_rows, test_rows):
    folder.mkdir(parents=True, exist_ok=True)
    for (name, _), rows in zip(sent140.RAW_FILES, (train_rows, test_rows)):
        with open(folder / name, "w", newline="", encoding="ISO-8859-1") as fh:
            csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(rows)
    return folder


def test_raw_users_follow_leafs_combine_and_json_steps(tmp_path):
    folder = _csvs(tmp_path / "raw", _rows("zed", 2, "0") + _rows("amy", 1, "4") + _rows("zed", 1, "4", 10),
                   _rows("amy", 2, "2", 20))
    users = sent140.raw_users(folder)
    assert list(users) == ["amy", "zed"]  # sorted by user
    assert users["amy"].y == [1, 0, 0]  # polarity 4 -> 1, the test file's neutral 2 -> 0
    assert [r[0] for r in users["zed"].x] == ["0", "1", "10"]  # stable: file order within a user
    assert users["amy"].x[0][3:] == ["amy", "the cat amy number 0 . caf\xe9 !", "training"]
    assert users["amy"].x[-1][-1] == "test"


def test_malformed_csv_row_is_named(tmp_path):
    folder = _csvs(tmp_path / "raw", [["4", "1", "x"]], [])
    with pytest.raises(ReplicateError, match="training.1600000.processed.noemoticon.csv:1: 3 fields"):
        sent140.raw_users(folder)


def _glove(path, words):
    rs = np.random.RandomState(0)
    path.write_text("".join(f"{w} " + " ".join(f"{v:.4f}" for v in rs.randn(3)) + "\n" for w in words),
                    encoding="utf-8")
    return path


def test_sent140_leaf_samples_filters_splits_and_encodes_with_glove(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    train = [row for k in range(6) for row in _rows(f"u{k}", 10 + 10 * k, "4" if k % 2 else "0")]
    folder = _csvs(tmp_path / "raw", train, _rows("u9", 3))
    glove = _glove(tmp_path / "glove.txt", ["the", "cat", ".", "!", "number"])
    words, vectors = sent140.glove_vectors(glove)
    assert words == ("the", "cat", ".", "!", "number") and vectors.shape == (5, 3) and vectors.dtype == np.float32
    ds = sent140.sent140_leaf(fraction=1.0, min_samples=30, folder=str(folder), glove=str(glove))
    assert set(ds.meta["users"]) == {"u3", "u4", "u5"}  # 40, 50, 60 tweets: more than 30
    assert len(ds.train.y) + len(ds.test.y) == 150 and ds.train.x.shape[1] == 25
    assert ds.meta["vocab_size"] == 6 and "GloVe" in ds.meta["embedding"]
    first = ds.train.x[0].tolist()
    assert first[:2] == [0, 1] and first[-1] == 5  # "the cat", then padding = len(vocabulary)
    # the LSTM's frozen table is GloVe's rows and a zero row for unknown words and padding (LEAF's get_embs)
    assert ds.meta["vectors"].shape == (6, 3) and not ds.meta["vectors"][5].any()
    from replicate.fl import models
    from replicate.fl.models.lstm import CharLSTM

    model = CharLSTM(6, embed=3, hidden=4, head=(2,), num_classes=2, frozen_embedding=True, vectors=ds.meta["vectors"])
    assert np.array_equal(model.table("cpu").numpy(), ds.meta["vectors"])
    with pytest.raises(ReplicateError, match="the model needs"):
        models.for_dataset("sent_lstm", ds)  # 3-d vectors for the authors' 300-d embedding: refused, not padded
    tweets = sent140.sent140_leaf(fraction=1.0, min_samples=30, folder=str(folder), vocabulary="tweets")
    assert "u3" in tweets.meta["vocabulary"] and "not GloVe's" in tweets.meta["deviations"][-1]
    with pytest.raises(ReplicateError, match="no user is left"):
        sent140.sent140_leaf(fraction=1.0, min_samples=100, folder=str(folder), glove=str(glove))


def test_raw_zip_has_no_published_checksum_so_the_first_copy_is_pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPLICATE_DATA_FROM", "none")  # no local copy
    folder = _csvs(tmp_path / "raw", _rows("amy", 3), _rows("amy", 1))
    (tmp_path / "src").mkdir()
    with zipfile.ZipFile(tmp_path / "src" / "trainingandtestdata.zip", "w") as zf:
        for name, _ in sent140.RAW_FILES:
            zf.write(folder / name, name)
    staged = store.fetch("sent140_raw", tmp_path / "src")
    assert archives.pinned("sent140_raw/trainingandtestdata.zip") is not None
    assert list(sent140.raw_users(staged)) == ["amy"]
