"""STEM on the engine's protocol (spec STEM §2.1): rounds by hand on the tiny quadratic, the engine
against the sequential oracle, the a = 1 special case, its lr schedule, STEM's MNIST shards and LeNet."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.data.shards import class_shards
from replicate.fl.algorithms import LocalWork, Stem
from replicate.fl.models import CNN
from replicate.fl.schedules import LRSchedule

from test_algorithms import X0, assert_engine_matches_oracle, final_params, grad_k, logistic64, quadratic

ETA = 0.25  # exact in float32 and float64


def stem_by_hand(eta, c, steps=2, rounds=3):
    """x̄ after each round: round 0 forms d̄_1 at x_1 and steps x_2 = x_1 − η d̄_1; then I local steps
    d ← ∇f_k(x) + (1 − a)(d − ∇f_k(x_prev)), x_prev ← x, x ← x − η d, and the server averages x and d."""
    a = min(1.0, c * eta**2)
    d_bar = torch.stack([grad_k(k, X0) for k in range(3)]).mean(0)  # full gradients: the mean over I steps
    x, last = X0 - eta * d_bar, [X0.clone() for _ in range(3)]
    expected = [x.clone()]
    for _ in range(rounds - 1):
        ws, ds = [], []
        for k in range(3):
            w, prev, d = x.clone(), last[k], d_bar.clone()
            for _ in range(steps):
                d = grad_k(k, w) + (1 - a) * (d - grad_k(k, prev))
                prev, w = w, w - eta * d
            ws.append(w), ds.append(d)
            last[k] = prev
        x, d_bar = torch.stack(ws).mean(0), torch.stack(ds).mean(0)
        expected.append(x.clone())
    return expected


@pytest.mark.parametrize("execution", ["stacked", "sequential"])
def test_stem_three_rounds_by_hand(execution):
    c = 2.0  # a = c·η² = 0.125: the momentum correction matters
    expected = stem_by_hand(ETA, c)
    for rounds in (1, 2, 3):
        got = final_params(quadratic(), Stem(c), LocalWork(2), ETA, rounds=rounds, execution=execution)
        torch.testing.assert_close(got, expected[rounds - 1], rtol=0, atol=1e-14)
    plain = stem_by_hand(ETA, 1e9)  # a = 1: no momentum (with full gradients d differs from ∇f_k only
    assert (expected[2] - plain[2]).abs().max() > 3e-3  # through the averaged d̄, so the effect is small)


def test_stem_with_a_equal_one_is_equal_weight_fedavg_after_the_first_round():
    x1 = final_params(quadratic(), Stem(1e9), LocalWork(2), ETA, rounds=1)
    locals_ = []
    for k in range(3):  # FedAvg from x_2 with equal weights 1/K, as STEM averages
        w = x1.clone()
        for _ in range(2):
            w = w - ETA * grad_k(k, w)
        locals_.append(w)
    got = final_params(quadratic(), Stem(1e9), LocalWork(2), ETA, rounds=2)
    torch.testing.assert_close(got, torch.stack(locals_).mean(0), rtol=0, atol=1e-14)


@pytest.mark.parametrize("unit", ["steps", "epochs"])
def test_stem_engine_matches_oracle(unit):
    work = LocalWork(3, "steps", 8) if unit == "steps" else LocalWork(2, "epochs", 16)  # epochs: unequal I
    assert_engine_matches_oracle(logistic64(small_clients=2), Stem(2.0), work, rounds=3, fused=(True,),
                                 executions=("stacked", "sequential"))


def test_stem_settings_are_checked():
    with pytest.raises(ReplicateError, match="momentum constant"):
        Stem(0.0)
    rate = torch.tensor([[0.25]], dtype=torch.float64)
    assert float(Stem(4.0).momentum_weight(rate)) == 0.25 and float(Stem(100.0).momentum_weight(rate)) == 1.0


def test_stem_schedule_diminishes_per_epoch():
    schedule = LRSchedule("epoch_cube_root", 0.5, lr_decay=0.25)  # 4 rounds an epoch
    rates = [schedule(r) for r in range(9)]
    assert rates[:4] == [0.5 / 2 ** (1 / 3)] * 4 and rates[4:8] == [0.5 / 3 ** (1 / 3)] * 4
    assert rates[8] == pytest.approx(0.5 / 4 ** (1 / 3))
    with pytest.raises(ReplicateError, match="epoch_cube_root schedule"):
        LRSchedule("epoch_cube_root", 0.5, lr_decay=-1.0)


@pytest.mark.parametrize("heterogeneity, classes_each", [("moderate", 10), ("high", 5)])
def test_class_shards_follow_the_spec(heterogeneity, classes_each):
    labels = np.repeat(np.arange(10), 1001)  # n_min = 1001: shards of ⌊1000/100⌋ = 10
    parts = class_shards(labels, heterogeneity, seed=3, stream=0)
    assert len(parts) == 100 and all(len(p) == 100 for p in parts)
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything)  # disjoint
    assert all(len(np.unique(labels[p])) == classes_each for p in parts)
    if heterogeneity == "high":
        assert set(np.unique(labels[parts[7]])) == {7, 8, 9, 0, 1}  # C_k = {(k + j) mod 10}
        assert all(np.bincount(labels[p])[labels[p][0]] == 20 for p in parts)  # 2 shards of each class
        holders = [sum(y in set(labels[p]) for p in parts) for y in range(10)]
        assert holders == [50] * 10
    again = class_shards(labels, heterogeneity, seed=3, stream=0)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    with pytest.raises(ReplicateError, match="heterogeneity"):
        class_shards(labels, "extreme", seed=3, stream=0)


def test_mnist_stem_counts_match_the_paper():
    from replicate.data import store

    try:
        store.ensure("mnist")
    except ReplicateError as exc:
        pytest.skip(f"MNIST is not available: {exc}")
    from replicate.data import load

    ds = load("mnist_stem", heterogeneity="high")
    assert ds.num_clients == 100
    assert set(ds.train.sizes.tolist()) == {540} and set(ds.test.sizes.tolist()) == {80}  # §4: 540 / 80
    assert ds.train.x.shape[1] == 784 and abs(float(ds.train.x.mean())) < 0.2
    few = load("mnist_stem_high", num_clients=10)  # smoke scale: the first workers of the same partition
    assert few.num_clients == 10
    for part in ("train", "test"):
        whole, first = getattr(ds, part), getattr(few, part)
        end = int(whole.offsets[10])
        assert torch.equal(first.offsets, whole.offsets[:11])
        assert torch.equal(first.x, whole.x[:end]) and torch.equal(first.y, whole.y[:end])
    with pytest.raises(ReplicateError, match="num_clients"):
        load("mnist_stem_high", num_clients=101)


def test_lenet_has_the_proposed_shape():
    model = CNN((1, 28, 28), 10, channels=(10, 20), hidden=50, padding=0)
    assert model.shapes["fc1.w"] == (50, 320)  # 20 · 4 · 4 after two valid 5×5 convs and pools
    assert sum(int(np.prod(s)) for s in model.shapes.values()) == 21_840  # spec §6.4: about 21.8k
    params = model.init(torch.Generator().manual_seed(0))
    out = model.forward(model.unflatten(params), torch.randn(3, 784))
    assert out.shape == (3, 10)


def test_cifar_lenet5_has_the_proposed_shape():
    """Spec §6.4: conv(3→6, 5×5) → pool → conv(6→16, 5×5) → pool → 400 → 120 → 84 → 10, about 62k parameters."""
    from replicate.fl.models import for_dataset
    from replicate.data.federated import FederatedDataset, Split

    x = np.zeros((2, 3 * 32 * 32), np.float32)
    ds = FederatedDataset("c", Split.from_clients([x], [[0, 1]]), Split.from_clients([x], [[0, 1]]), 10,
                          meta={"image_shape": (3, 32, 32)})
    model = for_dataset("lenet5", ds)
    assert [model.shapes[k] for k in ("fc1.w", "fc2.w", "fc3.w")] == [(120, 400), (84, 120), (10, 84)]
    assert model.num_params == 62_006 and model.cpu_execution() == "stacked"
    params = model.init(torch.Generator().manual_seed(0))
    out = model.forward(model.unflatten(params), torch.randn(4, 3 * 32 * 32))
    w = model.unflatten(params)  # written out layer by layer
    import torch.nn.functional as F
    h = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    out = model.forward(w, h.reshape(4, -1))
    for conv in ("conv1", "conv2"):
        h = F.max_pool2d(F.relu(F.conv2d(h, w[f"{conv}.w"], w[f"{conv}.b"])), 2)
    h = F.relu(F.linear(F.relu(F.linear(h.flatten(1), w["fc1.w"], w["fc1.b"])), w["fc2.w"], w["fc2.b"]))
    torch.testing.assert_close(out, F.linear(h, w["fc3.w"], w["fc3.b"]))


def test_stem_on_a_tiny_two_hidden_layer_cnn_engine_matches_oracle():
    """STEM on the CIFAR LeNet-5's shape (2 conv + 3 linear), tiny: stacked engine ≡ client loop ≡ oracle."""
    from replicate.data.federated import FederatedDataset, Split
    from replicate.fl.engine import run
    from replicate.fl.oracle import run_sequential
    from replicate.fl.problems import SampleProblem

    rs = np.random.RandomState(0)
    sizes = [12, 9, 16, 10]
    xs = [rs.randn(n, 3 * 16 * 16).astype(np.float32) for n in sizes]
    ys = [rs.randint(0, 3, n) for n in sizes]
    ds = FederatedDataset("tiny", Split.from_clients(xs, ys), Split.from_clients(xs[:2], ys[:2]), 3,
                          meta={"image_shape": (3, 16, 16)})
    model = CNN((3, 16, 16), 3, channels=(2, 3), hidden=(6, 5), padding=0)
    assert model.dense == 3 and model.shapes["fc3.w"] == (3, 5)
    problem = SampleProblem(ds, model)
    work, schedule = LocalWork(3, "steps", 4), LRSchedule("epoch_cube_root", 0.3, lr_decay=0.5)
    kwargs = dict(rounds=3, seed=2, return_params=True)
    algorithm = Stem(5.0)
    stacked, w_stacked = run(problem, algorithm, work, schedule, execution="stacked", **kwargs)
    sequential, w_sequential = run(problem, algorithm, work, schedule, execution="sequential", **kwargs)
    oracle, w_oracle = run_sequential(problem, algorithm, work, schedule, **kwargs)
    for w in (w_sequential, w_oracle):
        torch.testing.assert_close(w_stacked, w, rtol=1e-5, atol=1e-6)
    for other in (sequential, oracle):
        assert stacked["train_loss"].tolist() == pytest.approx(other["train_loss"].tolist(), rel=1e-5)
    assert (w_stacked - problem.init(2)).abs().max() > 1e-3
