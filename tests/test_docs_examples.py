"""The Python blocks of README.md and docs/api.md run, at a small size, so that they cannot go stale.

Each block runs as written in a fresh namespace, after the substitutions of ``SMALL`` (fewer
rounds); a substitution that no longer finds its text fails, so the sizes cannot drift from the docs
unseen. A block that reads MNIST is skipped, with the reason, where MNIST is not staged.
"""
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/api.md")
# the ten-line example's size for a test: fewer rounds, the same 100 clients (fewer clients would each hold more
# of MNIST, and a round lasts as long as its busiest client's epoch: 20 clients took 2.3x as long)
SMALL = {"rounds=20": "rounds=2"}


def found() -> list[tuple[str, str]]:
    return [(doc, block) for doc in DOCS
            for block in re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), flags=re.S)]


def blocks():
    """Each distinct block once (README shows the ten-line example of docs/api.md, word for word)."""
    seen = set()
    for i, (doc, block) in enumerate(found()):
        if block not in seen:
            seen.add(block)
            yield pytest.param(doc, block, id=f"{doc}-{i}")


def test_the_docs_hold_examples():
    docs = [doc for doc, _ in found()]
    assert docs.count("docs/api.md") >= 2 and "README.md" in docs


@pytest.mark.parametrize("doc, block", list(blocks()))
def test_a_python_block_of_the_docs_runs(doc, block):
    from replicate.data import store

    if "load_dataset(\"mnist\"" in block and not store.is_available("mnist"):
        pytest.skip("MNIST is not staged: run `python -m replicate data fetch mnist`")
    small = block
    if "rp.compare" in block and "load_dataset(\"mnist\"" in block:  # the ten-line example: every size shrinks
        assert all(big in block for big in SMALL), "the ten-line example's sizes changed: update SMALL"
    for big, little in SMALL.items():
        small = small.replace(big, little)
    namespace = {"__name__": f"docs_{Path(doc).stem}"}
    exec(compile(small, doc, "exec"), namespace)  # noqa: S102 - the docs' own code, as a reader runs it
    import matplotlib.pyplot as plt

    plt.close("all")
    if "frame = rp.compare" in block:
        frame = namespace["frame"]
        assert set(frame["run"]) == {"FedAvg", "FedProx, μ = 0.01"} and frame["round"].max() == 2
        assert frame["test_acc"].between(0, 1).all()
