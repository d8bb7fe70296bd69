"""The plotting style: seaborn's colour cycle without importing seaborn at a figure's start."""
import subprocess
import sys

import matplotlib.colors as mcolors


def test_the_colour_cycle_is_seaborns_colorblind_palette():
    import matplotlib.pyplot as plt
    import seaborn as sns

    from replicate.report import plotting

    ours = [mcolors.to_rgb(c) for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]]
    assert [mcolors.to_rgb(c) for c in plotting.COLORBLIND] == ours
    saved = plt.rcParams["axes.prop_cycle"]
    try:
        sns.set_palette("colorblind")  # what the style set before seaborn's import was made lazy
        theirs = [mcolors.to_rgb(c) for c in plt.rcParams["axes.prop_cycle"].by_key()["color"]]
    finally:
        plt.rcParams["axes.prop_cycle"] = saved
    assert ours == theirs


def test_a_figure_module_starts_without_seaborn():
    # seaborn's import (scipy.stats) was ≈ 1.3 s of every notebook's start; the figures that draw with it import it
    code = ("import sys, replicate.report.plotting, replicate.report.claims, replicate.experiments.li2020.fig2; "
            "print('seaborn' in sys.modules, 'scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
