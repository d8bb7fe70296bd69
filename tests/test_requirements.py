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
