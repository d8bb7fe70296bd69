"""FedProx paper experiments: the dissimilarity metric against hand computations, the figure configs'
checks, a tiny figure run end to end (tidy columns, cached dissimilarity, consistency), and claims
that fail when the data say otherwise."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.data.federated import FederatedDataset, Split
from replicate.fl.algorithms import FedAvg, FedProx
from replicate.runs import measures
from replicate.experiments.fedprox2020 import common, epochs, heterogeneity, mu, stragglers, table1
from replicate.fl import models, problems
from replicate.fl.dissimilarity import device_gradient_variance

from conftest import toy_dataset


@pytest.fixture(autouse=True)
def one_thread():
    """Single-threaded torch: on a shared 2-core machine two threads per run only contend."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _problem(xs, ys, features, classes):
    split = Split.from_clients(xs, ys)
    return problems.SampleProblem(FederatedDataset("hand", split, split, classes),
                                  models.LogisticRegression(features, classes))


def _brute_force(problem, flat, max_samples=None):
    grads, sizes = [], []
    for k in range(problem.num_clients):
        x, y = problem.train.client(k)
        x, y = x[:max_samples], y[:max_samples]
        w = flat.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(problem.model.per_sample_loss(w, x, y).mean(), w)
        grads.append(g.double())
        sizes.append(len(y))
    g, n = torch.stack(grads), torch.tensor(sizes, dtype=torch.float64)
    mean = n @ g / n.sum()
    return float((g - mean).square().sum() / len(sizes))


def test_dissimilarity_by_hand():
    # w = 0: softmax (1/2, 1/2). Device A: x = 1, y = 0 → ∇ = [x, 1]ᵀ(−½, ½); device B: two samples x = 2, y = 1.
    # ∇F_A = [[−.5, .5], [−.5, .5]], ∇F_B = [[1, −1], [.5, −.5]], ∇f = (1·∇F_A + 2·∇F_B)/3 = [[.5, −.5], [1/6, −1/6]]
    # ‖∇F_A − ∇f‖² = 26/9, ‖∇F_B − ∇f‖² = 13/18: mean over the 2 devices 65/36.
    problem = _problem([np.array([[1.0]]), np.array([[2.0], [2.0]])], [np.array([0]), np.array([1, 1])], 1, 2)
    flat = torch.zeros(4)
    assert device_gradient_variance(problem, flat) == pytest.approx(65 / 36, rel=1e-6)
    # first sample only: both devices weigh 1, ∇f = [[.25, −.25], [0, 0]], each device 1.625 away
    assert device_gradient_variance(problem, flat, max_samples=1) == pytest.approx(1.625, rel=1e-6)


def test_identical_devices_have_zero_dissimilarity():
    rs = np.random.RandomState(0)
    x, y = rs.randn(37, 4).astype(np.float32), rs.randint(0, 3, 37)
    problem = _problem([x, x, x], [y, y, y], 4, 3)
    flat = problem.init(1)
    scale = float(device_gradient_variance(problem, flat) + 1)
    assert device_gradient_variance(problem, flat) <= 1e-10 * scale


def test_dissimilarity_matches_per_device_autograd_in_any_chunking():
    ds = toy_dataset(num_clients=9, features=5, classes=3, small_clients=2)
    problem = problems.SampleProblem(ds, models.LogisticRegression(5, 3))
    flat = problem.init(3) * 5
    expected = _brute_force(problem, flat)
    assert device_gradient_variance(problem, flat) == pytest.approx(expected, rel=1e-5)
    assert device_gradient_variance(problem, flat, piece=7, budget=300) == pytest.approx(expected, rel=1e-5)
    assert device_gradient_variance(problem, flat, max_samples=10, piece=4) == pytest.approx(
        _brute_force(problem, flat, 10), rel=1e-5)


@pytest.mark.parametrize("piece", [2, 64])  # several pieces a device, and one (its gradient as is)
@pytest.mark.parametrize("options", [{}, {"frozen_embedding": True, "head": (3,), "num_classes": 2}])
def test_dissimilarity_on_an_lstm_matches_per_device_autograd(piece, options):
    """Through the LSTM's batched per-device gradients, with devices taken by size (not in order)."""
    g = torch.Generator().manual_seed(0)
    sizes = (3, 9, 4, 1)
    classes = options.get("num_classes", 7)
    xs = [torch.randint(0, 7, (n, 5), generator=g).numpy() for n in sizes]
    ys = [torch.randint(0, classes, (n,), generator=g).numpy() for n in sizes]
    split = Split.from_clients(xs, ys)
    split = Split(split.x.long(), split.y, split.offsets)
    problem = problems.SampleProblem(FederatedDataset("t", split, split, classes),
                                     models.CharLSTM(7, 3, 4, 2, **options))
    flat = problem.init(0)
    assert device_gradient_variance(problem, flat, piece=piece) == pytest.approx(_brute_force(problem, flat), rel=1e-5)


@pytest.mark.parametrize("cls, overrides, match", [
    (heterogeneity.Fig1Config, {"mus": [1.0]}, "must hold 0"),
    (heterogeneity.Fig1Config, {"datasets": ["mnist"]}, "must be one of"),
    (epochs.Fig2Config, {"epochs": [20]}, "at least two values"),
    (mu.Fig3Config, {"mus": [0.0, 1.0]}, "mus must be > 0"),
    (mu.Fig3Config, {"seeds": [0], "tune_seeds": 2}, "tune_seeds must be between"),
    (mu.Fig4Config, {"datasets": ["cifar100"]}, "must be one of"),
    (stragglers.StragglersConfig, {"drops": [0.0, 1.0]}, r"must lie in \[0, 1\)"),
    (table1.Table1Config, {"datasets": ["cifar"]}, "must be one of"),
])
def test_bad_settings_fail_before_any_run(cls, overrides, match):
    with pytest.raises(ReplicateError, match=match):
        cls.for_profile("smoke", **overrides)


def test_run_configs_follow_the_paper():
    config = common.run_config("mnist", prox_mu=1.0, epochs=20, seed=3, drop=0.5)
    assert (config.dataset, config.client_lr, config.clients_per_round, config.batch_size, config.local_epochs,
            config.rounds, config.weight_decay, config.clip_norm, config.lr_schedule) == \
        ("mnist_fedprox", 0.03, 10, 10, 20, 100, 0.0, None, "constant")
    assert config.algorithm == FedProx(1.0, 10, sampling="uniform", straggler_fraction=0.5)
    fedavg = common.run_config("synthetic(1,1)", prox_mu=0.0, epochs=20, seed=0, drop=0.9, algorithm="fedavg")
    assert (fedavg.algorithm, fedavg.num_clients, fedavg.client_lr, fedavg.rounds) == \
        (FedAvg("weighted", 10, straggler_fraction=0.9), 30, 0.01, 200)
    with pytest.raises(ReplicateError, match="FedAvg has no proximal term"):
        common.run_config("mnist", prox_mu=1.0, epochs=20, seed=0, algorithm="fedavg")


def _tiny_text(name, vocabulary, classes, seq, seed=0):
    """A few devices of int64 token windows, shaped as the real builders' (meta["vocabulary"])."""
    g = torch.Generator().manual_seed(seed)
    sizes = [7, 12, 4, 9, 11, 6, 8, 5, 10, 13, 7]
    x = torch.randint(0, len(vocabulary), (sum(sizes), seq), generator=g)
    split = Split(x, torch.randint(0, classes, (sum(sizes),), generator=g),
                  torch.tensor([0, *np.cumsum(sizes)], dtype=torch.int64))
    return FederatedDataset(name, split, split, classes, {"vocabulary": vocabulary})


@pytest.mark.parametrize("key, shapes", [
    ("shakespeare", {"embed": (80, 8), "lstm1.wh": (256, 1024), "out.w": (256, 80)}),
    ("sent140", {"lstm0.wx": (300, 400), "lstm0.wh": (100, 400), "head0.w": (100, 30), "out.w": (30, 2)}),
])
def test_lstm_panels_build_the_authors_models_from_a_run_config(monkeypatch, key, shapes):
    """The Shakespeare / Sent140 panels run through the same config → cached-run path as the
    convex ones (here on a tiny stand-in for the dataset, so that no LSTM epoch of the real data runs)."""
    from replicate.runs import config as run_configs

    vocabulary = "".join(chr(32 + i) for i in range(80)) if key == "shakespeare" else tuple(f"w{i}" for i in range(49))
    text = _tiny_text(key, vocabulary, 80 if key == "shakespeare" else 2, 12 if key == "shakespeare" else 6)
    if key == "sent140":
        text.meta["vocab_size"] = 50  # the builder's unknown/padding index
    monkeypatch.setattr(run_configs, "dataset", lambda *args: text)
    setting = common.SETTINGS[key]
    config = common.run_config(key, prox_mu=setting.prox_mu, epochs=1, seed=0, rounds=2)
    assert (config.model, config.client_lr, config.clients_per_round) == (setting.model, setting.client_lr, 10)
    problem = run_configs.build(config, device="cpu")[0]
    named = problem.model.unflatten(problem.init(0))
    assert {name: tuple(named[name].shape) for name in shapes} == shapes
    # Sent140 embeds with a frozen table (the authors' frozen GloVe): not a parameter, the same every run
    assert ("embed" in named) == (key == "shakespeare")
    if key == "sent140":
        assert problem.model.table("cpu").shape == (50, 300)
        other = run_configs.build(config.replace(seed=3), device="cpu")[0].model
        assert torch.equal(other.table("cpu"), problem.model.table("cpu"))
    histories = [common.run(c) for c in (config, config.with_algorithm(prox_mu=0.0))]
    for history in histories:
        rounds = [0, 2] if key == "sent140" else [0, 1, 2]  # Sent140 evaluates every 10th round and the last
        assert history["round"].tolist() == rounds and np.isfinite(history[list(common.METRICS)].to_numpy()).all()
    assert not np.array_equal(histories[0]["train_loss"].iloc[1:], histories[1]["train_loss"].iloc[1:])  # μ acts
    epochs.Fig2Config.for_profile("paper", datasets=[key])  # the figures accept the LSTM sets


def test_a_tiny_figure_runs_end_to_end_and_is_cached():
    config = heterogeneity.Fig1Config.for_profile("smoke", datasets=["synthetic_iid", "synthetic(1,1)"],
                                                  epochs=1, rounds=3)
    data = heterogeneity.fig1(config, progress=False, workers=1)
    assert list(data.columns) == ["dataset", "mu", "series", "seed", "round", *common.METRICS]
    assert len(data) == 2 * 2 * 4  # datasets × μ × rows 0..3
    assert np.isfinite(data["dissimilarity"]).all() and (data["dissimilarity"] > 0).all()
    iid, skewed = (data[data.dataset == common.LABELS[d]]["dissimilarity"].mean() for d in config.datasets)
    assert skewed > 10 * iid  # heterogeneity shows in the metric
    again = heterogeneity.fig1(config, progress=False, workers=1)
    pd.testing.assert_frame_equal(data, again)
    fig = heterogeneity.plot_fig1(data, config)
    assert len(fig.axes) == 3 * 2
    claims = heterogeneity.fig1_claims(data, config)
    assert [c.kind for c in claims] == ["replication"] * 3


def test_tiny_straggler_grid_keeps_fedavg_and_fedprox_mu0_equal():
    config = stragglers.StragglersConfig.for_profile("smoke", drops=[0.0, 0.9], epochs=2, rounds=3, check_rounds=2)
    data = stragglers.stragglers(config, progress=False, workers=1)
    assert set(data.algorithm) == {*stragglers.ALGORITHMS, "FedAvg (check)"}
    claims = stragglers.stragglers_claims(data, config)
    assert claims[-1].kind == "consistency" and claims[-1].passed


# ---- claims that can fail --------------------------------------------------------------------

def _curves(rows, rounds=20):
    """A tidy frame of curves: each row of ``rows`` is (labels, start, end, wiggle, dissimilarity scale)."""
    frames = []
    for labels, start, end, wiggle, dis in rows:
        r = np.arange(rounds + 1)
        loss = end + (start - end) * np.exp(-r / 4) + wiggle * np.sin(r * 2.1) ** 2
        frames.append(pd.DataFrame({**labels, "round": r, "train_loss": loss, "train_acc": 1 / (1 + loss),
                                    "test_loss": loss, "test_acc": 1 / (1 + loss), "dissimilarity": dis * loss}))
    return pd.concat(frames, ignore_index=True)


def _fig1_frame(final_by_set, gains):
    rows = []
    for (d, final), gain in zip(final_by_set.items(), gains):
        for m, level in ((0.0, final), (1.0, final - gain)):
            for s in (0, 1):
                rows.append(({"dataset": common.LABELS[d], "mu": m, "seed": s}, 2.5, level + 0.01 * s, 0.0, final))
    return _curves(rows)


def test_fig1_claims_pass_and_fail_with_the_data():
    config = heterogeneity.Fig1Config(seeds=(0, 1))
    good = heterogeneity.fig1_claims(_fig1_frame(dict(zip(common.SYNTHETIC, (0.3, 0.6, 0.9, 1.2))),
                                                 (0.0, 0.05, 0.1, 0.2)), config)
    assert all(c.passed for c in good)
    bad = heterogeneity.fig1_claims(_fig1_frame(dict(zip(common.SYNTHETIC, (1.2, 0.9, 0.6, 0.3))),
                                                (0.4, 0.1, 0.05, -0.1)), config)
    assert not any(c.passed for c in bad)


def test_fig2_instability_claim_fails_on_smooth_curves():
    config = epochs.Fig2Config(datasets=("mnist",), seeds=(0,))
    rows = [({"dataset": "MNIST", "E": e, "seed": 0}, 2.3, 0.5, 0.0, d) for e, d in ((1, 1.0), (20, 2.0), (50, 3.0))]
    claims = epochs.fig2_claims(_curves(rows), config)
    assert not claims[0].passed and claims[-1].passed  # smooth: no instability; dissimilarity grows with E
    rows[-1] = ({"dataset": "MNIST", "E": 50, "seed": 0}, 2.3, 0.5, 0.4, 3.0)
    assert epochs.fig2_claims(_curves(rows), config)[0].passed
    # both wiggle about as much: a near-tie is not "unstable with large E" (the margin, 5%)
    rows[0] = ({"dataset": "MNIST", "E": 1, "seed": 0}, 2.3, 0.5, 0.39, 1.0)
    wiggles = measures.fluctuations(_curves(rows), ("dataset", "E", "seed"))
    assert 1 < wiggles["MNIST"][50].iloc[0] / wiggles["MNIST"][1].iloc[0] < 1.05
    assert not epochs.fig2_claims(_curves(rows), config)[0].passed


def test_fig2_reads_the_lstm_panels_as_the_paper_does():
    """§5.3: large E is unstable on Shakespeare (heterogeneous) and faster on Sent140."""
    config = epochs.Fig2Config(datasets=("shakespeare", "sent140"), seeds=(0,))
    rows = [({"dataset": d, "E": e, "seed": 0}, 2.3, end, wiggle, 1.0)
            for d, (lo, hi) in (("Shakespeare", ((1.0, 0.0), (1.0, 0.5))), ("Sent140", ((1.2, 0.0), (0.6, 0.0))))
            for e, (end, wiggle) in zip((1, 50), (lo, hi))]
    claims = epochs.fig2_claims(_curves(rows), config)
    assert [c.claim.split(":")[0] for c in claims[:2]] == ["Shakespeare", "Sent140"]
    assert claims[0].passed and claims[1].passed and "LEAF" in claims[0].deviations[0]


def _mu_frame(best_loss, best_wiggle, best_dis):
    rows = [({"dataset": "MNIST", "mu": 0.0, "seed": s}, 2.3, 0.6, 0.3, 2.0) for s in (0, 1)]
    rows += [({"dataset": "MNIST", "mu": m, "seed": 0}, 2.3, 0.6 - 0.1 * i, 0.2, 2.0 - 0.3 * i)
             for i, m in enumerate((0.01, 0.1))]
    rows += [({"dataset": "MNIST", "mu": 1.0, "seed": s}, 2.3, best_loss, best_wiggle, best_dis) for s in (0, 1)]
    data = _curves(rows)
    data["best"] = data.mu == 1.0
    data["shown"] = data.best | (data.mu == 0)
    return data


def test_coinciding_curves_are_said_to_coincide():
    far, near = _mu_frame(0.2, 0.0, 0.5), _mu_frame(0.6, 0.3, 2.0)  # near: best μ's curve equals μ = 0's
    assert "coincides" not in mu._shown(far)["dataset"].iloc[0]
    assert mu._shown(near)["dataset"].iloc[0] == "MNIST (best μ = 1, at the grid's edge)\nnearly coincides with μ = 0"


def test_a_best_mu_at_the_grids_edge_is_flagged():
    data = _mu_frame(0.2, 0.0, 0.5)  # grid {0.01, 0.1, 1}: μ = 1 wins, the largest
    claim, = mu.fig3_claims(data, mu.Fig3Config(datasets=("mnist",), mus=(0.01, 0.1, 1.0)))
    assert "best μ = 1 (the grid's edge" in claim.result
    inside = data[data.mu != 1.0].copy()
    inside.loc[inside.mu == 0.1, ["best", "shown"]] = True
    assert "edge" not in mu._shown(pd.concat([inside, data[data.mu == 1.0].assign(best=False, shown=False)]))[
        "dataset"].iloc[0]


def test_mu_claims_pass_and_fail_with_the_data():
    config = mu.Fig3Config(datasets=("mnist",), mus=(0.01, 0.1, 1.0), seeds=(0, 1))
    good = _mu_frame(0.2, 0.0, 0.5)
    assert all(c.passed for c in mu.fig3_claims(good, config) + mu.fig4_claims(good, config))
    bad = _mu_frame(0.9, 0.6, 5.0)
    assert not mu.fig3_claims(bad, config)[0].passed
    assert not mu.fig4_claims(bad, config)[0].passed


def test_dissimilarity_tracks_the_loss_only_if_it_follows_its_changes():
    """Issue #40 item 5: two series that both fall correlate in level whatever the dissimilarity measures; the
    claim tests their round-to-round changes. A dissimilarity that falls with the loss's trend but against its
    wiggles correlates in level (> 0.5, the old claim would pass) and fails."""
    config = mu.Fig3Config(datasets=("mnist",), mus=(0.01, 0.1, 1.0), seeds=(0, 1))
    follows = _mu_frame(0.2, 0.3, 0.5)
    assert mu.fig4_claims(follows, config)[1].passed
    against = follows.copy()
    r = against["round"].to_numpy()
    trend = 0.2 + 2.1 * np.exp(-r / 4)
    against["dissimilarity"] = 3 * trend - 0.3 * (against["train_loss"] - trend)  # against the loss's wiggles
    claim = mu.fig4_claims(against, config)[1]
    assert not claim.passed and "of the levels, which both fall: median 0." in claim.result
    level = float(claim.result.split("which both fall: median ")[1].rstrip(")"))
    assert level > 0.5


def test_sent140_mu_claim_says_what_the_draft_says():
    """§5.3: μ stabilises "the four datasets except Sent140"; "on Sent140, μ does not help speed up convergence"."""
    config = mu.Fig3Config(datasets=("sent140",), mus=(0.01, 0.1, 1.0), seeds=(0, 1))
    helps = _mu_frame(0.2, 0.0, 0.5).replace({"dataset": {"MNIST": "Sent140"}})
    same = _mu_frame(0.6, 0.3, 2.0).replace({"dataset": {"MNIST": "Sent140"}})
    claim, = mu.fig3_claims(same, config)
    assert claim.passed and claim.claim.startswith("Sent140: μ does not help") and "except Sent140" not in claim.source
    assert "on Sent140, μ does not help speed up convergence" in claim.source
    assert not mu.fig3_claims(helps, config)[0].passed
    mnist, = mu.fig3_claims(_mu_frame(0.2, 0.0, 0.5), mu.Fig3Config(datasets=("mnist",), mus=(0.01, 0.1, 1.0)))
    assert "four datasets except Sent140" in mnist.source


def test_sent140_mu_does_not_help_only_where_mu_0_trains():
    """Issue #40 item 5: "μ does not help" held for runs in which nothing trains (every μ's curve flat), which a
    broken model or too little data per device gives too; μ = 0 must train by the margin for the claim to hold."""
    config = mu.Fig3Config(datasets=("sent140",), mus=(0.01, 0.1, 1.0), seeds=(0, 1))
    flat = _mu_frame(0.6, 0.3, 2.0).replace({"dataset": {"MNIST": "Sent140"}})
    flat["train_loss"] = 0.69 + 0.001 * np.sin(flat["round"])  # nothing trains, whatever μ
    claim, = mu.fig3_claims(flat, config)
    assert not claim.passed and "μ = 0 at its first evaluation" in claim.result
    trains, = mu.fig3_claims(_mu_frame(0.6, 0.3, 2.0).replace({"dataset": {"MNIST": "Sent140"}}), config)
    assert trains.passed  # 2.3 -> 0.6: μ = 0 trains, and the best μ ends no lower


def test_straggler_claims_fail_when_fedavg_wins():
    config = stragglers.StragglersConfig(datasets=("mnist",), seeds=(0, 1), check_rounds=3)
    rows = []
    for drop in (0.0, 0.5, 0.9):
        for s in (0, 1):
            for algorithm, end in zip(stragglers.ALGORITHMS, (0.3 + drop, 0.5, 0.4)):
                rows.append(({"dataset": "MNIST", "drop": drop, "algorithm": algorithm, "seed": s}, 2.3, end, 0, 1))
    data = _curves(rows)
    check = data[(data.algorithm == "FedProx (μ = 0)") & (data["drop"] == 0) & (data.seed == 0) & (data["round"] <= 3)]
    data = pd.concat([data, check.assign(algorithm="FedAvg (check)")], ignore_index=True)
    claims = stragglers.stragglers_claims(data, config)
    assert all(c.passed for c in claims[:3]) and claims[-1].passed
    gain = claims[3]
    assert "points" in gain.result and gain.paper_value.startswith("+22")
    swapped = data.copy()
    fedavg = swapped.algorithm == "FedAvg"
    swapped.loc[fedavg, ["train_loss", "test_acc"]] = [[0.01, 0.99]]
    claims = stragglers.stragglers_claims(swapped, config)
    assert not any(c.passed for c in claims[:4])


def _straggler_frame(ends_at_90):
    """MNIST and FEMNIST, 2 seeds; at 90 % stragglers the algorithms end at ``ends_at_90`` (training loss;
    test accuracy = 1 / (1 + loss)), elsewhere FedAvg is worse with more stragglers."""
    rows = []
    for d in ("MNIST", "FEMNIST"):
        for drop in (0.0, 0.9):
            for s in (0, 1):
                ends = ends_at_90 if drop else (0.5, 0.5, 0.45)
                for algorithm, end in zip(stragglers.ALGORITHMS, ends):
                    rows.append(({"dataset": d, "drop": drop, "algorithm": algorithm, "seed": s}, 2.3, end, 0, 1))
    data = _curves(rows)
    check = data[(data.algorithm == "FedProx (μ = 0)") & (data["drop"] == 0) & (data.seed == 0) & (data["round"] <= 3)]
    return pd.concat([data, check.assign(algorithm="FedAvg (check)")], ignore_index=True)


def test_straggler_headline_tests_the_papers_22_points_and_mu_against_zero():
    """The +22-point headline with a ±25 % margin fixed from the paper (not half of it), reported per dataset,
    and the final paper's μ > 0 vs μ = 0 claim, each passing and failing on made-up curves."""
    config = stragglers.StragglersConfig(datasets=("mnist", "femnist"), drops=(0.0, 0.9), seeds=(0, 1))
    # final test accuracy FedAvg ≈ 50 %, FedProx μ > 0 ≈ 71 %: about +21 points, inside 16.5-27.5
    near = stragglers.stragglers_claims(_straggler_frame((1.0, 0.6, 0.4)), config)
    gain, prox = near[3], near[4]
    assert gain.passed and prox.passed and "per dataset: MNIST: 2" in gain.result and "FEMNIST: 2" in gain.result
    assert "16.5-27.5" in gain.margin and "22% on average" in gain.source and "μ > 0" in prox.source
    # about +12 points (the committed run averages +13.7): a FAIL now; it passed the old "half the headline" margin
    short = stragglers.stragglers_claims(_straggler_frame((1.0, 0.7, 0.6)), config)
    assert not short[3].passed and "+12." in short[3].result
    # μ > 0 no lower than μ = 0: the gain is all partial work, the proximal term adds nothing
    same = stragglers.stragglers_claims(_straggler_frame((1.0, 0.4, 0.4)), config)
    assert same[3].passed and not same[4].passed
    assert stragglers.columns_shown(config) == ("2 of the paper's 5 columns (not run: Synthetic (1,1), "
                                                "Shakespeare, Sent140)")
    assert stragglers.columns_shown(stragglers.StragglersConfig()).startswith("3 of the paper's 5 columns")


def test_table1_claims_fail_on_wrong_numbers():
    config = table1.Table1Config(datasets=("mnist",))
    row = {"dataset": "mnist", "ours_name": "mnist_fedprox", "counted": "train+test", "why": "test"}
    good = pd.DataFrame([{**row, "statistic": s, "ours": v, "draft": v, "final": v}
                         for s, v in zip(table1.STATISTICS, (1000, 69035, 69, 106))])
    assert all(c.passed for c in table1.table1_claims(good, config))
    bad = good.assign(ours=[900, 69035, 69, 106])
    assert not any(c.passed for c in table1.table1_claims(bad, config))


def test_table1_counts_only_out_of_sample_rows_once():
    """MNIST's draft and README rows are one number (one claim), and its seed was fitted to it (not
    counted); the synthetic row (30 devices, 10,204 samples, no stdev printed) quotes the final paper, outside
    the five documents: shown, not counted (issue #40 item 2), yet still judged by its margin."""
    row = {"dataset": "mnist", "ours_name": "mnist_fedprox", "counted": "train+test", "why": "test"}
    mnist = pd.DataFrame([{**row, "statistic": s, "ours": v, "draft": v, "final": v}
                          for s, v in zip(table1.STATISTICS, (1000, 69035, 69, 106))])
    claims = table1.table1_claims(mnist, table1.Table1Config(datasets=("mnist",)))
    assert len(claims) == 1 and claims[0].kind == "consistency" and claims[0].basis == "fitted"
    assert "the same numbers" in claims[0].claim
    synth = {"dataset": "synthetic", "ours_name": "synthetic(1,1)", "counted": "train+test", "why": "w"}
    config = table1.Table1Config(datasets=("synthetic",))
    ours = pd.DataFrame([{**synth, "statistic": s, "ours": v, "draft": math.nan, "final": p}
                         for s, v, p in zip(table1.STATISTICS, (30, 22349, 745, 1275), table1.FINAL_SYNTHETIC)])
    claim, = table1.table1_claims(ours, config)
    assert claim.kind == "context" and claim.basis == "external" and not claim.passed
    assert "stdev not printed" in claim.result
    assert "10,204" in claim.paper_value and "final paper's Table 1" in claim.claim
    close = ours.assign(ours=[30, 10300, 343, 1.0])
    assert table1.table1_claims(close, config)[0].passed
    assert "synthetic" in table1.Table1Config().datasets
    assert [table1.basis_of(k, c, stand_in=True) for k, c in (("shakespeare", "draft"), ("shakespeare", "final"),
                                                               ("sent140", "draft"), ("emnist", "draft"),
                                                               ("femnist", "final"))] == [
        "measured", "external", "partial-data", "partial-data", "external"]  # one counted claim per draft statement;
    # an outside source decides before a fitted seed: the final README's FEMNIST row is context
    # on the official data (TFF's EMNIST-62, the raw Sentiment140) the draft's counts are a measurement to test
    assert [table1.basis_of(k, "draft") for k in ("sent140", "emnist")] == ["measured", "measured"]


def test_figure_deviations_follow_the_datasets_knob():
    """A figure run on other datasets lists their data deviations, not the default sets' (derived, not a knob)."""
    default = epochs.Fig2Config.for_profile("paper")
    assert common.DATA_DEVIATIONS["mnist"] in default.deviations
    sent = epochs.Fig2Config.for_profile("paper", datasets=["sent140"], data_source="official")
    assert common.DATA_DEVIATIONS["sent140"] in sent.deviations and common.DATA_DEVIATIONS["mnist"] not in sent.deviations
    # and the stand-in's deviation where the figure reads it (the data_source knob, replicate.data.variants)
    offline = epochs.Fig2Config.for_profile("paper", datasets=["sent140"], data_source="stand-in")
    assert common.STAND_IN_DEVIATIONS["sent140"] in offline.deviations
    assert common.DATA_DEVIATIONS["sent140"] not in offline.deviations
    assert sent.deviations[-1] == common.LSTM_DEVIATION
    tuned = mu.Fig3Config.for_profile("paper", datasets=["mnist"])
    assert tuned.deviations[-2] == mu.Fig3Config.EXTRA_DEVIATIONS[-1]  # the figure's own, before the LSTM note
    assert heterogeneity.Fig1Config.for_profile("paper").deviations[-1] != common.LSTM_DEVIATION  # no LSTM panels


def test_straggler_consistency_check_compares_the_rounds_both_runs_logged():
    # Sent140 logs every 10th round: the check run must reach round 10 and be compared there, not at round 3
    config = stragglers.StragglersConfig(datasets=("sent140",), seeds=(0,), check_rounds=3)
    (_, check_config, _), = config.checks()
    assert check_config.rounds == 10 and check_config.eval_every == 10
    rows = []
    for drop in (0.0, 0.5, 0.9):
        for algorithm, end in zip(stragglers.ALGORITHMS, (0.3 + drop, 0.5, 0.4)):
            rows.append(({"dataset": "Sent140", "drop": drop, "algorithm": algorithm, "seed": 0}, 0.7, end, 0, 1))
    data = _curves(rows, rounds=40)
    data = data[data["round"] % 10 == 0]
    check = data[(data.algorithm == "FedProx (μ = 0)") & (data["drop"] == 0) & (data["round"] <= 10)]
    ok = pd.concat([data, check.assign(algorithm="FedAvg (check)")], ignore_index=True)
    assert stragglers.stragglers_claims(ok, config)[-1].passed
    moved = check.assign(algorithm="FedAvg (check)")
    moved.loc[moved["round"] == 10, "train_loss"] += 0.1
    claims = stragglers.stragglers_claims(pd.concat([data, moved], ignore_index=True), config)
    assert not claims[-1].passed and "1.0e-01" in claims[-1].result


def test_every_fedprox_claim_quotes_a_seed_sentence():
    """Figures 1, 2 and 4 by words (common.SOURCES); Figure 3, the straggler figure and Table 1 quote directly."""
    import json

    from replicate.core import paths

    keys = ("fig1", "fig2", "fig4")
    claims = [c["claim"] for k in keys for c in
              json.loads((paths.figures_dir() / "fedprox2020" / f"{k}.claims.json").read_text())["claims"]]
    assert claims and all(any(words in claim for words, _ in common.SOURCES) for claim in claims), claims


def test_mu_claims_test_only_the_seeds_that_did_not_choose_mu():
    """Issue #40 item 7: seed 0 chose μ (the grid runs there); the claims test seed 1 alone. Here the best μ
    stabilises on seed 1 but not on the tuning seed 0: the claim holds, and says which seed it tested."""
    rows = [({"dataset": "MNIST", "mu": 0.0, "seed": s}, 2.3, 0.6, 0.3, 2.0) for s in (0, 1)]
    rows += [({"dataset": "MNIST", "mu": m, "seed": 0}, 2.3, 0.8, 0.3, 2.0) for m in (0.01, 0.1)]
    rows += [({"dataset": "MNIST", "mu": 1.0, "seed": 0}, 2.3, 0.7, 0.4, 2.5),  # worse than μ = 0 on seed 0
             ({"dataset": "MNIST", "mu": 1.0, "seed": 1}, 2.3, 0.2, 0.0, 0.5)]
    data = _curves(rows)
    data["best"] = data.mu == 1.0
    data["shown"] = data.best | (data.mu == 0)
    config = mu.Fig3Config(datasets=("mnist",), mus=(0.01, 0.1, 1.0), seeds=(0, 1), tune_seeds=1)
    claim, = mu.fig3_claims(data, config)
    assert claim.passed and "(1 seed(s)" in claim.result and "seed 1, which chose nothing" in claim.margin
    similar = mu.fig4_claims(data, config)[0]
    assert similar.passed and "seed 1, which chose nothing" in similar.margin
    alone, = mu.fig3_claims(data[data.seed == 0], mu.Fig3Config(datasets=("mnist",), mus=(0.01, 0.1, 1.0),
                                                                  seeds=(0,)))
    assert not alone.passed and "on the tuning seed alone" in alone.margin
