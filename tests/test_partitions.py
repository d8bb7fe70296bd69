"""Partitions: disjoint and complete, seeded, the skew they claim, hand-worked tiny cases, and federate()."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from replicate.core.errors import ReplicateError  # noqa: E402
from replicate.data import partitions as P  # noqa: E402

LABELS = np.random.default_rng(0).integers(0, 10, 1000)
SEEDED = {
    "iid": P.iid(7),
    "shards": P.shards(20, 2),
    "dirichlet": P.dirichlet(0.5, 12, min_size=5),
    "quantity_skew": P.quantity_skew(9, sigma=1.5),
}


def _tv_to_global(parts, labels, num_classes):
    """Mean over clients of the total-variation distance between the client's label distribution and the pool's."""
    counts = P.describe(parts, labels, num_classes)["counts"]
    assert (counts.sum(axis=1) > 0).all()
    client = counts / counts.sum(axis=1, keepdims=True)
    pool = np.bincount(labels, minlength=num_classes) / len(labels)
    return float(0.5 * np.abs(client - pool).sum(axis=1).mean())


def _assert_disjoint_and_complete(parts, n):
    assert all(p.dtype == np.int64 and p.ndim == 1 for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(n))


@pytest.mark.parametrize("name", [*SEEDED, "natural"])
def test_every_sample_is_in_exactly_one_client(name):
    partition = SEEDED.get(name) or P.natural(LABELS % 4 * 3 + 1)
    parts = partition.assign(LABELS, seed=3)
    _assert_disjoint_and_complete(parts, len(LABELS))
    assert len(parts) == partition.clients


@pytest.mark.parametrize("name", SEEDED)
def test_same_seed_same_partition_and_other_seeds_differ(name):
    partition = SEEDED[name]
    a, b, c = (partition.assign(LABELS, seed=s) for s in (5, 5, 6))
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert not all(np.array_equal(u, v) for u, v in zip(a, c))


def test_iid_sizes_follow_the_stated_rule():
    assert [len(p) for p in P.iid(3).assign(np.zeros(10, dtype=int), seed=0)] == [4, 3, 3]


def test_iid_refuses_more_clients_than_samples():
    with pytest.raises(ReplicateError, match="fewer clients"):
        P.iid(11).assign(np.zeros(10, dtype=int), seed=0)


def test_tiny_shards_give_each_client_two_whole_label_pairs():
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    for seed in range(10):
        parts = P.shards(2, 2).assign(labels, seed)
        _assert_disjoint_and_complete(parts, 8)
        for p in parts:
            held = labels[p]
            assert len(p) == 4 and len(set(held)) == 2
            assert all((held == c).sum() == 2 for c in set(held))
        d = P.describe(parts, labels)
        assert d["classes_per_client"].tolist() == [2, 2]
        assert sorted(d["counts"].ravel().tolist()) == [0] * 4 + [2] * 4
        assert d["counts"].sum(axis=0).tolist() == [2, 2, 2, 2]


def test_describe_on_a_hand_worked_partition():
    labels = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    d = P.describe([np.array([0, 1, 4, 5]), np.array([2, 3, 6, 7])], labels)
    assert d["counts"].tolist() == [[2, 0, 2, 0], [0, 2, 0, 2]]
    assert d["classes_per_client"].tolist() == [2, 2]
    assert d["clients"] == 2 and d["samples"].tolist() == [4, 4]
    assert (d["samples_mean"], d["samples_std"], d["samples_min"], d["samples_max"]) == (4.0, 0.0, 4, 4)
    assert P.describe([np.array([0, 1])], labels, num_classes=6)["counts"].tolist() == [[2, 0, 0, 0, 0, 0]]


def test_aligned_shards_hold_at_most_two_labels_each():
    # 10 classes × 200 samples into 40 shards of 50: each shard lies inside one class
    labels = np.random.default_rng(1).permutation(np.repeat(np.arange(10), 200))
    parts = P.shards(20, 2).assign(labels, seed=0)
    assert [len(p) for p in parts] == [100] * 20
    assert P.describe(parts, labels)["classes_per_client"].max() <= 2


def test_dirichlet_large_alpha_is_close_to_iid_and_small_alpha_is_skewed():
    # 10 classes × 2,000 samples over 20 clients. At α = 1e4 each client's share of a class is 1/20 with
    # standard deviation ≈ 5e-4, about one sample in its 100, so the distance is a few thousandths
    # (measured 0.004; a random IID cut gives about 0.037 from sampling alone). At α = 0.1 a client's
    # share of a class is Beta(0.1, 1.9): each class lands mostly on one or two clients, a client is
    # dominated by a few classes and holds ≥ 1 sample of a class with probability about 0.55
    # (measured: distance 0.71, 5.45 classes per client).
    labels = np.repeat(np.arange(10), 2000)
    near_iid = P.dirichlet(1e4, 20).assign(labels, seed=0)
    skewed = P.dirichlet(0.1, 20, min_size=1).assign(labels, seed=0)
    assert _tv_to_global(near_iid, labels, 10) < 0.05
    assert _tv_to_global(skewed, labels, 10) > 0.5
    assert P.describe(near_iid, labels)["classes_per_client"].min() == 10
    assert P.describe(skewed, labels)["classes_per_client"].mean() < 8


def test_dirichlet_honours_min_size_and_refuses_an_impossible_one():
    labels = np.repeat(np.arange(10), 200)
    parts = P.dirichlet(0.1, 20, min_size=30).assign(labels, seed=2)
    _assert_disjoint_and_complete(parts, len(labels))
    assert min(len(p) for p in parts) >= 30
    with pytest.raises(ReplicateError, match="lower min_size"):
        P.dirichlet(0.1, 20, min_size=101).assign(labels, seed=0)
    # possible in principle (exactly equal clients), never drawn: refused after the bounded redraws
    with pytest.raises(ReplicateError, match="lower min_size or raise alpha"):
        P.dirichlet(0.01, 4, min_size=50).assign(np.repeat(np.arange(10), 20), seed=0)


@pytest.mark.parametrize("alpha", [0, -1.0, float("inf"), float("nan"), True, "1"])
def test_dirichlet_refuses_a_bad_alpha(alpha):
    with pytest.raises(ReplicateError, match="alpha"):
        P.dirichlet(alpha, 10)


def test_bad_constructor_arguments_are_refused():
    for make in (lambda: P.iid(0), lambda: P.shards(2, 0), lambda: P.dirichlet(1.0, 0),
                 lambda: P.dirichlet(1.0, 3, min_size=-1), lambda: P.quantity_skew(3, sigma=-1), lambda: P.natural([])):
        with pytest.raises(ReplicateError):
            make()
    with pytest.raises(ReplicateError, match="integers"):
        P.iid(2).assign(np.array([0.5, 1.0]), seed=0)
    with pytest.raises(ReplicateError, match="seed"):
        P.iid(2).assign(np.array([0, 1]), seed=-1)


def test_quantity_skew_sizes_vary_stay_positive_and_sum_to_n():
    parts = P.quantity_skew(50, sigma=1.0).assign(np.zeros(2000, dtype=int), seed=4)
    sizes = np.array([len(p) for p in parts])
    assert sizes.std() > 0 and sizes.min() >= 1 and sizes.sum() == 2000
    even = [len(p) for p in P.quantity_skew(4, sigma=0.0).assign(np.zeros(10, dtype=int), seed=0)]
    assert sorted(even) == [2, 2, 3, 3] and sum(even) == 10


def test_natural_clients_in_order_of_first_appearance_whatever_the_seed():
    groups = np.array([5, 5, 7, 5, 9])
    for seed in (0, 1):
        parts = P.natural(groups).assign(np.zeros(5, dtype=int), seed)
        assert [p.tolist() for p in parts] == [[0, 1, 3], [2], [4]]
    assert P.natural(["w2", "w1", "w2"]).spec() == {"name": "natural", "clients": 2}
    with pytest.raises(ReplicateError, match="one id per sample"):
        P.natural(groups).assign(np.zeros(4, dtype=int), seed=0)


def test_federate_builds_the_clients_the_partition_gives():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 1, 2, 2))
    y = rng.integers(0, 5, 300)
    partition = P.dirichlet(1.0, 6, min_size=10)
    ds = P.federate(torch.from_numpy(x), torch.from_numpy(y), partition, seed=7,
                    test=(x[:40], y[:40]), name="toy", num_classes=6)
    parts = partition.assign(y, seed=7)
    assert ds.name == "toy" and ds.num_clients == 6 and ds.num_classes == 6
    assert ds.train.offsets.tolist() == np.cumsum([0] + [len(p) for p in parts]).tolist()
    assert ds.train.x.dtype == torch.float32 and ds.train.y.dtype == torch.int64
    assert ds.train.x.shape == (300, 1, 2, 2)
    for k, p in enumerate(parts):
        xk, yk = ds.train.client(k)
        assert np.array_equal(xk.numpy(), x[p].astype(np.float32)) and np.array_equal(yk.numpy(), y[p])
    assert ds.test.num_clients == 1 and ds.test.offsets.tolist() == [0, 40]
    assert np.array_equal(ds.test.y.numpy(), y[:40])
    assert ds.meta == {"partition": {"name": "dirichlet", "alpha": 1.0, "clients": 6, "min_size": 10},
                       "seeds": {"partition": 7}}
    assert P.federate(x, y, P.iid(3)).num_classes == 5 and P.federate(x, y, P.iid(3)).test is None


def test_federate_refuses_bad_input_in_one_line():
    x, y = np.zeros((5, 3)), np.arange(5)
    cases = [(x, y[:4], P.iid(2), "one label per row"), (x, y.astype(float), P.iid(2), "integers"),
             (x[:0], y[:0], P.iid(2), "non-empty"), (x, y, "iid", "partition must be"),
             (x, y - 1, P.iid(2), ">= 0")]
    for xs, ys, partition, message in cases:
        with pytest.raises(ReplicateError, match=message) as error:
            P.federate(xs, ys, partition)
        assert "\n" not in str(error.value)
    with pytest.raises(ReplicateError, match="num_classes"):
        P.federate(x, y, P.iid(2), num_classes=3)
    with pytest.raises(ReplicateError, match="test"):
        P.federate(x, y, P.iid(2), test=(x, y[:2]))


def test_label_heatmap_returns_axes():
    labels = np.repeat(np.arange(10), 50)
    counts = P.describe(P.dirichlet(0.3, 8).assign(labels, seed=0), labels)["counts"]
    ax = P.plot_label_heatmap(counts)
    assert isinstance(ax, matplotlib.axes.Axes)
    assert ax.get_xlabel() == "client" and ax.images[0].get_array().shape == (10, 8)
    _, given = plt.subplots()
    assert P.plot_label_heatmap(counts, ax=given) is given
    plt.close("all")
