"""STEM's reconstructed complexities (replicate.theory.stem) and the Table 1 / Figure 1 experiments."""
import math

import numpy as np
import pytest

from replicate.core.errors import ReplicateError
from replicate.experiments.khanduri2021 import common, table1, tradeoff
from replicate.theory import stem


def test_bounds_by_hand():
    # STEM: I/T + (bKT)^(-2/3) = 2/8 + 8^(-2/3) = 1/4 + 1/4
    assert stem.stationarity_bound("stem", 8, 1, 2, 1) == pytest.approx(0.5)
    # FedAvg: 1/√(bKT) + (bKI²/T)(1/b + ζ²) = 1/4 + (2·1·1/8)(1/2 + 1)
    assert stem.stationarity_bound("fedavg", 8, 2, 1, 1, zeta2=1.0) == pytest.approx(0.25 + 0.375)
    # ε = 0.01, b = I = K = 1: T = max(I/ε, ε^-3/2/(bK)) = 1000; samples b·T + B = 1000 + 1
    c = stem.costs("stem", 0.01, 1, 1, 1)
    assert (c["iterations"], c["rounds"], c["samples_per_worker"]) == pytest.approx((1000, 1000, 1001))
    c = stem.costs("fedavg", 0.01, 1, 1, 4)  # T = max(1/(bKε²), bKI²(1/b+ζ²)/ε) = max(2500, 800)
    assert (c["iterations"], c["samples"]) == pytest.approx((2500, 4 * 2500))


@pytest.mark.parametrize("method", stem.METHODS)
def test_iterations_are_the_fewest_that_reach_eps(method):
    rng = np.random.default_rng(0)
    b, I, K = rng.integers(1, 50, 20), rng.integers(1, 50, 20), rng.integers(1, 20, 20)
    eps = 10.0 ** rng.uniform(-6, -2, 20)
    T = stem.iterations_to(method, eps, b, I, K)
    # every term ≤ ε at T (so the bound ≤ 2ε); 1% fewer iterations leave a term above ε
    assert np.all(stem.stationarity_bound(method, T, b, I, K) <= 2 * eps * (1 + 1e-12))
    assert np.all(stem.stationarity_bound(method, 0.99 * T, b, I, K) > eps)


@pytest.mark.parametrize("method", stem.METHODS)
def test_tradeoff_curve(method):
    nu = np.linspace(0, 1, 11)
    b, I = stem.tradeoff(method, nu, 1e-6, 10)
    assert np.allclose(b * I, 1e3 / 10)  # b·I = ε^(-1/2)/K on the whole curve
    assert (b[-1], I[0]) == pytest.approx((1.0, 1.0))  # ν = 1: b = 1 (Fed STEM); ν = 0: I = 1 (Minibatch)
    assert np.all(np.diff(b) < 0) and np.all(np.diff(I) > 0)
    with pytest.raises(ReplicateError, match="ν"):
        stem.tradeoff(method, 1.5, 1e-6, 10)
    with pytest.raises(ReplicateError, match="method"):
        stem.tradeoff("scaffold", 0.5, 1e-6, 10)


def test_fixed_budget_tradeoff_balances_the_bound():
    # eq. (3): both terms of STEM's bound are of the same order, I/T, for every T and ν
    T = np.geomspace(1e4, 1e12, 9)
    for nu in (0.0, 0.5, 1.0):
        b, I = stem.tradeoff_at_iterations("stem", nu, T, 10)
        ratio = (I / T) / (b * 10 * T) ** (-2 / 3)
        assert np.allclose(ratio, ratio[0])
    assert stem.exponent([1e-2, 1e-4, 1e-6], [1e3, 1e6, 1e9]) == pytest.approx(1.5)


def test_figure1_checks_hold_and_can_fail():
    config = tradeoff.Fig1Config.for_profile("smoke")
    data = tradeoff.tradeoff(config)
    claims = tradeoff.tradeoff_claims(data, config)
    assert len(claims) == 4 and all(c.passed for c in claims) and all(c.kind == "consistency" for c in claims)
    broken = data.copy()  # a surface that loses the optimal sample complexity somewhere
    broken.loc[(broken.kind == "surface") & broken.on_surface.astype(bool), "samples_ratio"] *= 1.5
    assert not tradeoff.tradeoff_claims(broken, config)[0].passed


def test_table1_checks_hold_and_can_fail():
    config = table1.Table1Config.for_profile("smoke")
    data = table1.table1(config)
    assert set(data[data.kind == "rate"].view) == {"ε-form", "fixed-T"}
    claims = table1.table1_claims(data, config)
    assert len(claims) == 6 and all(c.passed for c in claims) and all(c.kind == "consistency" for c in claims)
    assert len(data[data.kind == "cell"]) == len(table1.CELLS)
    broken = data.copy()  # FedAvg at STEM's sample complexity would contradict the table
    broken.loc[broken.method == "fedavg", "samples_exp"] = 1.5
    assert [c.passed for c in table1.table1_claims(broken, config)].count(False) == 1


def test_table1_config_rejects_bad_input():
    with pytest.raises(ReplicateError, match="eps_range"):
        table1.Table1Config.for_profile("smoke", eps_range=[1e-6, 2.0])
    with pytest.raises(ReplicateError, match="nus"):
        table1.Table1Config.for_profile("smoke", nus=[0.0, 1.5])


def _fake_fig5(samples_to_90: dict, losses: dict):
    """Curves whose test accuracy crosses 0.9 at the given samples and whose loss ends at the given value."""
    import pandas as pd

    rows = []
    for (algorithm, i, seed), hit in samples_to_90.items():
        for r in range(11):
            samples = 100.0 * r
            rows.append({"kind": "curve", "algorithm": algorithm, "local_updates": i, "seed": seed, "round": r,
                         "samples": samples, "test_acc": 0.95 if samples >= hit else 0.5,
                         "train_loss": losses[(algorithm, i, seed)] if r == 10 else 1.0})
    return pd.DataFrame(rows)


def test_figure5_claims_hold_and_fail_on_known_curves():
    from replicate.experiments.khanduri2021 import samples

    config = samples.Fig5Config.for_profile("paper", local_updates=[10, 100], seeds=[0, 1], evals=10, tail=0.1)
    keys = [(a, i, s) for a in ("STEM", "FedAvg", "SCAFFOLD") for i in (10, 100) for s in (0, 1)]
    hits = {k: (300.0 if k[1] == 10 else 800.0) for k in keys}
    losses = {k: (0.1 if k[0] == "STEM" else 0.2) for k in keys}
    claims = samples.samples_claims(_fake_fig5(hits, losses), config)
    assert [c.passed for c in claims] == [True, True, True] and all(c.kind == "replication" for c in claims)
    hits[("FedAvg", 100, 1)] = math.inf  # never reaches the target with the large I: still "more samples"
    losses[("STEM", 100, 1)] = 0.3  # STEM loses on one seed at I = 100
    claims = samples.samples_claims(_fake_fig5(hits, losses), config)
    assert [c.passed for c in claims] == [True, True, False] and "never" in claims[0].result
    hits[("STEM", 10, 0)] = 900.0  # the small I needs more on the tuning seed: it chose the rates, it tests nothing
    claims = samples.samples_claims(_fake_fig5(hits, losses), config)
    assert claims[0].passed and "seed 1, which chose nothing (one seed)" in claims[0].margin
    hits[("STEM", 10, 1)] = 900.0  # ... and on the held-out seed
    assert not samples.samples_claims(_fake_fig5(hits, losses), config)[0].passed


def test_figure5_config_checks_and_run_configs():
    from replicate.experiments.khanduri2021 import samples
    from replicate.fl.algorithms import Stem
    config = samples.Fig5Config.for_profile("paper")
    assert config.rounds(10) == 375 and config.rounds(100) == 38  # ⌈30,000 / (8·I)⌉
    assert (0.1, 200.0) not in config.stem_grid() and (0.1, 100.0) in config.stem_grid()  # a = c·η_1² < 1
    stem = config.run_config("stem", 10, 2, lr=0.1, c=10.0)
    assert (stem.algorithm, stem.clients_per_round, stem.lr_schedule) == (Stem(momentum_c=10.0), None, "epoch_cube_root")
    assert stem.lr_decay == pytest.approx(80 / 540) and stem.data_seed == stem.seed == 2
    assert config.run_config("fedavg", 10, 0, lr=0.05).clients_per_round == 100
    with pytest.raises(ReplicateError, match="c·η²"):
        samples.Fig5Config.for_profile("paper", stem_lr=[1.0], stem_c=[200.0])
    with pytest.raises(ReplicateError, match="tune_seeds"):
        samples.Fig5Config.for_profile("paper", seeds=[0], tune_seeds=2)


def test_figure5_flags_tuned_rates_at_their_grid_edge():
    """The CPU-scale run kept STEM's κ̄ = 0.1, c = 150: the largest of both grids; say so."""
    from replicate.experiments.khanduri2021 import samples

    config = samples.Fig5Config.for_profile("paper", stem_lr=[0.05, 0.1], stem_c=[50, 100, 150])
    candidates = config.candidates("stem")
    assert samples.grid_edges(candidates, {"lr": 0.1, "c": 150.0}) == "lr, c"
    assert samples.grid_edges(candidates, {"lr": 0.1, "c": 100.0}) == "lr"
    assert samples.grid_edges([{"lr": 0.1}], {"lr": 0.1}) == ""  # a one-value grid has no edge to speak of
    keys = [(a, i, s) for a in ("STEM", "FedAvg", "SCAFFOLD") for i in (10, 100) for s in (0, 1)]
    data = _fake_fig5({k: 300.0 for k in keys}, {k: 0.2 for k in keys})
    data["at_edge"] = np.where(data.algorithm == "STEM", "lr, c", "")
    claims = samples.samples_claims(data, config)
    assert all("STEM lr, c" in c.result for c in claims[1:]) and "FedAvg" not in claims[1].result.split("beyond")[1]


def test_a_group_whose_every_candidate_diverged_is_said_untuned(monkeypatch):
    """The paper-profile Figure 5 computed on an H200: all 34 STEM candidates diverged on the tuning
    seed at both I, so its "chosen" κ̄ = 0.01, c = 1 is only the grid's first; claims and legend say so instead
    of calling it tuned at its grid's edge."""
    from types import SimpleNamespace

    from replicate.experiments.khanduri2021 import common, samples
    from replicate.runs import tune

    config = samples.Fig5Config.for_profile("paper", local_updates=[10], stem_lr=[0.05, 0.1], stem_c=[50, 100],
                                            client_lr=[0.05, 0.1], seeds=[0, 1])
    stem, fedavg = ("stem", 10), ("fedavg", 10)
    scores = ([(stem, h, math.inf) for h in config.candidates("stem")]
              + [(fedavg, {"lr": 0.05}, 0.3), (fedavg, {"lr": 0.1}, 0.2)])
    found = SimpleNamespace(scores=scores, chosen={stem: config.candidates("stem")[0], fedavg: {"lr": 0.1}},
                            runs=[(stem, 1, None), (fedavg, 1, None)], tuning=[])
    monkeypatch.setattr(tune.Grid, "tune", lambda self, *a, **k: found)
    _, runs, _ = common.tune_and_run(config, config.local_updates)
    assert [r[-1] for r in runs] == [common.ALL_DIVERGED, "lr"]
    keys = [(a, i, s) for a in ("STEM", "FedAvg", "SCAFFOLD") for i in (10, 100) for s in (0, 1)]
    data = _fake_fig5({k: 300.0 for k in keys}, {k: 0.2 for k in keys})
    data["at_edge"] = np.where(data.algorithm == "STEM", common.ALL_DIVERGED, np.where(data.algorithm == "FedAvg",
                                                                                         "lr", ""))
    note = common.edge_note(data[data.kind == "curve"])
    assert note == ("; tuned at the edge of its grid (the best may lie beyond): FedAvg lr; no setting trained: every "
                    "candidate of its grid diverged on the tuning seed, so its finals ran the grid's first (STEM)")
    part = data[(data.kind == "curve") & (data.algorithm == "STEM")].assign(chosen="lr=0.05, c=50")
    assert common.legend_label(part, "STEM") == "STEM (lr=0.05, c=50: every candidate diverged, none tuned)"


def _fake_cifar(finals: dict, rounds: int = 10):
    """Curves of every (figure, algorithm, seed) whose last evaluation is the given (loss, accuracy)."""
    import pandas as pd

    rows = []
    for (figure, algorithm, seed), (loss, acc) in finals.items():
        for r in range(rounds + 1):
            last = r == rounds
            rows.append({"kind": "curve", "figure": figure, "algorithm": algorithm, "seed": seed, "round": r,
                         "train_loss": loss if last else 2.0, "test_acc": acc if last else 0.3,
                         "chosen": "lr=0.1", "at_edge": "", "setting": figure, "dataset": "cifar10_jpg_stem_moderate"})
    return pd.DataFrame(rows)


def test_cifar_claims_hold_and_fail_by_their_margins():
    from replicate.experiments.khanduri2021 import cifar

    config = cifar.Fig3Config.for_profile("paper", seeds=[0, 1])
    values = {("STEM", s): (0.50, 0.62) for s in (0, 1)} | {("FedAvg", s): (0.52, 0.61) for s in (0, 1)} | {
        ("SCAFFOLD", s): (0.60, 0.60) for s in (0, 1)}
    finals = {(f, a, s): v for (a, s), v in values.items() for f in ("Figure 2", "Figure 3")}
    claims = cifar.cifar_claims(_fake_cifar(finals), config)
    assert [c.passed for c in claims] == [True, True, True] and all(c.kind == "replication" for c in claims)
    assert "lossy" in cifar.title(config, _fake_cifar(finals), cifar.is_lossy(_fake_cifar(finals)))
    assert all(c.source for c in claims)
    finals[("Figure 3", "STEM", 1)] = (0.515, 0.612)  # 1 % below FedAvg's loss, 0.2 points above: under both margins
    claims = cifar.cifar_claims(_fake_cifar(finals), config)
    assert [c.passed for c in claims] == [False, False, True]
    finals[("Figure 2", "FedAvg", 0)] = (0.52, 0.50)  # on the tuning seed: not a test of anything
    assert cifar.cifar_claims(_fake_cifar(finals), config)[2].passed
    finals[("Figure 2", "FedAvg", 1)] = (0.52, 0.50)  # Figure 2's FedAvg ends 11 points lower on the held-out seed
    assert not cifar.cifar_claims(_fake_cifar(finals), config)[2].passed
    two = cifar.Fig2Config.for_profile("paper", seeds=[0, 1])  # Figure 2 makes no "similar" claim
    assert len(cifar.cifar_claims(_fake_cifar({k: v for k, v in finals.items() if k[0] == "Figure 2"}), two)) == 2


def test_cifar_configs_and_run_configs():
    from replicate.experiments.khanduri2021 import cifar
    from replicate.fl.algorithms import FedAvg, Stem

    fig2, fig3, fig4 = (cls.for_profile("paper") for cls in (cifar.Fig2Config, cifar.Fig3Config, cifar.Fig4Config))
    assert (fig2.batch_size, fig2.local_updates, fig3.batch_size, fig3.local_updates) == (8, 61, 64, 7)  # spec §6.6
    assert (fig2.heterogeneity, fig3.heterogeneity, fig4.heterogeneity) == ("moderate", "moderate", "high")
    assert len(fig2.stem_grid()) == 34 and len(fig2.candidates("fedavg")) == 6
    stem = fig2.run_config("stem", 61, 2, lr=0.1, c=10.0)
    assert (stem.algorithm, stem.model, stem.rounds, stem.eval_every) == (Stem(momentum_c=10.0), "lenet5", 100, 2)
    assert stem.lr_decay == pytest.approx(488 / 490) and stem.data_seed == stem.seed == 2 and stem.num_clients is None
    assert stem.dataset in ("cifar10_stem_moderate", "cifar10_jpg_stem_moderate")
    assert fig2.run_config("fedavg", 61, 0, lr=0.05).algorithm == FedAvg("full", 100)
    own, reference = fig3.compared()
    assert own is fig3 and (reference.batch_size, reference.local_updates) == (8, 61)
    assert reference.run_config("stem", 61, 0, lr=0.1, c=10.0) == fig2.run_config("stem", 61, 0, lr=0.1, c=10.0)
    assert cifar.Fig3Config.for_profile("paper", compare_fig2=False).compared() == [
        cifar.Fig3Config.for_profile("paper", compare_fig2=False)]
    smoke = cifar.Fig2Config.for_profile("smoke")
    assert smoke.run_config("fedavg", 2, 0, lr=0.05).num_clients == 10 and smoke.clients() == 10
    with pytest.raises(ReplicateError, match="num_clients"):
        cifar.Fig2Config.for_profile("paper", num_clients=101)
    with pytest.raises(ReplicateError, match="c·η²"):
        cifar.Fig4Config.for_profile("paper", stem_lr=[1.0], stem_c=[200.0])


def test_cifar_stem_pairs_replace_the_grid_and_are_checked():
    from replicate.experiments.khanduri2021 import cifar

    ridge = cifar.Fig2Config.for_profile("paper", stem_pairs=[[0.05, 570], [0.1, 150], [0.2, 35], [0.4, 9]])
    assert ridge.stem_grid() == [(0.05, 570.0), (0.1, 150.0), (0.2, 35.0), (0.4, 9.0)]  # a ≈ 0.9 each
    assert ridge.candidates("stem") == [{"lr": k, "c": c} for k, c in ridge.stem_grid()]
    paper = cifar.Fig2Config.for_profile("paper")
    assert paper.stem_pairs == () and len(paper.stem_grid()) == 34  # the spec's grid, pairs with a < 1
    fig3 = cifar.Fig3Config.for_profile("paper", stem_pairs=[[0.2, 35]])
    assert all(part.stem_grid() == [(0.2, 35.0)] for part in fig3.compared())  # Figure 2's runs use them too
    with pytest.raises(ReplicateError, match=r"stem_pairs.*\(0\.4, 35\)"):
        cifar.Fig4Config.for_profile("paper", stem_pairs=[[0.1, 150], [0.4, 35]])

def _fake_measured(samples_of, config):
    """Rows as ``measured.measured`` returns them, from made-up samples per (b, I, seed)."""
    import pandas as pd

    rows = []
    for (b, i), s in [(p, s) for p in config.pairs for s in config.seeds]:
        samples = samples_of(b, i, s)
        rows.append({"b": b, "I": i, "product": b * i, "seed": s, "relative": b * i / config.product,
                     "stem_lr": 0.1, "stem_c": 150.0, "rounds": samples / (b * i) - 1, "samples": samples,
                     "last_train_loss": 0.4, "outcome": "reached" if math.isfinite(samples) else "diverged",
                     "role": "tuning" if s in config.tuning_seeds() else "test", "at_edge": ""})
    return pd.DataFrame(rows)


def test_figure1_measured_claims_hold_and_fail_on_made_up_runs():
    from replicate.experiments.khanduri2021 import measured

    config = measured.Fig1MeasuredConfig.for_profile("paper")
    remark3 = lambda b, i, s: 1600.0 * max(1.0, b * i / config.product) + s  # noqa: E731  (Remark 3's shape)
    claims = measured.measured_claims(_fake_measured(remark3, config), config)
    assert [c.passed for c in claims] == [True, True, True] and all(c.kind == "replication" for c in claims)
    assert all(c.source.startswith("§3.1, Remark") for c in claims)
    wasteful = lambda b, i, s: 1600.0 * (2.5 if (b, i, s) == (8, 10, 1) else 1.0)  # noqa: E731
    first, _, third = measured.measured_claims(_fake_measured(wasteful, config), config)
    assert not first.passed and not third.passed  # seed 1: the curve's mean above 4P's; one split 2.5× another
    assert "every test seed" in first.claim and config.tuning_seeds() == (0,) and config.test_seeds() == (1, 2)
    # the tuning seed chose the settings: the claims never read it, however its runs went
    tuning_only = lambda b, i, s: 1600.0 * (2.5 if (b, i, s) == (8, 10, 0) else 1.0) * max(  # noqa: E731
        1.0, b * i / config.product)
    assert all(c.passed for c in measured.measured_claims(_fake_measured(tuning_only, config), config))
    never = lambda b, i, s: math.inf if (b, i) == (40, 2) else remark3(b, i, s)  # noqa: E731
    first, _, third = measured.measured_claims(_fake_measured(never, config), config)
    assert not first.passed and not third.passed and "never" in first.result and "(40, 2) diverged" in first.result


def test_figure1_measured_config_and_run_configs():
    from replicate.experiments.khanduri2021 import measured
    from replicate.fl.algorithms import Stem

    config = measured.Fig1MeasuredConfig.for_profile("paper")
    run = config.run_config(2, 40, 1, 0.1, 150.0)
    assert (run.batch_size, run.local_steps, run.rounds, run.algorithm) == (2, 40, 80, Stem(momentum_c=150.0))
    assert run.client_lr == 0.1 and config.run_config(2, 40, 1, 0.2, 35.0).algorithm == Stem(momentum_c=35.0)
    assert run.eval_every == 2 and run.lr_decay == pytest.approx(80 / 540)  # every 160 samples per worker
    assert config.run_config(128, 10, 0, 0.1, 150.0).eval_every == 1
    assert all(0.85 < common.first_momentum_weight(k, c) < 1 for k, c in config.stem_grid)  # a ≈ 0.9
    with pytest.raises(ReplicateError, match="larger product"):
        measured.Fig1MeasuredConfig.for_profile("paper", pairs=[[2, 10], [8, 10]])
    with pytest.raises(ReplicateError, match="c·η²"):
        measured.Fig1MeasuredConfig.for_profile("paper", stem_grid=[[0.1, 150], [1.0, 200]])
    with pytest.raises(ReplicateError, match="no seed"):
        measured.Fig1MeasuredConfig.for_profile("paper", seeds=[0], tune_seeds=1)
    one = measured.Fig1MeasuredConfig.for_profile("paper", stem_grid=[[0.1, 150]], seeds=[0, 1])
    assert one.tuning_seeds() == () and one.test_seeds() == (0, 1)  # one setting: nothing to tune, every seed tests


def test_figure1_measured_tuning_ranks_reached_before_not_reached_before_diverged():
    from replicate.experiments.khanduri2021 import measured

    rows = [{"outcome": "reached", "rounds": 10.0, "last_train_loss": 0.49},
            {"outcome": "reached", "rounds": 23.0, "last_train_loss": 0.3},
            {"outcome": "not reached", "rounds": math.inf, "last_train_loss": 0.6},
            {"outcome": "not reached", "rounds": math.inf, "last_train_loss": 0.9},
            {"outcome": "diverged", "rounds": math.inf, "last_train_loss": math.nan}]
    ranks = [measured.rank(r) for r in rows]
    assert ranks == sorted(ranks) and len(set(ranks)) == 5 and ranks[-1] == math.inf


def test_a_gpu_run_replayed_here_is_compared_evaluation_by_evaluation(monkeypatch):
    """``replay`` recomputes a ledger run's first rounds on this CPU and compares it with the GPU's history: STEM
    Figure 5's final at I = 10, seed 0, to its first evaluation after round 0 (round 6: both agree; the GPU's
    first NaN, round 36, is read from the ledger, and nothing here diverged in six rounds)."""
    from replicate.core import paths
    from replicate.data import store
    from replicate.experiments.khanduri2021 import replay

    if not store.is_available("mnist"):
        pytest.skip("MNIST is not staged: the replay trains STEM's MNIST workers")
    monkeypatch.setenv("REPLICATE_LEDGER", str(paths.figures_dir() / "ledger"))
    name = next(n for n, rounds in replay.RUNS.items() if rounds > 10)  # the I = 10 run
    out = replay.replay(name, 6)
    assert (out["local_steps"], out["seed"], out["client_lr"], out["momentum_c"]) == (10, 0, 0.01, 1.0)
    assert out["gpu"]["first_nan"] == 36 and out["gpu"]["device"] == "cuda" and out["here"]["first_nan"] is None
    assert [r["round"] for r in out["rows"]] == [0, 6] and out["agree_until"] == 6
    assert all(abs(r["here"] - r["gpu"]) <= replay.AGREE * abs(r["gpu"]) for r in out["rows"])
