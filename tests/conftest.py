"""Shared fixtures: tiny federated problems, and data-aware skipping of notebooks."""
from __future__ import annotations

import json

import numpy as np
import pytest

from replicate.data.federated import FederatedDataset, Split


def _available(name: str) -> bool:
    from replicate.data import store

    try:
        store.ensure(name)
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    """nbval notebooks that need a dataset are skipped, with the reason, when it is absent."""
    needs_cache = {}
    for item in items:
        path = getattr(item, "fspath", None)
        if path is None or not str(path).endswith(".ipynb"):
            continue
        meta = json.loads(open(path).read()).get("metadata", {}).get("replicate", {})
        for name in meta.get("needs", []):
            if name not in needs_cache:
                needs_cache[name] = _available(name)
            if not needs_cache[name]:
                item.add_marker(pytest.mark.skip(
                    reason=f"{name} is not available: run `python -m replicate data fetch {name}` "
                           "(or set REPLICATE_DATA_FROM to a folder with the files)"))


@pytest.fixture(autouse=True)
def isolated_build(tmp_path, monkeypatch):
    """Every test writes caches and figures into its own temporary folder."""
    monkeypatch.setenv("REPLICATE_BUILD", str(tmp_path / "build"))


def toy_dataset(num_clients=12, features=5, classes=3, seed=0, small_clients=0) -> FederatedDataset:
    """Random unbalanced federated data; ``small_clients`` of them have fewer samples than a batch."""
    rs = np.random.RandomState(seed)
    sizes = rs.randint(20, 60, num_clients)
    sizes[:small_clients] = rs.randint(2, 6, small_clients)
    xs = [rs.randn(n, features).astype(np.float32) for n in sizes]
    ys = [rs.randint(0, classes, n) for n in sizes]
    return FederatedDataset("toy", Split.from_clients(xs, ys), Split.from_clients(xs[:2], ys[:2]), classes)
