"""LEAF loader, FedProx's LEAF-derived builders (FEMNIST, EMNIST*, Shakespeare, Sent140) and
Table 1 statistics. Unit tests use hand-written files; real-data tests skip when absent."""
import gzip
import json

import numpy as np
import pytest
import torch

import replicate.data as data
from replicate.core.errors import ReplicateError
from replicate.data import leaf, letters, sent140 as sent140_module, shakespeare as sh, store
from replicate.data.federated import FederatedDataset, Split
from replicate.data.stats import table1_statistics

torch.set_num_threads(1)


def _write(path, users):
    """A LEAF JSON file from ``{user: (x, y)}``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "users": list(users), "num_samples": [len(y) for _, y in users.values()],
        "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}))


def _pixels(values):
    return [[v / 255] * 784 for v in values]


@pytest.fixture
def tiny_leaf(tmp_path):
    """a, b in both splits (b in the second train file); c train-only; d test-only."""
    root = tmp_path / "leaf"
    _write(root / "train" / "part_0.json", {"a": ([[1.0, 2.0], [3.0, 4.0]], [0, 1]), "c": ([[0.0, 0.0]], [2])})
    _write(root / "train" / "part_1.json", {"b": ([[5.0, 6.0], [7.0, 8.0], [9.0, 9.5]], [2, 2, 1])})
    _write(root / "test" / "part_0.json", {"b": ([[1.5, 1.5]], [0]), "d": ([[2.0, 2.0], [3.0, 3.0]], [1, 1]),
                                          "a": ([[4.0, 4.5]], [1])})
    return root


# ---- LEAF loader ---------------------------------------------------------------------------

def test_load_leaf_keeps_users_in_both_splits_and_counts_the_dropped(tiny_leaf):
    ds = leaf.load_leaf(tiny_leaf, "tiny", num_classes=3)
    assert ds.meta["users"] == ("a", "b")  # train order: files by name, users as listed
    assert ds.train.sizes.tolist() == [2, 3] and ds.test.sizes.tolist() == [1, 1]
    assert ds.meta["dropped"] == {"train_only_users": 1, "train_only_samples": 1,
                                  "test_only_users": 1, "test_only_samples": 2}
    assert ds.train.x.tolist() == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 9.5]]
    assert ds.train.y.tolist() == [0, 1, 2, 2, 1] and ds.train.y.dtype == torch.int64
    x_b, y_b = ds.test.client(1)  # test rows follow the train client order, not the file order
    assert x_b.tolist() == [[1.5, 1.5]] and y_b.tolist() == [0]
    assert ds.test.client(0)[0].tolist() == [[4.0, 4.5]]
    assert leaf.load_leaf(tiny_leaf, "tiny", 3, shape=(2, 1)).train.x.shape == (5, 2, 1)


def _one(x, y, count=None):
    return json.dumps({"users": ["e"], "num_samples": [len(y) if count is None else count],
                       "user_data": {"e": {"x": x, "y": y}}})


@pytest.mark.parametrize("content, match", [
    ("{not json", "not a readable LEAF JSON"),
    (json.dumps({"users": ["e"], "user_data": {"e": {"x": [1], "y": [0]}}}), "missing key 'num_samples'"),
    (json.dumps({"users": ["e"], "num_samples": [1], "user_data": {}}), "user 'e' has no 'x' and 'y'"),
    (_one([[1, 2]], [0], count=2), "1 inputs and 1 labels but num_samples 2"),
    (_one([[1, 2]], [7]), r"integer label in \[0, 3\)"),
    (_one([[1, 2]], [0.5]), "integer label"),
    (_one([[1, 2, 3]], [0]), r"inputs of shape \(3,\)"),
    (_one([["a", "b"]], [0]), "malformed"),
])
def test_malformed_files_raise_one_error_naming_the_file(tiny_leaf, content, match):
    bad = tiny_leaf / "train" / "part_2.json"
    bad.write_text(content)
    with pytest.raises(ReplicateError, match=match) as err:
        leaf.load_leaf(tiny_leaf, "tiny", num_classes=3)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_missing_folders_duplicates_and_empty_intersections(tiny_leaf, tmp_path):
    _write(tmp_path / "half" / "train" / "f.json", {"a": ([[0.0]], [0])})
    with pytest.raises(ReplicateError, match="half/test does not exist"):
        leaf.load_leaf(tmp_path / "half", "tiny", 3)
    (tmp_path / "empty" / "train").mkdir(parents=True)
    with pytest.raises(ReplicateError, match="holds no .json files"):
        leaf.read_leaf_split(tmp_path / "empty" / "train")
    _write(tiny_leaf / "train" / "part_3.json", {"a": ([[0.0, 0.0]], [0])})
    with pytest.raises(ReplicateError, match="user 'a' is also in .*part_0.json"):
        leaf.read_leaf_split(tiny_leaf / "train")
    other = tmp_path / "disjoint"
    _write(other / "train" / "f.json", {"a": ([[0.0]], [0])})
    _write(other / "test" / "f.json", {"z": ([[0.0]], [0])})
    with pytest.raises(ReplicateError, match="no user appears in both"):
        leaf.load_leaf(other, "disjoint", 1)


def test_niid_sample_takes_whole_shuffled_users_and_cuts_the_last():
    sizes = [5, 40, 7, 13, 22, 3]
    picks = leaf.niid_sample(sizes, 0.5, leaf.data_generator(1, "t", "sample"))
    target = int(0.5 * sum(sizes))
    assert sum(n for _, n in picks) == target
    assert all(n == sizes[k] for k, n in picks[:-1]) and 0 < picks[-1][1] <= sizes[picks[-1][0]]
    assert len({k for k, _ in picks}) == len(picks)
    assert picks == leaf.niid_sample(sizes, 0.5, leaf.data_generator(1, "t", "sample"))
    assert sorted(k for k, _ in leaf.niid_sample(sizes, 1.0, leaf.data_generator(1, "t", "sample"))) == list(range(6))
    with pytest.raises(ReplicateError, match="fraction"):
        leaf.niid_sample(sizes, 0, leaf.data_generator(1, "t", "sample"))


def test_split_by_sample_follows_leaf_counts_and_keeps_order():
    g = leaf.data_generator(0, "t", "split")
    assert leaf.split_by_sample(1, 0.8, g) is None
    for n, n_train in [(2, 1), (3, 2), (10, 8), (11, 8)]:
        train, test = leaf.split_by_sample(n, 0.8, g)
        assert len(train) == n_train and sorted([*train, *test]) == list(range(n))
        assert list(train) == sorted(train) and list(test) == sorted(test)


# ---- FEMNIST and the class-skewed letter sets -----------------------------------------------

def _femnist_root(tmp_path, writers=4, per_label=2):
    """Writers w0..w3 with every label 0..61 (per_label images each); pixel value = label."""
    root = tmp_path / "femnist"
    for split, count in (("train", per_label), ("test", 1)):
        users = {}
        for w in range(writers):
            labels = [c for c in range(62) for _ in range(count)]
            users[f"w{w}"] = (_pixels([(c + w) % 256 for c in labels]), labels)
        _write(root / split / "all_data_0.json", users)
    return root


def test_femnist_shapes_values_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = _femnist_root(tmp_path)
    ds = leaf.femnist(root=str(root))
    assert ds.num_clients == 4 and ds.num_classes == 62
    assert ds.train.x.shape == (4 * 124, 1, 28, 28) and ds.train.x.dtype == torch.float32
    x, y = ds.train.client(1)
    assert torch.equal(x[:, 0, 0, 0], torch.tensor([np.float32(((c + 1) % 256) / 255) for c in y.tolist()]))
    caches = list((tmp_path / "data" / "cache").glob("femnist-*.npz"))
    assert len(caches) == 1
    with np.load(caches[0]) as z:
        assert z["train_x"].dtype == np.uint8  # k/255 pixels are stored losslessly as bytes
    again = leaf.femnist(root=str(root))
    assert torch.equal(again.train.x, ds.train.x) and torch.equal(again.test.y, ds.test.y)
    _write(root / "test" / "all_data_0.json", {"w0": ([[0.123] * 784], [5])})
    changed = leaf.femnist(root=str(root))  # a changed file gets a new cache key
    assert changed.num_clients == 1 and changed.test.x[0, 0, 0, 0].item() == pytest.approx(0.123)


def test_emnist_star_devices_get_their_classes_and_sizes(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    root = str(_femnist_root(tmp_path))
    ds = letters.emnist_star(seed=3, num_devices=30, root=root)
    again = letters.emnist_star(seed=3, num_devices=30, root=root)
    assert torch.equal(ds.train.x, again.train.x) and torch.equal(ds.test.y, again.test.y)
    assert not torch.equal(letters.emnist_star(seed=4, num_devices=30, root=root).train.sizes, ds.train.sizes)
    sizes = torch.empty(30, dtype=torch.float64).log_normal_(
        4.0, 2.0, generator=leaf.data_generator(3, "emnist_star", "sizes")) + 5
    per_class = [max(2, int(float(s) / 20)) for s in sizes]
    assert ds.num_classes == 26 and ds.num_clients == 30
    for u in range(30):
        labels = torch.cat([ds.train.client(u)[1], ds.test.client(u)[1]])
        counts = torch.bincount(labels, minlength=26)
        assert set(torch.nonzero(counts).flatten().tolist()) == {(u + j) % 26 for j in range(20)}
        assert set(counts[counts > 0].tolist()) == {per_class[u]}
        assert len(ds.train.client(u)[1]) == int(0.9 * 20 * per_class[u])
    # lower-case only: LEAF label 36 + c has pixel value 36 + c + writer, never a digit's
    values = torch.round(ds.train.x[:, 0, 0, 0] * 255).long()
    offset = values - ds.train.y - 36
    assert bool(((offset >= 0) & (offset < 4)).all())


def test_femnist_fedprox_uses_letters_a_to_j_three_per_device(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    ds = letters.femnist_fedprox(root=str(_femnist_root(tmp_path)))
    assert ds.num_clients == 200 and ds.num_classes == 10
    for u in (0, 7, 199):
        labels = torch.cat([ds.train.client(u)[1], ds.test.client(u)[1]])
        assert set(labels.tolist()) == {(u + j) % 10 for j in range(3)}


# ---- Shakespeare -----------------------------------------------------------------------------

SNIPPET = """\
The Complete Works of William Shakespeare (header line, dropped)

THE SONNETS

by William Shakespeare

  From fairest creatures we desire increase,
  That thereby beauty's rose might never die,

THE END

<<LICENCE TEXT BETWEEN WORKS>>

1600

THE TRAGEDY OF TESTING

by William Shakespeare

Dramatis Personae

  ALPHA, a lord
  BETA, his friend

ACT I. SCENE 1.

  ALPHA. Good morrow, friend; the day is fair and bright,
    and all the birds do sing upon the hill.
  BETA. Good morrow too, my lord, and well met here.
  ALPHA. What news from court? Speak plainly, I entreat thee.
  Beta. None, sir, but that the King is gone to hunt,
    and left his crown and sceptre on the bench.
  GAMMA. Only one line, so I am skipped.
                                                     Exit

THE SECOND PLAY

by William Shakespeare

  DELTA. One two three four five six seven eight nine ten.
  DELTA. Eleven twelve thirteen fourteen fifteen sixteen.
  DELTA. Seventeen eighteen nineteen twenty  twenty-one.
  EPSILON. A line.
  EPSILON. Another line.

A LONE POEM

by William Shakespeare

  SOLO. Only one role here, so this is not a play.
  SOLO. Still only one.
  SOLO. And again.
"""


def test_parse_plays_finds_roles_and_lines():
    plays = sh.parse_plays(SNIPPET)
    assert [title for title, _ in plays] == ["THE TRAGEDY OF TESTING", "THE SECOND PLAY"]
    roles = plays[0][1]
    assert set(roles) == {"ALPHA", "BETA", "GAMMA"}  # "Beta" folds into BETA
    assert roles["ALPHA"] == ["Good morrow, friend; the day is fair and bright,",
                              "and all the birds do sing upon the hill.",
                              "What news from court? Speak plainly, I entreat thee."]
    # the Exit stage direction is indented like a continuation, so LEAF keeps it for GAMMA
    assert roles["GAMMA"] == ["Only one line, so I am skipped.",
                              " " * 49 + "Exit"]
    assert len(roles["BETA"]) == 3 and plays[1][1]["EPSILON"] == ["A line.", "Another line."]


def test_comedy_of_errors_uses_unindented_speakers():
    text = ("x\n\nSONNETS\n\nby William Shakespeare\n  Sonnet lines.\n\n\n\n\n\n\nTHE COMEDY OF ERRORS\n\nby William Shakespeare\n"
            "ACT I. SCENE 1.\nAEGEON. Proceed, Solinus.\nto procure my fall\n<<licence>>\nnot kept\n"
            "DUKE. Merchant of Syracusa.\n")
    (title, roles), = sh.parse_plays(text)
    assert title == "THE COMEDY OF ERRORS" and "ACT I" not in " ".join(roles)
    assert roles == {"AEGEON": ["Proceed, Solinus.", "to procure my fall"], "DUKE": ["Merchant of Syracusa."]}


def test_role_texts_skip_short_roles_and_collapse_spaces():
    texts = sh.role_texts(sh.parse_plays(SNIPPET))
    assert set(texts) == {"THE_TRAGEDY_OF_TESTING_ALPHA", "THE_TRAGEDY_OF_TESTING_BETA", "THE_SECOND_PLAY_DELTA"}
    assert texts["THE_SECOND_PLAY_DELTA"] == (
        "One two three four five six seven eight nine ten. Eleven twelve thirteen fourteen "
        "fifteen sixteen. Seventeen eighteen nineteen twenty twenty-one. ")
    assert sh.client_name("KING HENRY V", "LORD SCROOP") == "KING_HENRY_V_LORD_SCROOP"


def test_vocabulary_and_windows():
    assert len(sh.ALL_LETTERS) == 80 and len(set(sh.ALL_LETTERS)) == 80
    assert sh.ALL_LETTERS[:3] == "\n !" and sh.ALL_LETTERS[-1] == "}"
    text = "To be, or not to be: that is the question; whether 'tis nobler in the mind to suffer!"
    codes = sh.encode(text)
    assert "".join(sh.ALL_LETTERS[c] for c in codes) == text
    x, y = sh.windows(codes)
    assert x.shape == (len(text) - 80, 80) and x.dtype == np.int64 and y.dtype == np.int64
    for i in range(len(y)):
        assert "".join(sh.ALL_LETTERS[c] for c in x[i]) == text[i:i + 80] and sh.ALL_LETTERS[y[i]] == text[i + 80]
    assert sh.windows(sh.encode("short"))[0].shape == (0, 80)
    with pytest.raises(ReplicateError, match="outside LEAF's 80-character vocabulary"):
        sh.encode("a|b")


def test_shakespeare_builder_on_snippet(tmp_path):
    path = tmp_path / "t8.shakespeare.txt.gz"
    path.write_bytes(gzip.compress(SNIPPET.encode()))
    texts = sh.role_texts(sh.parse_plays(SNIPPET))
    ds = sh.shakespeare(fraction=1.0, seed=5, path=str(path))
    assert sorted(ds.meta["users"]) == sorted(u for u, t in texts.items() if len(t) > 80)
    assert ds.num_classes == 80 and ds.train.x.dtype == torch.int64 and ds.train.x.shape[1:] == (80,)
    for k, user in enumerate(ds.meta["users"]):
        n = len(texts[user]) - 80
        assert ds.train.sizes[k] == int(0.8 * n) and ds.train.sizes[k] + ds.test.sizes[k] == n
        windows = {"".join(sh.ALL_LETTERS[c] for c in row) + sh.ALL_LETTERS[t]
                   for row, t in zip(*map(lambda a: a.tolist(), ds.train.client(k)))}
        assert windows <= {texts[user][i:i + 81] for i in range(n)}
    again = sh.shakespeare(fraction=1.0, seed=5, path=str(path))
    assert torch.equal(again.test.x, ds.test.x)
    with pytest.raises(ReplicateError, match="no client is left"):
        sh.shakespeare(fraction=1.0, min_samples=10_000, path=str(path))


# ---- Sent140 ---------------------------------------------------------------------------------

def _tweet(user, text):
    return ["1", "Mon Apr 06 2009", "NO_QUERY", user, text, "training"]


def test_tokenize_and_encode_follow_leaf():
    assert sent140_module.tokenize("Hello, world! it's 2 late...") == \
        ["Hello", ",", "world", "!", "it's", "2", "late", ".", ".", "."]
    vocab = sent140_module.build_vocabulary(["b a a", "c a b"])
    assert vocab == ("a", "b", "c")
    codes = sent140_module.encode(["a z c", " ".join(["a"] * 30)], vocab)
    assert codes.shape == (2, 25) and codes[0, :4].tolist() == [0, 3, 2, 3] and (codes[0, 3:] == 3).all()
    assert (codes[1] == 0).all()  # truncated to 25 words


@pytest.fixture
def local_sent140(tmp_path, monkeypatch):
    folder = tmp_path / "sent140"
    users = {f"u{k}": ([_tweet(f"u{k}", f"tweet {i} of user{k} word{i % 3}") for i in range(3 + k)],
                       [i % 2 for i in range(3 + k)]) for k in range(6)}
    _write(folder / "all_data_niid_0_keep_30_test_9.json", users)
    monkeypatch.setattr(store, "ensure", lambda name: folder)
    return users


def test_sent140_local_resplit_is_deterministic_and_complete(local_sent140):
    a, b, c = sent140_module.sent140(seed=1), sent140_module.sent140(seed=1), sent140_module.sent140(seed=2)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert a.meta["users"] == tuple(local_sent140) and a.num_classes == 2
    assert a.train.x.shape[1] == 25 and a.train.x.dtype == torch.int64
    changed = False
    for k, (tweets, _) in enumerate(local_sent140.values()):
        n = len(tweets)
        assert a.train.sizes[k] == int(0.8 * n) and a.test.sizes[k] == n - int(0.8 * n)
        changed |= not torch.equal(a.test.client(k)[0], c.test.client(k)[0])
        both = torch.cat([a.train.client(k)[0], a.test.client(k)[0]])
        assert both.shape[0] == n
    assert changed
    vocab = a.meta["vocabulary"]
    train_words = {w for row in a.train.x.tolist() for w in row if w < len(vocab)}
    assert len(train_words) == len(vocab) and a.meta["vocab_size"] == len(vocab) + 1
    first = sent140_module.sent140(seed=1, num_clients=2)  # a smaller federation of the same users and vocabulary
    assert first.meta["users"] == a.meta["users"][:2] and first.meta["vocabulary"] == vocab
    assert torch.equal(first.train.x, a.train.x[:int(a.train.offsets[2])]) and first.test.num_clients == 2


def test_sent140_release_keeps_its_split(tmp_path):
    root = tmp_path / "release"
    _write(root / "train" / "f.json", {"u": ([_tweet("u", "good day"), _tweet("u", "bad day")], [1, 0]),
                                       "v": ([_tweet("v", "ok")], [1])})
    _write(root / "test" / "f.json", {"u": ([_tweet("u", "good night")], [1])})
    ds = sent140_module.sent140(root=str(root))
    assert ds.meta["users"] == ("u",) and ds.meta["vocabulary"] == ("day", "bad", "good")
    assert ds.test.x[0, :2].tolist() == [2, 3]  # "night" is unknown: index len(vocabulary)


# ---- Table 1 statistics ----------------------------------------------------------------------

def test_table1_statistics_counts_train_plus_test():
    split = lambda sizes: Split.from_clients([np.zeros((n, 1)) for n in sizes], [np.zeros(n) for n in sizes])
    ds = FederatedDataset("toy", split([3, 5, 10]), split([1, 1, 0]), 2)
    stats = table1_statistics(ds)
    assert stats == {"dataset": "toy", "devices": 3, "samples": 20, "mean": pytest.approx(20 / 3),
                     "std": pytest.approx(float(np.std([4, 6, 10]))), "counted": "train+test"}
    pooled = FederatedDataset("toy", split([3, 5]), split([7]), 2)
    assert table1_statistics(pooled)["samples"] == 8 and table1_statistics(pooled)["counted"] == "train"


def test_builders_are_registered():
    for name in ("femnist", "emnist_star", "femnist_fedprox", "shakespeare", "sent140"):
        assert name in data.available()
    assert data.parameters("shakespeare")["fraction"] == 0.2


# ---- real data, through the data layer -------------------------------------------------------

def _require(name):
    if not store.is_available(name):
        pytest.skip(f"{name} is neither staged in data_dir() nor in a local source (REPLICATE_DATA_FROM, "
                    f"../shared/data); run `python -m replicate data fetch {name} --from DIR`")


def test_real_femnist_partial_copy():
    _require("femnist")
    ds = data.load("femnist")
    assert ds.num_clients == 105 and ds.train.x.shape == (14_708, 1, 28, 28) and len(ds.test.y) == 1_685
    assert ds.meta["dropped"] == {"train_only_users": 0, "train_only_samples": 0,
                                  "test_only_users": 79, "test_only_samples": 2_403}
    assert 0 <= float(ds.train.x.min()) and float(ds.train.x.max()) <= 1 and int(ds.train.y.max()) == 61
    stats = table1_statistics(ds)
    assert (stats["devices"], stats["samples"]) == (105, 16_393)


def test_real_emnist_star_and_femnist_fedprox():
    _require("femnist")
    star = table1_statistics(data.load("emnist_star"))
    assert (star["devices"], star["samples"]) == (200, 71_620)  # paper: 200, 79,059
    final = table1_statistics(data.load("femnist_fedprox"))
    assert (final["devices"], final["samples"]) == (200, 19_050)  # README: 200, 18,345


def test_real_shakespeare_counts():
    _require("shakespeare")
    clients = sh.shakespeare_clients(sh.read_text())
    assert len(clients) == 1_130 and sum(len(c) - 80 for c in clients.values()) == 4_226_206
    stats = table1_statistics(data.load("shakespeare", seed=0))
    assert (stats["devices"], stats["samples"]) == (210, 845_241)  # paper: 143, 517,706


def test_real_sent140_test_split_resplit():
    _require("sent140")
    ds = data.load("sent140")
    stats = table1_statistics(ds)
    assert (stats["devices"], stats["samples"]) == (2_875, 16_025)
    assert int(ds.train.sizes.sum()) == 12_026 and set(ds.train.y.unique().tolist()) == {0, 1}
