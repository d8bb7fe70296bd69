"""Sent140 tweet sentiment, one device per Twitter user (FedProx draft §5.1, App. C.1).

Spec ``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §1(c). FedProx feeds
``line_to_indices(x[4])`` to an LSTM. ``x[4]`` is the tweet text. The tokens come from
``re.findall(r"[\\w']+|[.,!?;]", text)`` with no lower-casing. The first 25 are kept, and
both padding and unknown words map to index |vocab|. The vocabulary and frozen embedding
are GloVe 6B 300d. The label is 1 for a positive tweet (LEAF's y is already 0/1). FedProx
samples with ``-s niid --sf 0.3 -k 30 -t sample`` (final: 772 devices, 40,783 samples,
mean 53, std 32). Draft Table 1 lists 5,726 devices, 215,829 samples, mean 38 and std 19,
from unpublished arguments.

DEVIATION (local data). Only LEAF's TEST split exists here
(``all_data_niid_0_keep_30_test_9.json``: 2,875 users with more than 30 tweets, 10% of
each user's tweets, 16,025 in all), and GloVe does not. :func:`sent140` therefore
re-splits each user's available tweets 80/20 with LEAF's by-sample rule
(:func:`~replicate.data.leaf.split_by_sample`), deterministically from ``seed``. It uses a
vocabulary of the words in the *training* tweets (the first 25 tokens of each), ordered
by frequency and then alphabetically, and expects embeddings to be learned. Given
``root=DIR`` with LEAF ``train/`` and ``test/`` folders (the real release), the
release's split is kept and only the vocabulary is built the same way.

With internet, :func:`sent140_leaf` runs LEAF's whole pipeline here from the raw Sentiment140
CSVs (store entry ``sent140_raw``) with the GloVe vocabulary (store entry ``glove``); the local
test-split variant above stays the offline fallback, labelled by its deviations.
"""
from __future__ import annotations

import collections
import csv
import re
from pathlib import Path

import numpy as np

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.data import cache, store
from replicate.core.checks import check_seed
from replicate.data.federated import FederatedDataset, Split
from replicate.data.leaf import LeafUser, data_generator, read_leaf_split, sample_and_split, split_by_sample

MAX_WORDS = 25
TEXT_FIELD = 4  # LEAF's x = [id, date, query, user, text, source]
_TOKEN = re.compile(r"[\w']+|[.,!?;]")


def tokenize(text: str) -> list[str]:
    """LEAF ``split_line``: words (with apostrophes) and the punctuation marks .,!?;"""
    return _TOKEN.findall(text)


def build_vocabulary(texts) -> tuple[str, ...]:
    """Words among the first :data:`MAX_WORDS` tokens of ``texts``, most frequent first
    (ties alphabetical); index ``len(vocabulary)`` is unknown/padding."""
    counts = collections.Counter(w for t in texts for w in tokenize(t)[:MAX_WORDS])
    return tuple(sorted(counts, key=lambda w: (-counts[w], w)))


def encode(texts, vocabulary) -> np.ndarray:
    """LEAF ``line_to_indices``: (n, 25) int64, unknown words and padding → len(vocabulary)."""
    index = {w: i for i, w in enumerate(vocabulary)}
    unknown = len(vocabulary)
    out = np.full((len(texts), MAX_WORDS), unknown, dtype=np.int64)
    for row, text in enumerate(texts):
        ids = [index.get(w, unknown) for w in tokenize(text)[:MAX_WORDS]]
        out[row, :len(ids)] = ids
    return out


def _texts_and_labels(name: str, user: LeafUser) -> tuple[list[str], np.ndarray]:
    try:
        texts = [str(record[TEXT_FIELD]) for record in user.x]
        labels = np.asarray(user.y, dtype=np.int64)
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise ReplicateError(f"{user.file}: user {name!r} needs tweet records with the text "
                             f"at x[{TEXT_FIELD}] and labels 0/1 ({exc})") from None
    if labels.size and (labels.min() < 0 or labels.max() > 1):
        raise ReplicateError(f"{user.file}: user {name!r} has labels outside 0/1")
    return texts, labels


@builder("sent140", reads=("sent140",))
def sent140(seed: int = 0, train_fraction: float = 0.8, root: str | None = None,
            num_clients: int | None = None) -> FederatedDataset:
    """Sent140 as (n, 25) int64 token indices with binary labels. One device per user. See
    the module docstring for the deviation when only the local test split exists.

    ``meta["vocabulary"]`` lists the words, and ``meta["vocab_size"]`` = len + 1 includes
    the unknown/padding index. For seed 0 the local variant gives 2,875 devices, 16,025
    samples, mean 5.57 and std 3.09 (train 12,026, test 3,999), with a vocabulary of
    25,079 words. ``num_clients`` keeps the first users only (the same vocabulary; smoke runs).
    """
    check_seed(seed)
    if not 0 < train_fraction < 1:
        raise ReplicateError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    if root is not None:
        train_users = read_leaf_split(Path(root) / "train")
        test_users = read_leaf_split(Path(root) / "test")
        names = [u for u in train_users if u in test_users]
        if not names:
            raise ReplicateError(f"sent140: no user of {root} is in both train/ and test/")
        train = [_texts_and_labels(u, train_users[u]) for u in names]
        test = [_texts_and_labels(u, test_users[u]) for u in names]
        deviations = ["GloVe unavailable: vocabulary from the training tweets, embeddings learned"]
        source = f"LEAF train/ and test/ in {root}"
    else:
        folder = store.ensure("sent140")
        users = read_leaf_split(folder)
        g = data_generator(seed, "sent140", "split")
        names, train, test = [], [], []
        for name, user in users.items():
            texts, labels = _texts_and_labels(name, user)
            rows = split_by_sample(len(labels), train_fraction, g)
            if rows is None:
                continue
            names.append(name)
            train.append(([texts[i] for i in rows[0]], labels[rows[0]]))
            test.append(([texts[i] for i in rows[1]], labels[rows[1]]))
        deviations = [
            "only LEAF's test split (10% of each user's tweets) exists locally; it is re-split "
            f"{train_fraction:g}/{1 - train_fraction:g} per user with seed {seed}",
            "GloVe unavailable: vocabulary from the training tweets, embeddings learned"]
        source = f"{folder}/all_data_niid_0_keep_30_test_9.json (LEAF test split)"
    vocabulary = build_vocabulary(t for texts, _ in train for t in texts)
    data = FederatedDataset(
        name="sent140",
        train=_split(train, vocabulary),
        test=_split(test, vocabulary),
        num_classes=2,
        meta={
            "paper": "FedProx draft §5.1, App. C.1, Table 1 (Sent140)",
            "source": source,
            "users": tuple(names),
            "vocabulary": vocabulary,
            "vocab_size": len(vocabulary) + 1,
            "seeds": {"split": seed},
            "deviations": deviations,
        },
    )
    return data if num_clients is None else data.first(num_clients)


def _split(parts, vocabulary) -> Split:
    texts = [t for texts, _ in parts for t in texts]
    labels = np.concatenate([labels for _, labels in parts]) if parts else np.zeros(0, np.int64)
    return Split.from_arrays(encode(texts, vocabulary), labels, [len(y) for _, y in parts])


# ---- the LEAF pipeline from the raw Sentiment140 CSVs, and GloVe --------------------------------

RAW_FILES = (("training.1600000.processed.noemoticon.csv", "training"), ("testdata.manual.2009.06.14.csv", "test"))
GLOVE_FILE = "glove.6B.300d.txt"


def raw_users(folder: str | Path | None = None) -> dict[str, LeafUser]:
    """LEAF ``combine_data.py`` + ``data_to_json.py`` over the two CSVs of ``trainingandtestdata.zip``
    (default: the verified ``sent140_raw`` store entry).

    Rows ``polarity, id, date, query, user, text`` (ISO-8859-1), training rows then test rows,
    stably sorted by user; a user's ``x`` records are ``[id, date, query, user, text, "training" |
    "test"]`` and ``y`` is 1 for polarity 4, else 0 (the test file's neutral 2 counts as 0, as in
    LEAF). Users come out in sorted order, as in LEAF's ``all_data.json``.
    """
    root = Path(folder) if folder is not None else store.ensure("sent140_raw")
    rows = []
    for name, split in RAW_FILES:
        path = root / name
        try:
            with open(path, newline="", encoding="ISO-8859-1") as fh:
                for line, row in enumerate(csv.reader(fh), 1):
                    if len(row) != 6:
                        raise ReplicateError(f"{path}:{line}: {len(row)} fields; Sentiment140 rows have 6 "
                                             f"(polarity, id, date, query, user, text)")
                    rows.append((row[4], row[1:] + [split], 1 if row[0] == "4" else 0))
        except OSError as exc:
            raise ReplicateError(f"{path}: cannot read the Sentiment140 CSV ({exc})") from None
    rows.sort(key=lambda r: r[0])  # stable, like LEAF's sorted(..., key=lambda x: x[4])
    users: dict[str, LeafUser] = {}
    for user, record, label in rows:
        entry = users.setdefault(user, LeafUser([], [], root))
        entry.x.append(record)
        entry.y.append(label)
    return users


def glove_vectors(path: str | Path | None = None) -> tuple[tuple[str, ...], np.ndarray]:
    """GloVe 6B 300-d words (file order) and their (n, 300) float32 vectors, as LEAF's
    ``get_embs.py`` reads them; index ``n`` (unknown/padding) is left to the model, with a zero
    vector in LEAF. Parsed once and cached (``data_dir()/cache/glove-*.npz``)."""
    path = Path(path) if path is not None else store.ensure("glove") / GLOVE_FILE
    stat = path.stat()
    file = cache.path("glove", f"{stat.st_size}-{stat.st_mtime_ns}")
    arrays = cache.load(file, ("words", "vectors"))
    if arrays is None:
        words, vectors = [], []
        with open(path, encoding="utf-8") as fh:
            for line, text in enumerate(fh, 1):
                word, *values = text.rstrip("\n").split(" ")
                if not values:
                    raise ReplicateError(f"{path}:{line}: a GloVe line is a word and its vector")
                words.append(word)
                vectors.append(np.asarray(values, dtype=np.float32))
        if len({len(v) for v in vectors}) > 1:
            raise ReplicateError(f"{path}: vectors of different lengths")
        arrays = {"words": np.array(words, dtype=str), "vectors": np.stack(vectors)}
        cache.save(file, arrays)
    return tuple(arrays["words"].tolist()), arrays["vectors"]


@builder("sent140_leaf", reads=("sent140_raw", "glove"))
def sent140_leaf(fraction: float = 0.3, min_samples: int = 30, train_fraction: float = 0.9, seed: int = 0,
                 vocabulary: str = "glove", folder: str | None = None, glove: str | None = None,
                 num_clients: int | None = None) -> FederatedDataset:
    """FedProx's Sent140 from the raw CSVs: LEAF ``-s niid --sf 0.3 -k 30 -t sample`` (train
    fraction 0.9), written here, then FedProx's 25-token encoding.

    :func:`raw_users`, then :func:`~replicate.data.leaf.niid_sample` with ``fraction`` over the
    users in LEAF's order, then users with more than ``min_samples`` tweets are kept (LEAF
    ``remove_users.py``), then each user's tweets are split with
    :func:`~replicate.data.leaf.split_by_sample`. ``vocabulary="glove"``: GloVe 6B's words, the
    rows of the authors' frozen embedding (vectors from :func:`glove_vectors`); ``"tweets"``: the
    words of the training tweets, as the offline variant builds it. LEAF's draws are
    unseeded; ``seed`` drives them here. ``num_clients`` keeps the first users only (smoke runs).
    """
    check_seed(seed)
    if vocabulary not in ("glove", "tweets"):
        raise ReplicateError(f"vocabulary must be 'glove' or 'tweets', got {vocabulary!r}")
    if not isinstance(min_samples, int) or min_samples < 0:
        raise ReplicateError(f"min_samples must be an integer >= 0, got {min_samples!r}")
    users = raw_users(folder)
    names = list(users)
    kept, train, test = [], [], []
    for k, _, rows in sample_and_split([len(users[u].y) for u in names], fraction, min_samples, train_fraction, seed,
                                       "sent140_leaf"):
        texts, labels = _texts_and_labels(names[k], users[names[k]])
        kept.append(names[k])
        train.append(([texts[i] for i in rows[0]], labels[rows[0]]))
        test.append(([texts[i] for i in rows[1]], labels[rows[1]]))
    if not kept:
        raise ReplicateError("sent140_leaf: no user is left after sampling; raise fraction or lower min_samples")
    vectors = None
    if vocabulary == "glove":  # the authors' frozen table: GloVe's rows, then a zero row for unknown words and padding
        words, found = glove_vectors(glove)
        vectors = np.concatenate([found, np.zeros((1, found.shape[1]), found.dtype)])
    else:
        words = build_vocabulary(t for texts, _ in train for t in texts)
    data = FederatedDataset(
        name="sent140", train=_split(train, words), test=_split(test, words), num_classes=2,
        meta={"paper": "FedProx draft §5.1, App. C.1, Table 1 (Sent140)",
              "procedure": f"LEAF -s niid --sf {fraction} -k {min_samples} -t sample (train {train_fraction}) "
                           "from the raw Sentiment140 CSVs",
              "source": "Sentiment140 trainingandtestdata.zip (store: sent140_raw)",
              "users": tuple(kept), "vocabulary": words, "vocab_size": len(words) + 1, "vectors": vectors,
              "embedding": ("GloVe 6B 300d, frozen (replicate.data.sent140.glove_vectors)" if vocabulary == "glove"
                            else "none: vocabulary of the training tweets"),
              "seeds": {"sample": seed, "split": seed},
              "deviations": ["LEAF's unseeded sampling and split draws are seeded here"]
                            + ([] if vocabulary == "glove" else ["vocabulary from the training tweets, not GloVe's"])})
    return data if num_clients is None else data.first(num_clients)
