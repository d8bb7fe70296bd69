"""Notebooks are skipped exactly when a dataset they read at their profile is missing."""
import pytest

from replicate.cli import runner
from replicate.core.errors import ReplicateError
from replicate.experiments import catalog, requirements


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """A fresh clone without a data folder and without a local source to stage from."""
    for name in ("data", "source"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("REPLICATE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("REPLICATE_DATA_FROM", str(tmp_path / "source"))


def test_without_any_data_only_notebooks_that_read_data_are_skipped(no_data, monkeypatch):
    monkeypatch.setenv("REPLICATE_STAND_INS", "1")  # the stand-ins' names; the official ones: test_data_variants
    skipped = {nb.key: requirements.skip_reason(nb.key, "smoke") for nb in runner.discover()}
    for key in ("li2020/fig1a", "li2020/fig3", "notes/convex", "notes/optimal_e", "fedprox2020/stragglers",
                "li2020/fig2", "charles2021/fig1", "khanduri2021/table1"):  # synthetic, quadratic or analytic
        assert skipped[key] is None, key
    for key in ("li2020/fig1cd", "li2020/table2", "fedprox2020/fig2", "khanduri2021/fig5"):
        assert skipped[key].startswith("mnist is not available: run `python -m replicate data fetch mnist`"), key
    assert skipped["charles2021/fig6"].startswith("femnist is not available")
    assert skipped["charles2021/table3"].startswith("shakespeare_tff is not available")  # its smoke rows
    assert skipped["charles2021/fig12"].startswith("femnist, shakespeare_tff are not available: run "
                                                   "`python -m replicate data fetch femnist shakespeare_tff`")


def test_requirements_follow_the_profile_and_the_knobs(monkeypatch):
    monkeypatch.setenv("REPLICATE_STAND_INS", "1")  # this machine's offline copies (replicate.data.variants)
    assert requirements.needs("li2020/fig1a", "smoke") == ()
    assert requirements.needs("li2020/fig1a", "paper") == ("mnist",)
    assert requirements.needs("li2020/fig1a", "smoke", {"datasets": ["mnist_balanced"]}) == ("mnist",)
    assert requirements.needs("charles2021/table3", "paper") == ("femnist", "shakespeare_tff")
    assert requirements.needs("fedprox2020/table1", "paper") == ("femnist", "mnist", "sent140", "shakespeare")
    assert requirements.needs("khanduri2021/fig5", "smoke") == ("mnist",)
    for key in catalog.FIGURES:  # every dataset name of every figure is known, at both profiles
        for profile in ("smoke", "paper"):
            requirements.needs(key, profile)
    with pytest.raises(ReplicateError, match="no dataset builder is registered for 'imagenet'"):
        requirements.staged("imagenet")


def test_a_figure_whose_data_is_missing_is_refused_before_any_notebook_starts(no_data, tmp_path, monkeypatch):
    """`figures` refuses a figure that reads a dataset neither here nor read by any cached run, in one line, before a
    kernel starts; a cached run that read it lets the figure through (its runs may all be cached: the ledger,
    `cache import`), and a figure that reads no dataset is never refused."""
    import json
    import subprocess
    import sys
    import time

    monkeypatch.setenv("REPLICATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    blocked = requirements.blocked(["li2020/fig2", "khanduri2021/fig5", "li2020/table2"], "smoke")
    assert list(blocked) == ["khanduri2021/fig5", "li2020/table2"]
    refused = "khanduri2021/fig5 cannot run here: " + blocked["khanduri2021/fig5"]
    assert refused.startswith("khanduri2021/fig5 cannot run here: mnist is not available, and no cached run read it: "
                              "run `python -m replicate data fetch mnist`"), refused
    assert requirements.blocked(["li2020/fig2", "notes/convex"], "smoke") == {}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "replicate", "figures", "khanduri2021/fig5"],
                          capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    assert done.returncode == 2 and done.stderr.strip().splitlines() == ["error: " + refused.replace(
        "khanduri2021/fig5, li2020/table2", "khanduri2021/fig5")], done.stderr
    assert not (tmp_path / "build" / "executed").exists() and took < 20, took  # no kernel started
    both = subprocess.run([sys.executable, "-m", "replicate", "figures", "khanduri2021/fig5", "notes/optimal_e"],
                          capture_output=True, text=True, timeout=300)  # a batch: the others run, these are said
    assert both.returncode == 1 and "skipped khanduri2021/fig5: mnist is not available" in both.stderr, both.stderr
    assert "done   notes/optimal_e" in both.stderr
    (tmp_path / "cache" / "to_target").mkdir(parents=True)  # a cached run that read MNIST (its sidecar says so)
    (tmp_path / "cache" / "to_target" / "0123_to_0.5.json").write_text(json.dumps({"dataset": "mnist_stem_high"}))
    assert requirements.blocked(["khanduri2021/fig5"], "smoke") == {}
