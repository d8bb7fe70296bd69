"""The lecture notes' figures (replicate.experiments.notes): the inverse schedule, the MLP, the run probe,
Hessian power iteration, the constants cache, claims that can fail, and each figure function end to end
on a tiny stand-in dataset."""
import math

import numpy as np
import pandas as pd
import pytest
import torch

from replicate.core.errors import ReplicateError
from replicate.experiments.notes import common, convex, nonconvex, optimal_e
from replicate.runs import config as run_config
from replicate.fl import models
from replicate.fl.problems import SampleProblem
from replicate.fl.schedules import LRSchedule
from replicate.theory import bounds

from conftest import toy_dataset


# --- the "inverse" schedule -----------------------------------------------------------------------------------

def test_inverse_schedule_is_the_theorem_step_at_each_round_start():
    """η0 = 2/(μγ), decay = E/γ: η_r = 2/(μ(γ + rE)), Li et al. Theorem 1's η_t at t = rE."""
    mu, kappa, E = 0.5, 30.0, 4
    g = bounds.gamma(kappa, E)
    schedule = LRSchedule("inverse", 2.0 / (mu * g), E / g)
    for r in (0, 1, 7, 1000):
        assert schedule(r) == pytest.approx(float(bounds.step_size(r * E, mu=mu, kappa=kappa, local_steps=E)))
    assert LRSchedule("inverse", 3.0, 0.5)(2) == pytest.approx(1.5)
    with pytest.raises(ReplicateError, match="decay >= 0"):
        LRSchedule("inverse", 1.0, -0.1)


# --- the MLP --------------------------------------------------------------------------------------------------

def test_mlp_gradient_matches_autograd():
    """The generic vmap(grad) path of the MLP against plain autograd of each client's masked mean loss."""
    model = models.build("mlp", 5, 3, hidden=4)
    assert isinstance(model, models.MLP) and model.num_params == 5 * 4 + 4 + 4 * 3 + 3
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(2, model.num_params, generator=generator, dtype=torch.float64)
    x = torch.randn(2, 6, 5, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 6), generator=generator)
    mask = torch.tensor([[1.0] * 6, [1.0] * 4 + [0.0] * 2], dtype=torch.float64)
    got = model.grad(w, x, y, mask)
    for k in range(2):
        v = w[k].clone().requires_grad_(True)
        n = int(mask[k].sum())
        loss = model.per_sample_loss(v, x[k, :n], y[k, :n]).mean()
        (expected,) = torch.autograd.grad(loss, v)
        torch.testing.assert_close(got[k], expected)


@pytest.fixture
def toy_mlp_problem():
    ds = toy_dataset(num_clients=4, features=3, classes=3, seed=1)
    return SampleProblem(ds, models.build("mlp", 3, 3, hidden=4))


def test_hessian_norms_match_the_dense_spectrum(toy_mlp_problem):
    problem = toy_mlp_problem
    w = problem.init(0) * 3
    got = common.hessian_norms(problem, w, iters=300, weight_decay=0.1, groups=2)
    for k in range(problem.num_clients):
        lo, hi = int(problem.train.offsets[k]), int(problem.train.offsets[k + 1])

        def loss(v, lo=lo, hi=hi):
            return problem.model.per_sample_loss(v, problem.x[lo:hi].double(), problem.y[lo:hi]).mean() \
                + 0.05 * v @ v

        eig = torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss, w.double()))
        assert got[k] == pytest.approx(float(eig.abs().max()), rel=1e-3)


def test_run_probe_columns_and_schedule(toy_mlp_problem):
    """Rounds 0, 2, 4 and 5 (rounds = 5, eval_every = 2): probes (and L) at three of them, as running maxima."""
    problem = toy_mlp_problem
    assert common.probe_rounds(5, 2, 4) == (0, 2, 5)
    probe = common.RunProbe(rounds=5, eval_every=2, batch_size=8, weight_decay=0.0, probes=4, full_gradient=True,
                            hessian_iters=5)
    rows = [probe(problem, problem.init(0) * (1 + i), r) for i, r in enumerate((0, 2, 4, 5))]  # the engine's rounds
    assert [math.isnan(r["G2_at"]) for r in rows] == [False, False, True, False]
    assert [math.isnan(r["L_run"]) for r in rows] == [False, False, True, False]
    assert all(r["grad_sq"] > 0 and math.isnan(r["dist_sq"]) for r in rows)
    probed = [r for r in rows if not math.isnan(r["G2_at"])]
    assert all(r["Eg_sq_at"] >= r["grad_sq"] for r in probed)
    assert rows[-1]["G2_run"] == max(r["G2_at"] for r in probed)  # a running maximum
    assert rows[-1]["L_run"] == max(r["L_run"] for r in probed)


def test_full_gradient_is_the_gradient_of_the_sample_weighted_objective(toy_mlp_problem):
    problem = toy_mlp_problem
    w = problem.init(0).double().requires_grad_(True)
    loss = problem.model.per_sample_loss(w, problem.x.double(), problem.y).mean() + 0.5 * 0.3 * w @ w
    (expected,) = torch.autograd.grad(loss, w)
    torch.testing.assert_close(common.full_gradient(problem, problem.init(0), 0.3), expected, rtol=1e-5, atol=1e-6)


# --- constants cache and the figure functions on a stand-in dataset ------------------------------------------

@pytest.fixture
def tiny_datasets(monkeypatch):
    """Every dataset name resolves to one small random federated set (4 features, 3 classes)."""
    ds = toy_dataset(num_clients=6, features=4, classes=3, seed=2)
    monkeypatch.setattr(run_config, "dataset", lambda name, data_seed=None, num_clients=None: ds)
    return ds


def test_constants_cache_round_trip(tiny_datasets):
    first, info = common.cached_constants("synthetic(1,1)", weight_decay=0.01, batch_size=8)
    assert not info["from_cache"] and common.constants_path("synthetic(1,1)", weight_decay=0.01, batch_size=8).exists()
    again, info = common.cached_constants("synthetic(1,1)", weight_decay=0.01, batch_size=8)
    assert info["from_cache"]
    assert again.summary() == first.summary()
    np.testing.assert_array_equal(again.minimiser, first.minimiser)


@pytest.mark.parametrize("damage", ["digit", "cut", "unsealed", "other_key"])
def test_damaged_cached_constants_are_estimated_again(tiny_datasets, damage, capsys):
    """A cached constants file changed since it was written (a digit of F*: it still parses), cut short,
    written without a seal, or holding another setting's constants is said so and estimated again: the
    bounds and E* are never computed from it."""
    import json
    first, _ = common.cached_constants("synthetic(1,1)", weight_decay=0.01, batch_size=8)
    path = common.constants_path("synthetic(1,1)", weight_decay=0.01, batch_size=8)
    record = json.loads(path.read_text())
    written = f'"optimal_value": {record["optimal_value"]!r}'
    assert written in path.read_text()
    text = {"digit": lambda: path.read_text().replace(written, f'"optimal_value": {record["optimal_value"] * 2!r}'),
            "cut": lambda: path.read_text()[:-40],
            "unsealed": lambda: json.dumps({k: v for k, v in record.items() if k != "sha256"}),
            "other_key": lambda: json.dumps(common.fileio.sealed({**record, "weight_decay": 0.1}))}[damage]()
    assert text != path.read_text()
    path.write_text(text)
    again, info = common.cached_constants("synthetic(1,1)", weight_decay=0.01, batch_size=8)
    assert not info["from_cache"] and again.optimal_value == first.optimal_value
    assert "are not used" in capsys.readouterr().err
    assert common.cached_constants("synthetic(1,1)", weight_decay=0.01, batch_size=8)[1]["from_cache"]


def test_convex_smoke_run_has_what_the_plot_needs(tiny_datasets):
    config = convex.ConvexConfig.for_profile("smoke", rounds=6, weight_decay=0.01, clients_per_round=3)
    data = convex.convex(config, progress=False)
    runs = data[data.kind == "run"]
    assert set(runs.series) == {"full", "notes", "scheme1", "scheme2", "rate"}
    bounded = runs[runs.series != "rate"]  # the rate instance is measured against its own F*, with no bound drawn
    assert bounded[["gap", "bound", "steps"]].notna().all().all() and (runs.gap > 0).all()
    terms = data[data.kind == "terms"].set_index("series")
    assert terms.loc["rate", "kappa"] == pytest.approx(config.rate_kappa, rel=1e-6)  # λ raised until L/μ = κ
    assert terms.loc["scheme2", "engine_scheme"] == "transformed2"  # the toy clients are unbalanced
    assert terms.loc["full", "lemma1_ok"] and not terms.loc["notes", "lemma1_ok"]
    assert convex.plot_convex(data, config) is not None
    claims = convex.convex_claims(data, config)
    assert len(claims) == 7 and claims[-1].kind == "consistency"
    assert "rate instance (κ = 5)" in claims[-2].claim and claims[-2].kind == "consistency"  # T = 60, not ≫ γ = 40


def test_optimal_e_smoke_run_has_what_the_plot_needs(tiny_datasets):
    config = optimal_e.OptimalEConfig.for_profile("smoke", weight_decay=0.01)
    data = optimal_e.optimal_e(config)
    summary = data[data.kind == "summary"].iloc[0]
    assert summary.E_star == pytest.approx(bounds.optimal_local_steps(
        weights=[1.0], variances=[summary.sum_p2_sigma2], L=summary.L, mu=summary.mu, heterogeneity=summary.Gamma,
        grad_sq_bound=summary.G2, clients_per_round=30))
    assert {"eq. (8)", "Fig. 1a ours", "Fig. 1a paper"} <= set(data.source.dropna())
    assert optimal_e.plot_optimal_e(data, config) is not None
    assert len(optimal_e.optimal_e_claims(data, config)) == 1


def test_nonconvex_smoke_run_has_what_the_plot_needs(tiny_datasets):
    config = nonconvex.NonconvexConfig.for_profile("smoke", steps=20, log_every=10)
    data = nonconvex.nonconvex(config, progress=False)
    curves = data[data.kind == "curve"]
    assert set(curves.E) == {1, 10} and set(curves.model) == {"mlp", "logistic"}
    assert curves[["lhs_min", "rhs", "optimisation"]].notna().all().all()
    terms = data[data.kind == "terms"].set_index("model")
    assert terms["lr_L"].between(0.0, 5.0).all()
    assert (terms.loc["logistic", "L"] == terms.loc["logistic", "L_certified"]).all()
    assert (terms.loc["logistic", "L_certified"] >= terms.loc["logistic", "L_estimated"]).all()  # a valid bound
    assert nonconvex.plot_nonconvex(data, config) is not None
    assert len(nonconvex.nonconvex_claims(data, config)) == 10
    with pytest.raises(ReplicateError, match="multiple of every E"):
        nonconvex.NonconvexConfig.for_profile("smoke", log_every=5)


# --- claims that can fail on constructed frames --------------------------------------------------------------

def _convex_frame(slope: float, bound_scale: float, gamma: float = 80.0) -> pd.DataFrame:
    steps = np.arange(10, 1001, 10)
    runs = [pd.DataFrame({"kind": "run", "dataset": "d", "series": s, "seed": seed, "round": steps // 10,
                          "steps": steps,
                          "gap": (1 + 0.01 * seed) * steps.astype(float) ** slope,
                          "bound": bound_scale * steps.astype(float) ** slope})
            for s in ("full", "notes") for seed in (0, 1)]
    terms = pd.DataFrame([{"kind": "terms", "dataset": "d", "series": s, "B": 1.0, "B_variance": 0.1,
                           "B_heterogeneity": 0.2, "B_local_drift": 0.7, "C": 0.0, "noise_part": 1.0, "init_part": 1.0,
                           "kappa": 10.0, "gamma": gamma, "lemma1_ok": s == "full", "lr0_times_4L": 1.0}
                          for s in ("full", "notes")])
    return pd.concat([*runs, terms], ignore_index=True)


def test_convex_claims_can_fail():
    config = convex.ConvexConfig(schemes=("full",))
    good = convex.convex_claims(_convex_frame(-1.0, 10.0), config)
    assert [c.passed for c in good] == [True, True, False, True]  # γ = 80 ≪ T = 1000: the rate is testable here
    bad = convex.convex_claims(_convex_frame(-0.3, 0.5), config)
    assert [c.passed for c in bad] == [False, False, False, True]
    assert "slope" in bad[2].result and "-0.300" in bad[2].result
    far = convex.convex_claims(_convex_frame(-0.3, 0.5, gamma=1e6), config)[2]  # γ ≫ T: the bound itself is flat
    assert far.passed and far.kind == "consistency" and "not all within ±0.25 of −1" in far.result


def test_nonconvex_claims_can_fail():
    steps = np.array([10.0, 20.0, 40.0])
    curve = lambda E, lhs: pd.DataFrame({"kind": "curve", "model": "mlp", "E": E, "steps": steps, "lhs_min": lhs,
                                         "lhs_mean": lhs,
                                         "optimisation": [2.0, 1.0, 0.5], "variance": 0.1,
                                         "gradient_norm": -0.8, "rhs": [1.3, 0.3, -0.2]})
    terms = pd.DataFrame([{"kind": "terms", "model": "mlp", "E": E, "lr": 0.1, "L": 5.0, "L0": 4.0,
                           "L_certified": math.nan, "lr_L": 0.5, "G2": 16.0, "sum_p2": 0.1,
                           "sum_p2_G2": 1.6, "sum_p2_sigma2": 0.1, "initial_gap": 1.0, "Eg_sq_max": 2.0,
                           "Eg_sq_ratio_max": ratio} for E, ratio in ((1, 0.5), (10, 1.25))])
    data = pd.concat([curve(1, [0.2, 0.1, 0.05]), curve(10, [0.2, 0.4, 0.4]), terms], ignore_index=True)
    claims = nonconvex.nonconvex_claims(data, nonconvex.NonconvexConfig(models=("mlp",)))
    assert [c.passed for c in claims[:4]] == [False, False, True, False]
    assert "violated from T = 40" in claims[0].result and "violated from T = 20" in claims[1].result
    assert claims[4].kind == "consistency" and claims[4].passed  # RHS < 0 exactly past the predicted crossing


def test_optimal_e_claim_can_fail():
    row = {"kind": "summary", "dataset": "d", "E_star": 5000.0, "E_near_low": 100.0, "E_near_high": 300.0,
           "E_measured": 100.0, "E_grid_low": 10.0, "E_grid_high": 500.0, "rounds_min": 36.0, "kappa_G2": 1.0, "numerator": 1.0,
           "G2": 1.0, "kappa": 1.0, "E_star_kept_paper_dist": 1.0, "E_star_kept_measured_dist": 1.0,
           "init_dist_sq": 1.0}
    config = optimal_e.OptimalEConfig()
    assert not optimal_e.optimal_e_claims(pd.DataFrame([row]), config)[0].passed  # 1.22 decades
    assert optimal_e.optimal_e_claims(pd.DataFrame([row | {"E_star": 200.0}]), config)[0].passed


def _summary(E_measured, low, high, E_star=500.0):
    return pd.DataFrame([{"kind": "summary", "dataset": "made up", "E_star": E_star, "kappa_G2": 1.0, "numerator": 1.0,
                          "kappa": 1e5, "G2": 1.0, "rounds_min": 20.0, "E_measured": E_measured,
                          "E_near_low": low, "E_near_high": high, "E_grid_low": 10.0, "E_grid_high": 1500.0,
                          "E_star_kept_paper_dist": 500.0, "E_star_kept_measured_dist": 1.0, "init_dist_sq": 1.0}])


def test_optimal_e_claim_needs_an_interior_measured_optimum():
    """Li et al.'s eq. (8) (not the notes' eq. (8)): a measured minimum at the E grid's end locates no
    optimum (Li et al. §6: no trade-off on mnist balanced), so E* cannot match it, however close."""
    config = optimal_e.OptimalEConfig()
    inside, = optimal_e.optimal_e_claims(_summary(300.0, 200.0, 600.0), config)
    edge, = optimal_e.optimal_e_claims(_summary(1500.0, 600.0, 1500.0), config)
    far, = optimal_e.optimal_e_claims(_summary(300.0, 200.0, 600.0, E_star=50_000.0), config)
    assert inside.passed and not edge.passed and not far.passed
    assert "no optimum is located" in edge.result and "Li et al.'s eq. (8)" in edge.claim
    assert "§6, Impact of E" in edge.source and "mnist balanced" in edge.source


def test_optimal_e_makes_no_claim_where_the_paper_expects_no_trade_off():
    """Issue #40 item 4: on mnist balanced Li et al. §6 says the trade-off 'does not appear', so E* has nothing
    the paper states to match; the row's status no longer fails through it (E* stays in the figure and table)."""
    config = optimal_e.OptimalEConfig()
    both = pd.concat([_summary(300.0, 200.0, 600.0).assign(dataset="synthetic(0,0)"),
                      _summary(1500.0, 600.0, 1500.0).assign(dataset="mnist balanced")])
    claim, = optimal_e.optimal_e_claims(both, config)
    assert claim.claim.startswith("synthetic(0,0)") and claim.passed


def test_convex_bound_claims_with_huge_slack_are_not_counted(tiny_datasets):
    config = convex.ConvexConfig.for_profile("smoke", rounds=6, weight_decay=0.01, clients_per_round=3)
    data = convex.convex(config, progress=False)
    claims = convex.convex_claims(data, config)
    bounds_ = [c for c in claims if "the bound holds" in c.claim]
    assert bounds_ and all(c.kind == ("consistency" if c.basis == "vacuous" else "replication") for c in bounds_)
    loose = data.copy()
    loose.loc[loose.kind == "run", "gap"] = loose.loc[loose.kind == "run", "bound"] * 1e-6
    assert all(c.basis == "vacuous" and c.passed for c in convex.convex_claims(loose, config)
               if "the bound holds" in c.claim)
    broken = data.copy()
    broken.loc[broken.kind == "run", "gap"] = broken.loc[broken.kind == "run", "bound"] * 2
    assert all(c.kind == "replication" and not c.passed for c in convex.convex_claims(broken, config)
               if "the bound holds" in c.claim)


def test_the_rate_is_tested_where_it_is_testable_and_can_fail():
    """The O(1/T) claim on the rate instance (λ raised until κ = 5): a replication claim on the measured slope, which
    a gap falling like 1/T passes and one falling like T^-0.3 fails."""
    config = convex.ConvexConfig(schemes=("full",))

    def with_rate(slope, gamma=40.0):
        steps = np.arange(10, 1001, 10)
        rate = [pd.DataFrame({"kind": "run", "dataset": "d", "series": "rate", "seed": seed, "round": steps // 10,
                              "steps": steps, "gap": (1 + 0.01 * seed) * steps.astype(float) ** slope,
                              "bound": np.nan}) for seed in (0, 1)]
        row = pd.DataFrame([{"kind": "terms", "dataset": "d", "series": "rate", "gamma": gamma, "kappa": 5.0,
                             "weight_decay": 3.2, "L": 16.0, "mu": 3.2}])
        return pd.concat([_convex_frame(-0.3, 0.5, gamma=1e6), *rate, row], ignore_index=True)

    good, bad = (convex.convex_claims(with_rate(s), config) for s in (-1.0, -0.3))
    assert len(good) == 5 and good[3].kind == "replication" and good[3].passed
    assert "λ raised to κ = 5" in good[3].claim and "-1.000" in good[3].result and "γ = 40" in good[3].result
    assert not bad[3].passed and "-0.300" in bad[3].result and "falls slower than 1/T" in bad[3].result
    short = convex.convex_claims(with_rate(-1.0, gamma=400.0), config)[3]  # T = 1000 is not ≫ γ = 400
    assert short.kind == "consistency" and "not tested at this T" in short.claim
