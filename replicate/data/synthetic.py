"""Synthetic(α, β) and Synthetic IID (Shamir et al.'s model as used by FedProx and Li et al.).

Spec ``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §1(a); reference generators
FedProx ``data/synthetic_*/generate_*.py`` and fedavgpy ``data/synthetic/generate_synthetic.py``.

Device k has n_k = int(lognormal(4, 2)) + 50 samples x ∈ R^60 ~ N(v_k, Σ),
Σ = diag(j^-1.2), labelled y = argmax(x W_k + b_k) over 10 classes, with

- non-IID: u_k ~ N(0, α), B_k ~ N(0, β), v_k ~ N(B_k, 1) elementwise,
  W_k, b_k ~ N(u_k, 1) elementwise (α, β are standard deviations, as in the code);
- IID: v_k = 0 and one global W, b ~ N(0, 1) (FedProx ``generate_iid.py``).

α is inert, here and in every version of the reference code: b_k's mean is W_k's (``mean_b =
mean_W``), so u_k adds u_k(Σ_j x_j + 1) to every class's logit alike and the argmax ignores it.
With the same seed, synthetic(0, β) and synthetic(1, β) are the same data (tested): the sets
differ only through β, the per-device input offset B_k.

Li et al. use 100 devices, FedProx 30. Each device keeps a random 90% (``int(0.9 n_k)``)
for training and the rest for testing.

Seeds by role: ``seed`` drives ``np.random.RandomState`` through the reference's draws in
its order — sample counts, u (all devices), B (all devices), v (device by device), then
per device W_k, b_k, X_k (IID: counts, W, b, then X_k). The per-device shuffle before the
90/10 split, unseeded Python ``random`` in the reference, draws from a second stream
``np.random.default_rng([seed, 1])``.
"""
from __future__ import annotations

import numpy as np

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.core.checks import check_nonnegative, check_positive_int, check_seed
from replicate.data.federated import FederatedDataset, Split

DIMENSION = 60
NUM_CLASSES = 10
SHUFFLE_STREAM = 1  # second entropy word of the per-device shuffle stream


def synthetic(alpha: float, beta: float, num_clients: int = 100, iid: bool = False,
              seed: int = 0) -> FederatedDataset:
    """Synthetic(α, β) with ``num_clients`` devices, or Synthetic IID when ``iid``.

    ``alpha`` (α) and ``beta`` (β) are the standard deviations of the per-device model
    mean u_k and feature mean B_k; the IID variant has neither, so it requires both to be 0.
    Named ``synthetic(α,β)``, e.g. ``synthetic(0.5,0.5)``, or ``synthetic_iid``.

    Device sizes depend only on ``seed`` and ``num_clients``, so every α, β shares them.
    Training statistics (devices / samples / mean / std) for the default seed 0:
    100 / 36,998 / 370 / 758 (Li et al. Table 2: synthetic(0,0) 42,522 / 425 / 1,372,
    synthetic(1,1) 27,348 / 273 / 421, drawn from one unseeded stream); 30 devices:
    20,101 / 670 / 1,148. Over seeds 0..199 the 100-device training total has median
    about 35,900 and ranges 17,417..439,598 — the lognormal(4, 2) tail dominates.
    """
    _validate(alpha, beta, num_clients, iid, seed)
    rng = np.random.RandomState(seed)
    n = _sizes(rng, num_clients)
    cov_x = np.diag(np.arange(1, DIMENSION + 1, dtype=np.float64) ** -1.2)
    if iid:
        W_global = rng.normal(0, 1, (DIMENSION, NUM_CLASSES))
        b_global = rng.normal(0, 1, NUM_CLASSES)
        v = np.zeros((num_clients, DIMENSION))
    else:
        u = rng.normal(0, alpha, num_clients)
        B = rng.normal(0, beta, num_clients)
        v = np.stack([rng.normal(B[k], 1, DIMENSION) for k in range(num_clients)])
    shuffle = np.random.default_rng([seed, SHUFFLE_STREAM])
    train_x, train_y, test_x, test_y = [], [], [], []
    for k in range(num_clients):
        if iid:
            W, b = W_global, b_global
        else:
            W = rng.normal(u[k], 1, (DIMENSION, NUM_CLASSES))
            b = rng.normal(u[k], 1, NUM_CLASSES)
        X = rng.multivariate_normal(v[k], cov_x, n[k])
        y = np.argmax(X @ W + b, axis=1)
        order = shuffle.permutation(n[k])
        train_len = _train_len(n[k])
        train_x.append(X[order[:train_len]])
        train_y.append(y[order[:train_len]])
        test_x.append(X[order[train_len:]])
        test_y.append(y[order[train_len:]])
    return FederatedDataset(
        name="synthetic_iid" if iid else f"synthetic({alpha:g},{beta:g})",
        train=Split.from_clients(train_x, train_y),
        test=Split.from_clients(test_x, test_y),
        num_classes=NUM_CLASSES,
        meta={
            "paper": "Li et al. 2020 App. D.1 (100 devices); FedProx §5.1 (30 devices)",
            "procedure": "spec §1(a); FedProx generate_synthetic.py / generate_iid.py",
            "alpha": alpha, "beta": beta, "iid": iid,
            "seeds": {"generation": seed,
                      "shuffle": f"np.random.default_rng([{seed}, {SHUFFLE_STREAM}])"},
            "deviations": [
                "the reference generators are unseeded; seeds are fixed here",
                "90/10 train/test split as in both codes (the FedProx draft text says 80/20)",
            ],
        },
    )


def _sizes(rng: np.random.RandomState, num_clients: int) -> np.ndarray:
    """Every device's n_k: the generator's first draw."""
    return rng.lognormal(4, 2, num_clients).astype(int) + 50


def _train_len(n: int) -> int:
    return int(0.9 * n)


def device_sizes(num_clients: int = 100, seed: int = 0) -> np.ndarray:
    """Every device's samples n_k (train and test) of data seed ``seed``, as :func:`synthetic` draws them for every
    α, β (the sizes are its first draw), without drawing the data: a size statistic over thousands of seeds."""
    check_positive_int("num_clients", num_clients)
    check_seed(seed)
    return _sizes(np.random.RandomState(seed), num_clients)


def train_sizes(num_clients: int = 100, seed: int = 0) -> np.ndarray:
    """The training samples of every device of data seed ``seed`` (``device_sizes``' 90%, as :func:`synthetic`
    splits them)."""
    return np.array([_train_len(n) for n in device_sizes(num_clients, seed)])


@builder("synthetic_iid", reads=())
def synthetic_iid(num_clients: int = 100, seed: int = 0) -> FederatedDataset:
    """Synthetic IID: :func:`synthetic` with ``iid=True``."""
    return synthetic(0, 0, num_clients, iid=True, seed=seed)


def _validate(alpha, beta, num_clients, iid, seed) -> None:
    check_nonnegative("alpha", alpha, "a standard deviation")
    check_nonnegative("beta", beta, "a standard deviation")
    if iid and (alpha != 0 or beta != 0):
        raise ReplicateError(
            f"the IID variant has no alpha/beta (got alpha={alpha}, beta={beta}); "
            "use iid=False for synthetic(alpha, beta)")
    check_positive_int("num_clients", num_clients)
    check_seed(seed)
