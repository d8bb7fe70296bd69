"""The run layer's curve measures: each final window, divergence, fluctuation (replicate.runs.measures)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from replicate.runs import measures


def curve(values, every=1):
    return pd.DataFrame({"round": np.arange(len(values)) * every, "train_loss": values, "test_acc": values})


def test_each_window_takes_the_rows_it_names():
    c = curve([9.0, 7.0, 5.0, 3.0, 1.0], every=10)  # rounds 0, 10, 20, 30, 40
    assert measures.final(c, "train_loss", rows=2) == 2.0
    assert measures.final(c, "train_loss", fraction=0.1) == 1.0  # at least one row
    assert measures.final(c, "train_loss", fraction=0.4) == 2.0
    assert measures.final(c, "train_loss", rounds=15) == 2.0  # rounds 30 and 40 (after round 40 − 15)
    assert measures.final(c, "train_loss", early=20) == 6.0  # rounds 10 and 20, not round 0
    with pytest.raises(ValueError, match="exactly one window"):
        measures.final(c, "train_loss", rows=2, rounds=15)


def test_a_diverged_curve_never_wins():
    c = curve([3.0, 2.0, 1.5, math.nan, math.nan])
    assert measures.final(c, "train_loss", rows=2) == math.inf
    assert math.isnan(measures.final(c, "test_acc", fraction=0.5))
    assert measures.final(c, "train_loss", early=2) == 1.75  # what happened before it diverged
    assert measures.worst("dissimilarity") == math.inf


def test_finals_group_a_tidy_frame():
    frame = pd.concat([curve([3.0, 2.0, 1.0]).assign(k=1), curve([3.0, 3.0, math.inf]).assign(k=2)])
    got = measures.finals(frame, "train_loss", ["k"], rows=2)
    assert got[1] == 1.5 and got[2] == math.inf


def test_fluctuation_is_rise_over_fall():
    assert measures.fluctuation([3.0, 2.0, 1.5, 1.0]) == 0.0
    assert measures.fluctuation([2.0, 1.0, 1.5, 1.0]) == pytest.approx(0.5 / 1.5)
    assert measures.fluctuation([1.0, 2.0, 1.0]) == pytest.approx(1.0)  # no net progress
    assert measures.fluctuation([1.0, 2.0, float("nan")]) == math.inf  # diverged
    frame = pd.concat([curve([3.0, 2.0, 1.0]).assign(k=1), curve([1.0, 2.0, 1.0]).assign(k=2)])
    assert measures.fluctuations(frame, ["k"]).tolist() == [0.0, 1.0]


def test_stopped_at_is_where_a_run_s_rows_became_a_repeated_nan_tail():
    """``stopped_at``: where the engine stopped computing a run. A finite run (even one whose rows repeat, at a
    fixed point) ran to its last evaluation; a run whose model turned NaN stopped at the first row of the tail it
    was filled with (``engine._fill``: every metric repeated, a NaN among them, the round and rate its own); a
    NaN row that later rows do not repeat was trained on; with extra metrics the engine never fills."""
    stopped_at = measures.stopped_at

    def history(loss, accuracy):
        return pd.DataFrame({"round": [0, 2, 4, 6, 8], "lr": [0.1, 0.1, 0.05, 0.05, 0.02],
                             "train_loss": loss, "test_accuracy": accuracy})

    nan = float("nan")
    assert stopped_at(history([3, 2, 1, 1, 1], [0.1, 0.5, 0.9, 0.9, 0.9])) == 8  # a fixed point: trained on
    assert stopped_at(history([3, 2, nan, nan, nan], [0.1, 0.5, 0.1, 0.1, 0.1])) == 4
    assert stopped_at(history([3, nan, nan, nan, nan], [0.1, 0.2, 0.1, 0.1, 0.1])) == 4  # the row at 2 not repeated
    assert stopped_at(history([nan] * 5, [0.1] * 5)) == 0  # NaN from the start
    assert stopped_at(history([3, 2, nan, nan, nan], [0.1, 0.5, 0.1, 0.1, 0.1]), absorbs=False) == 8
    assert stopped_at(history([3, 2, nan, nan, nan], [0.1, 0.5, 0.1, 0.1, 0.1]).iloc[::-1]) == 4  # read by round
    assert stopped_at(history([3, 2, nan, nan, nan], [0.1, 0.5, 0.1, 0.1, 0.1]).iloc[:0]) == 0  # nothing computed
