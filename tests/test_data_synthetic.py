"""Synthetic(α, β): sample-count law, generative model and RNG order of spec §1(a)."""
import numpy as np
import pytest
import torch

from replicate.data.synthetic import synthetic, synthetic_iid
from replicate.core.errors import ReplicateError


def _client_xy(ds, k):
    x_tr, y_tr = ds.train.client(k)
    x_te, y_te = ds.test.client(k)
    return torch.cat([x_tr, x_te]).double().numpy(), torch.cat([y_tr, y_te]).numpy()


def test_sample_count_law_and_90_10_split():
    ds = synthetic(1, 1, num_clients=100, seed=3)
    n = np.random.RandomState(3).lognormal(4, 2, 100).astype(int) + 50
    assert ds.train.sizes.tolist() == [int(0.9 * v) for v in n]
    assert (ds.train.sizes + ds.test.sizes).tolist() == n.tolist()
    assert ds.num_clients == 100 and ds.num_features == 60 and ds.num_classes == 10
    assert ds.name == "synthetic(1,1)"


def test_labels_come_from_each_devices_model_in_the_specified_rng_order():
    alpha, beta, N = 0.5, 0.5, 4
    ds = synthetic(alpha, beta, num_clients=N, seed=11)
    assert ds.name == "synthetic(0.5,0.5)"
    rng = np.random.RandomState(11)
    rng.lognormal(4, 2, N)
    u = rng.normal(0, alpha, N)
    B = rng.normal(0, beta, N)
    v = [rng.normal(B[k], 1, 60) for k in range(N)]
    for k in range(N):
        W = rng.normal(u[k], 1, (60, 10))
        b = rng.normal(u[k], 1, 10)
        X = rng.multivariate_normal(v[k], np.diag(np.arange(1, 61) ** -1.2), len(_client_xy(ds, k)[1]))
        x, y = _client_xy(ds, k)
        # the same rows, shuffled before the 90/10 split
        assert np.allclose(np.sort(x, axis=0), np.sort(X, axis=0), atol=1e-5)
        assert np.array_equal(y, np.argmax(x @ W + b, axis=1))


def test_iid_variant_shares_one_model_and_has_sigma_covariance():
    ds = synthetic_iid(num_clients=100, seed=0)
    assert ds.name == "synthetic_iid"
    rng = np.random.RandomState(0)
    rng.lognormal(4, 2, 100)
    W, b = rng.normal(0, 1, (60, 10)), rng.normal(0, 1, 10)
    x = torch.cat([ds.train.x, ds.test.x]).double().numpy()
    y = torch.cat([ds.train.y, ds.test.y]).numpy()
    assert np.array_equal(y, np.argmax(x @ W + b, axis=1))
    var = x.var(axis=0)
    assert np.allclose(var, np.arange(1, 61) ** -1.2, rtol=0.05)
    assert np.abs(x.mean(axis=0)).max() < 0.02


def test_non_iid_devices_have_shifted_feature_means():
    ds = synthetic(0, 1, num_clients=20, seed=0)
    means = np.stack([_client_xy(ds, k)[0].mean(axis=0) for k in range(20)])
    assert means.mean(axis=1).std() > 0.3  # B_k ~ N(0, 1) shifts every device


def test_same_seed_same_tensors_other_seed_other_data():
    a, b = synthetic(1, 1, num_clients=10, seed=5), synthetic(1, 1, num_clients=10, seed=5)
    for part in ("train", "test"):
        for field in ("x", "y", "offsets"):
            assert torch.equal(getattr(getattr(a, part), field), getattr(getattr(b, part), field))
    c = synthetic(1, 1, num_clients=10, seed=6)
    assert not torch.equal(a.train.offsets, c.train.offsets)


@pytest.mark.parametrize("kwargs, match", [
    (dict(alpha=-0.1, beta=0), "alpha"),
    (dict(alpha=0, beta=-1), "beta"),
    (dict(alpha=0, beta=0, num_clients=0), "num_clients"),
    (dict(alpha=0, beta=0, num_clients=2.5), "num_clients"),
    (dict(alpha=1, beta=1, iid=True), "IID variant"),
    (dict(alpha=0, beta=0, seed=-3), "seed"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ReplicateError, match=match):
        synthetic(**kwargs)


def test_alpha_is_inert_as_in_the_reference_generator():
    """b_k ~ N(u_k, 1) with W_k's mean u_k (the authors' ``mean_b = mean_W``): u_k shifts every class's
    logit alike, so the labels, and with one seed the whole dataset, do not depend on α."""
    a, b = synthetic(0.0, 1.0, num_clients=8, seed=3), synthetic(1.0, 1.0, num_clients=8, seed=3)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.train.y, b.train.y)
    assert torch.equal(a.test.y, b.test.y)
    c = synthetic(1.0, 0.0, num_clients=8, seed=3)  # β does change the data
    assert not torch.equal(b.train.x, c.train.x)


def test_the_sizes_alone_are_the_built_datasets_training_sizes():
    """``train_sizes`` (Table 2's thousands of draws) is the generator's first draw: the sizes of the set built."""
    from replicate.data.synthetic import synthetic, train_sizes

    for seed, clients in ((0, 100), (7, 30)):
        built = synthetic(1, 1, num_clients=clients, seed=seed)
        assert built.train.sizes.tolist() == train_sizes(clients, seed).tolist()
