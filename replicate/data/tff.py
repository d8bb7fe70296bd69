"""TensorFlow Federated's Shakespeare (``tff.simulation.datasets.shakespeare``): the data of
Charles & Konečný's Shakespeare experiments and Table 3 (spec Charles §7.1-§7.2; Reddi et al.).

TFF builds it from LEAF: one client per speaking role of a play, 715 clients with 16,068
training and 2,356 test snippets (a snippet is one line of dialogue, possibly several verse
lines). The files are HDF5, ``/examples/<client>/snippets`` holding byte strings; reading
them needs ``h5py``.

The model input follows the convention of Reddi et al.'s code, which the paper reuses (facts
read there, no code copied): a vocabulary of 86 characters plus pad (0), out-of-vocabulary,
beginning- and end-of-snippet tokens, 90 in all; each snippet becomes
``[BOS] + characters + [EOS]``, padded with PAD to a multiple of 81 and cut into 81-token
chunks; a chunk's first 80 tokens are the input and its last 80 the next-token targets.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.data import store
from replicate.data.federated import FederatedDataset, Split

# The 86 characters of Reddi et al.'s Shakespeare vocabulary (their order); ids 1..86
CHARACTERS = "dhlptx@DHLPTX $(,048cgkoswCGKOSW[_#'/37;?bfjnrvzBFJNRVZ\"&*.26:\naeimquyAEIMQUY]!%)-159\r"
PAD, OOV, BOS, EOS = 0, len(CHARACTERS) + 1, len(CHARACTERS) + 2, len(CHARACTERS) + 3
VOCAB_SIZE = len(CHARACTERS) + 4  # 90
SEQUENCE_LENGTH = 80
_IDS = {c: i + 1 for i, c in enumerate(CHARACTERS)}


def read_snippets(path: str | os.PathLike) -> dict[str, list[str]]:
    """``{client: [snippet, ...]}`` of one TFF HDF5 file, clients in the file's order."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is in requirements.txt
        raise ReplicateError("reading TFF's HDF5 files needs h5py: pip install h5py") from None
    try:
        with h5py.File(path, "r") as f:
            return {client: [s.decode("utf-8") for s in group["snippets"][()]]
                    for client, group in f["examples"].items()}
    except (OSError, KeyError) as exc:
        raise ReplicateError(f"{path} is not a TFF Shakespeare file (/examples/<client>/snippets): {exc}") from exc


def chunks(snippet: str) -> np.ndarray:
    """The (m, 81) token chunks of one snippet: BOS, its characters (OOV if unknown), EOS, PAD."""
    ids = [BOS, *(_IDS.get(c, OOV) for c in snippet), EOS]
    width = SEQUENCE_LENGTH + 1
    ids += [PAD] * (-len(ids) % width)
    return np.asarray(ids, dtype=np.int64).reshape(-1, width)


def _split(clients: list[str], snippets: dict[str, list[str]]) -> Split:
    xs, ys = [], []
    for client in clients:
        parts = [chunks(s) for s in snippets[client]]
        tokens = np.concatenate(parts) if parts else np.zeros((0, SEQUENCE_LENGTH + 1), np.int64)
        xs.append(tokens[:, :-1])
        ys.append(tokens[:, 1:])
    return Split.from_arrays(np.concatenate(xs), np.concatenate(ys), [len(x) for x in xs])


@builder("shakespeare_tff", reads=("shakespeare_tff",))
def shakespeare_tff(root: str | None = None, num_clients: int | None = None) -> FederatedDataset:
    """TFF's Shakespeare as 80-token sequences with next-token targets, one client per role.

    ``meta["snippets"]`` keeps the snippet counts Table 3 reports (train and test, per client);
    ``meta["uncounted"]`` the tokens an accuracy leaves out. ``num_clients`` keeps the first roles only
    (smoke runs).
    """
    folder = Path(root) if root is not None else store.ensure("shakespeare_tff")
    train, test = (read_snippets(folder / f"tff/shakespeare_{s}.h5") if (folder / "tff").is_dir()
                   else read_snippets(folder / f"shakespeare_{s}.h5") for s in ("train", "test"))
    clients = [c for c in train if c in test]
    if not clients:
        raise ReplicateError("shakespeare_tff: no client appears in both the train and the test file")
    data = FederatedDataset(
        name="shakespeare_tff", train=_split(clients, train), test=_split(clients, test), num_classes=VOCAB_SIZE,
        meta={"users": tuple(clients), "vocab_size": VOCAB_SIZE, "loss": "token",
              "snippets": {"train": [len(train[c]) for c in clients], "test": [len(test[c]) for c in clients]},
              "train_only_clients": len(set(train) - set(test)), "test_only_clients": len(set(test) - set(train)),
              "paper": "Charles & Konečný 2021, Table 3 (715 clients, 16,068 / 2,356 snippets)",
              "uncounted": (PAD, OOV, BOS, EOS),
              "source": "TFF federated Shakespeare HDF5" + (f" in {root}" if root else " (store: shakespeare_tff)")})
    if num_clients is None:
        return data
    first = data.first(num_clients)
    first.meta["snippets"] = {k: v[:num_clients] for k, v in data.meta["snippets"].items()}
    return first
