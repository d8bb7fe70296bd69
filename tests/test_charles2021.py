"""Figure layer of Charles & Konečný 2021: configs, tidy data, and claims that pass on the
computed data and fail when the data are wrong."""
import dataclasses

import matplotlib.pyplot as plt
import numpy as np
import torch
import pytest

from replicate.core.errors import ReplicateError
from replicate.experiments.charles2021 import fig9, frontiers, measured, simulated, tables

KEYS = {"fig1": (frontiers, "Fig1Config"), "fig2": (frontiers, "Fig2Config"), "fig3": (frontiers, "Fig3Config"),
        "fig4": (frontiers, "Fig4Config"), "fig5": (simulated, "Fig5Config"), "fig7": (simulated, "Fig7Config"),
        "fig8": (simulated, "Fig8Config"), "fig9": (fig9, "Fig9Config"), "fig10": (simulated, "Fig10Config"),
        "table1_2": (tables, "Table12Config"), "fig_measured": (measured, "FigMeasuredConfig")}


def _passed(claims):
    return [c.passed for c in claims]


@pytest.mark.parametrize("key", KEYS)
def test_every_key_has_config_data_claims_and_plot(key):
    module, config_name = KEYS[key]
    config_cls = getattr(module, config_name)
    smoke, paper = config_cls.for_profile("smoke"), config_cls.for_profile("paper")
    assert dataclasses.is_dataclass(smoke) and smoke.profile == "smoke" and paper.profile == "paper"
    with pytest.raises(dataclasses.FrozenInstanceError):
        paper.mu = 2.0
    assert any("PROPOSED" in d for d in paper.deviations) and any("eq. (17)" in d for d in paper.deviations)
    for name in (key, f"{key}_claims", f"plot_{key}"):
        assert callable(getattr(module, name))


def test_for_profile_rejects_bad_profiles_and_overrides():
    with pytest.raises(ReplicateError):
        frontiers.Fig1Config.for_profile("huge")
    with pytest.raises(ReplicateError):
        frontiers.Fig1Config.for_profile("smoke", gamma_point=3)
    assert frontiers.Fig1Config.for_profile("smoke", gamma_points=7).gamma_points == 7


@pytest.fixture(scope="module")
def fig2_data():
    config = frontiers.Fig2Config.for_profile("smoke")
    return config, frontiers.fig2(config)


def test_fig2_tidy_frame_and_claims(fig2_data):
    config, data = fig2_data
    assert {"panel", "series", "kind", "rho", "eps", "kappa", "server"} <= set(data.columns)
    assert data["rho"].between(0, 1).all() and data["eps"].between(0, 1).all()
    assert len(data) == len(config.conditions) * len(config.servers) * config.kappa_points
    assert all(_passed(frontiers.fig2_claims(data, config)))


def test_fig2_symmetry_and_ordering_claims_can_fail(fig2_data):
    config, data = fig2_data
    bent = data.copy()
    hb = bent["server"] == "heavyball"
    bent.loc[hb, "eps"] *= 1 - 0.05 * bent.loc[hb, "rho"]
    assert _passed(frontiers.fig2_claims(bent, config))[3] is False
    swapped = data.copy()
    swapped["server"] = swapped["server"].map({"gd": "heavyball", "heavyball": "gd", "nesterov": "nesterov"})
    assert _passed(frontiers.fig2_claims(swapped, config))[0] is False


def test_fig1_claims_pass_and_fail_without_the_one_shot_end():
    config = frontiers.Fig1Config.for_profile("smoke", conditions=(10.0, 100.0), steps_max=10_000)
    data = frontiers.fig1(config)
    assert all(_passed(frontiers.fig1_claims(data, config)))
    truncated = data[~((data["sweep"] == "K") & (data["K"] > 30))]
    assert _passed(frontiers.fig1_claims(truncated, config))[1] is False


def test_fig3_subset_claim_fails_for_a_shifted_frontier():
    config = frontiers.Fig3Config.for_profile("smoke", servers=("gd",), steps_max=1000)
    data = frontiers.fig3(config)
    assert all(_passed(frontiers.fig3_claims(data, config)))
    shifted = data.copy()
    shifted.loc[shifted["alpha"] == 10.0, "eps"] += 0.01
    assert _passed(frontiers.fig3_claims(shifted, config))[0] is False


def test_fig5_cusp_claim_passes_and_fails_when_the_cusp_moves():
    config = simulated.Fig5Config.for_profile("smoke", dims=(10, 60), gamma_points=400)
    data = simulated.fig5(config)
    claims = simulated.fig5_claims(data, config)
    assert all(_passed(claims)[:3])
    # "noisy for small d" tests the size of the noise: visible noise at the smallest d passes,
    # the same noise at the largest d fails (it must shrink as d grows).
    for panel, expected in (("d = 10", True), ("d = 60", False)):
        noisy = data.copy()
        rows = (noisy["panel"] == panel) & (noisy["family"] == "maml")
        noisy.loc[rows, "rho"] += 0.05 * (-1.0) ** np.arange(rows.sum())
        assert simulated.fig5_claims(noisy, config)[3].passed is expected
    moved = data.copy()
    beyond = (moved["family"] == "maml") & (moved["regime"] == "beyond")
    moved.loc[beyond, "eps"] *= 1.02
    assert _passed(simulated.fig5_claims(moved, config))[2] is False


def test_fig_measured_and_tables_through_the_engine():
    config = measured.FigMeasuredConfig.for_profile("smoke", servers=("gd",), points=3)
    data = measured.fig_measured(config)
    runs = data[data["kind"] == "measured"]
    assert len(runs) == 3 * 3 and set(runs["problem"]) == {"worst case", "random"}
    assert all(_passed(measured.fig_measured_claims(data, config)))
    off = data.copy()
    off.loc[(off["kind"] == "measured") & (off["problem"] == "worst case"), "rho"] *= 1.001
    assert _passed(measured.fig_measured_claims(off, config))[1] is False
    table_config = tables.Table12Config.for_profile("smoke")
    table_data = tables.table1_2(table_config)
    assert all(_passed(tables.table1_2_claims(table_data, table_config)))
    assert set(table_data.loc[table_data["table"] == "Table 1", "algorithm"]) >= {"FedAvg, Reptile", "MAML", "FOMAML"}


def test_plots_have_one_panel_per_facet(fig2_data):
    config, data = fig2_data
    fig = frontiers.plot_fig2(data)
    assert sum(ax.get_visible() for ax in fig.axes) == len(config.conditions)
    plt.close(fig)


def test_engine_quadratic_refuses_minibatches_and_records_iterates():
    from replicate import theory as th
    from replicate.fl.algorithms import LocalWork
    from replicate.fl.problems import QuadraticFederatedProblem

    problem = th.random_problem(3, 2, 1.0, 5.0, 1.0, np.random.default_rng(0))
    engine_problem = QuadraticFederatedProblem(problem, x0=torch.zeros(3, dtype=torch.float64), record_iterates=True)
    with pytest.raises(ReplicateError, match="full gradients"):
        engine_problem.draw_batches([(None, 2, None)], LocalWork(2, "steps", 4))
    assert {"x0", "x1", "x2", "objective", "distance"} <= set(engine_problem.evaluate(engine_problem.init(0)))
