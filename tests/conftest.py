"""Shared fixtures: tiny federated problems, and data-aware skipping of notebooks."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from replicate.data.federated import FederatedDataset, Split


def pytest_addoption(parser):
    parser.addoption("--notebooks-on-official-data", action="store_true",
                     help="skip the notebooks of tests/substituted.py: the official-data end-to-end test runs them "
                          "(`make test` runs each notebook once)")


def pytest_collection_modifyitems(config, items):
    """nbval notebooks are skipped, with the reason, exactly when a dataset they read at the profile of
    their parameters cell is absent (``replicate.experiments.requirements``), or, with
    ``--notebooks-on-official-data``, when the official-data end-to-end test runs them (tests/substituted.py)."""
    from tests import substituted

    later = config.getoption("--notebooks-on-official-data")
    reasons = {}  # nbval makes an item per cell: one decision per notebook
    for item in items:
        path = str(getattr(item, "fspath", ""))
        if not path.endswith(".ipynb"):
            continue
        item.add_marker(pytest.mark.smoke)  # the notebook tier (`make test-unit` leaves it out)
        if path not in reasons:
            import papermill  # here, not above: a GPU machine without papermill still runs the tests

            from replicate.experiments import requirements

            meta = json.loads(open(path).read()).get("metadata", {}).get("replicate", {})
            profile = json.loads(papermill.inspect_notebook(path)["profile"]["default"])
            key = f"{meta['paper']}/{meta['figure']}"
            reasons[path] = ("runs on fabricated official downloads in tests/test_official_data_e2e.py instead"
                             if later and key in substituted.FIGURES else requirements.skip_reason(key, profile))
        if reasons[path]:
            item.add_marker(pytest.mark.skip(reason=reasons[path]))


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    """Every test writes caches, figures and ledger into its own temporary folder, and its runs compute on the CPU
    on every machine: the suite's promises are the CPU's (bitwise batching, the committed CPU numbers), and
    on a machine with CUDA the runs would otherwise go there (seen on an H100). What CUDA computes is
    checked by tests/test_cuda.py, which names its device; a test may still set REPLICATE_DEVICE itself."""
    from replicate.core import settings

    for name in ("setenv", "delenv"):  # a test's change of the environment stands for another process's: the
        change = getattr(monkeypatch, name)  # settings are read again from it at their next use, as a new one would

        def changed(*args, _change=change, **kwargs):
            _change(*args, **kwargs)
            settings.forget()
        setattr(monkeypatch, name, changed)
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("REPLICATE_LEDGER", str(tmp_path / "ledger"))  # the committed ledger only where a test says
    monkeypatch.setenv("REPLICATE_DEVICE", "cpu")
    # and no scope of an earlier test's: a test that interrupts a batch (its budget's Ctrl-C may land while a
    # `settings.use` block unwinds) could otherwise leave that test's folders in place for the next ones
    scope = settings._scope.set(None)
    yield
    settings._scope.reset(scope)
    settings.forget()


# The build folder the suite was started with (`make test`: build/test, where the notebooks run), read before
# ``isolated_build`` points each test at its own.
SUITE_BUILD = os.environ.get("REPLICATE_BUILD")


@pytest.fixture
def notebooks_build(monkeypatch):
    """For a test that computes what a notebook of the suite computes too (a smoke profile's runs): the suite's
    own build folder where there is one, so the notebook reads those runs instead of computing them again."""
    if SUITE_BUILD:
        monkeypatch.setenv("REPLICATE_BUILD", SUITE_BUILD)


def toy_dataset(num_clients=12, features=5, classes=3, seed=0, small_clients=0) -> FederatedDataset:
    """Random unbalanced federated data; ``small_clients`` of them have fewer samples than a batch."""
    rs = np.random.RandomState(seed)
    sizes = rs.randint(20, 60, num_clients)
    sizes[:small_clients] = rs.randint(2, 6, small_clients)
    xs = [rs.randn(n, features).astype(np.float32) for n in sizes]
    ys = [rs.randint(0, classes, n) for n in sizes]
    return FederatedDataset("toy", Split.from_clients(xs, ys), Split.from_clients(xs[:2], ys[:2]), classes)
