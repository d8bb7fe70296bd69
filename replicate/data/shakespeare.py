"""Shakespeare next-character prediction, as LEAF builds it and FedProx samples it.

FedProx draft §5.1, App. C.1, Table 1 (143 devices, 517,706 samples, mean 3,620, std
4,115); final README 143 / 517,106 / 3,616 / 6,808. Spec
``docs/specs/li2020-fedavg-noniid-and-fedprox.md`` §1(c). The source is The Complete Works,
Project Gutenberg etext #100 (January 1994), the file FedProx's ``get_data.sh`` fetches.

The pipeline, paraphrased from LEAF/FedProx ``preprocess_shakespeare.py`` and
``shake_utils.py``:

1. :func:`parse_plays`. Drop the file's first line. Start 5 lines before the second
   "by William Shakespeare", which skips the contents and the sonnets. Each later
   "by William Shakespeare" opens a play, titled by the first non-blank line 2–7 lines
   above it. A speech starts at ``"  NAME. text"`` (2 spaces) and continues on lines
   indented by 4. The Comedy of Errors is not indented, so it gets its own patterns and a
   ``<`` line ends a speech. Names are upper-cased. Parsing stops after LEAF's fixed line
   124,195. Plays with fewer than two roles are dropped.
2. :func:`role_texts`. A client is a (play, role). Roles with at most 2 speech lines are
   skipped. A role's lines are joined with newlines, newlines become spaces, and runs of
   2+ spaces collapse to one.
3. :func:`windows`. Every 80-character window gives a sample whose target is the next
   character (stride 1; ``len − 80`` samples). Characters are indexed in
   :data:`ALL_LETTERS`.
4. FedProx's ``-s niid --sf 0.2 -k 0 -t sample``: :func:`~replicate.data.leaf.niid_sample`
   with fraction 0.2, keep users with more than ``min_samples`` = 0 samples, then
   :func:`~replicate.data.leaf.split_by_sample` with 0.8. The documented ``-tf 0.8`` is not
   parsed, so the script's default 0.8 applies anyway.

Because windows overlap, a by-sample split puts test windows next to training windows of
the same text. LEAF and FedProx do the same.
"""
from __future__ import annotations

import collections
import gzip
import os
import re
from pathlib import Path

import numpy as np

from replicate.data.registry import builder
from replicate.core.errors import ReplicateError
from replicate.data import store
from replicate.core.checks import check_seed
from replicate.data.federated import FederatedDataset, Split
from replicate.data.leaf import sample_and_split

# LEAF models/utils/language_utils.py ALL_LETTERS, identical in FedProx utils/language_utils.py:
# newline, space, punctuation, digits, upper and lower case: 80 characters.
ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
SEQUENCE_LENGTH = 80
LAST_PLAY_LINE = 124195  # LEAF's end of the plays (in lines after the first); A Lover's Complaint follows

_CHARACTER = re.compile(r"^  ([a-zA-Z][a-zA-Z ]*)\. (.*)")
_CONTINUATION = re.compile(r"^    (.*)")
_COE_CHARACTER = re.compile(r"^([a-zA-Z][a-zA-Z ]*)\. (.*)")
_COE_CONTINUATION = re.compile(r"^(.*)")
_AUTHOR = "by William Shakespeare"


def parse_plays(text: str) -> list[tuple[str, dict[str, list[str]]]]:
    """``[(title, {ROLE: [speech lines]})]`` in file order, as LEAF's ``_split_into_plays``."""
    lines = text.splitlines(True)[1:]
    authors = [i for i, line in enumerate(lines) if _AUTHOR in line]
    start = authors[1] - 5 if len(authors) > 1 else 0
    plays, roles, current, comedy_of_errors = [], {}, None, False
    for i in range(start, min(len(lines), LAST_PLAY_LINE + 1)):
        line = lines[i]
        if _AUTHOR in line:
            above = [lines[k].strip() for k in range(i - 2, i - 8, -1) if k >= start]
            title = next((t for t in above if t), "")
            if not title:
                raise ReplicateError(f"line {i + 2}: no play title in the 7 lines above {_AUTHOR!r}")
            current, roles = None, collections.defaultdict(list)
            comedy_of_errors = title == "THE COMEDY OF ERRORS"
            plays.append((title, roles))
            continue
        if not plays:
            continue
        match = (_COE_CHARACTER if comedy_of_errors else _CHARACTER).match(line)
        if match:
            name = match.group(1).upper()
            # "ACT I." lines look like speakers in the unindented Comedy of Errors.
            current = None if comedy_of_errors and name.startswith("ACT ") else name
            if current:
                roles[current].append(match.group(2))
            continue
        if current:
            match = (_COE_CONTINUATION if comedy_of_errors else _CONTINUATION).match(line)
            if match and comedy_of_errors and match.group(1).startswith("<"):
                current = None  # the licence block between scenes
            elif match:
                roles[current].append(match.group(1))
    return [(title, dict(roles)) for title, roles in plays if len(roles) > 1]


def client_name(play: str, role: str) -> str:
    """LEAF's user id: ``play_role`` with every run of non-word characters replaced by ``_``."""
    return re.sub(r"\W+", "_", f"{play}_{role}".replace(" ", "_"))


def role_texts(plays) -> dict[str, str]:
    """``{client: text}`` for roles with more than 2 lines. Clients whose LEAF ids collide
    are merged, as LEAF's per-id files merge them."""
    lines: dict[str, list[str]] = collections.defaultdict(list)
    for play, roles in plays:
        for role, speech in roles.items():
            if len(speech) > 2:
                lines[client_name(play, role)].extend(speech)
    # LEAF writes one line per speech line, then reads the file back with newlines as spaces.
    return {user: re.sub(r"  +", " ", " ".join(s) + " ") for user, s in lines.items()}


def encode(text: str) -> np.ndarray:
    """Indices into :data:`ALL_LETTERS` (uint8). An unknown character is an error, where
    LEAF's ``find`` would return −1."""
    table = np.full(256, 255, dtype=np.uint8)
    table[np.frombuffer(ALL_LETTERS.encode("ascii"), np.uint8)] = np.arange(len(ALL_LETTERS))
    raw = np.frombuffer(text.encode("utf-8"), np.uint8)
    codes = table[raw]
    if len(raw) != len(text) or (codes == 255).any():
        unknown = sorted(set(text) - set(ALL_LETTERS))
        raise ReplicateError(f"characters outside LEAF's 80-character vocabulary: {unknown!r} "
                             f"(the 1994 etext #100 has none; is this another edition?)")
    return codes


def windows(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``(len − 80, 80)`` and next-character targets ``(len − 80,)``, both int64."""
    n = max(len(codes) - SEQUENCE_LENGTH, 0)
    if n == 0:
        return np.zeros((0, SEQUENCE_LENGTH), np.int64), np.zeros(0, np.int64)
    x = np.lib.stride_tricks.sliding_window_view(codes[:-1], SEQUENCE_LENGTH)[:n]
    return x.astype(np.int64), codes[SEQUENCE_LENGTH:].astype(np.int64)


def read_text(path: str | os.PathLike | None = None) -> str:
    """The etext from ``path`` (plain or ``.gz``), by default the store's verified copy."""
    path = Path(path) if path is not None else store.ensure("shakespeare") / "t8.shakespeare.txt"
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise ReplicateError(f"{path}: cannot read the Shakespeare text ({exc})") from None


def shakespeare_clients(text: str) -> dict[str, np.ndarray]:
    """Every client's character codes (LEAF ``all_data``: clients with at least one window)."""
    codes = {user: encode(t) for user, t in role_texts(parse_plays(text)).items()}
    return {user: c for user, c in codes.items() if len(c) > SEQUENCE_LENGTH}


@builder("shakespeare", reads=("shakespeare",))
def shakespeare(fraction: float = 0.2, min_samples: int = 0, train_fraction: float = 0.8,
                seed: int = 0, path: str | None = None, num_clients: int | None = None) -> FederatedDataset:
    """FedProx Shakespeare: one device per (play, role). Inputs are (n, 80) int64 character
    indices and targets (n,) int64 over 80 classes.

    The parameters are those of FedProx's command: ``fraction`` = ``--sf`` (LEAF non-IID
    sampling), ``min_samples`` = ``-k`` (keep users with *more* samples) and
    ``train_fraction`` = the by-sample split. ``seed`` drives every draw through
    :func:`~replicate.data.leaf.data_generator`. The reference draws are unseeded.

    The full parse gives 1,130 clients with 4,226,206 samples, mean 3,740 and std 6,210.
    LEAF reports 1,129 / 4,226,158. Statistics count train + test (devices / samples /
    mean / std). Seed 0 gives 210 / 845,241 / 4,025 / 7,236. Over seeds 0..199 the number
    of devices has median 226 and ranges 165..280, and the std has median 6,130. Table 1
    lists 143 / 517,706 / 3,620 / 4,115, about 12% of the data, which the published
    ``--sf 0.2`` does not explain. ``fraction≈0.13`` gives about 143 devices. ``num_clients``
    keeps the first devices only (smoke runs).
    """
    check_seed(seed)
    if not isinstance(min_samples, int) or min_samples < 0:
        raise ReplicateError(f"min_samples must be an integer >= 0, got {min_samples!r}")
    if not 0 < train_fraction < 1:
        raise ReplicateError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    clients = shakespeare_clients(read_text(path))
    users = list(clients)
    parts: tuple[list, list, list, list] = ([], [], [], [])
    kept = []
    for k, n, rows in sample_and_split([len(clients[u]) - SEQUENCE_LENGTH for u in users], fraction, min_samples,
                                       train_fraction, seed, "shakespeare"):
        x, y = windows(clients[users[k]][:n + SEQUENCE_LENGTH])
        kept.append(users[k])
        for i, idx in enumerate(rows):
            parts[2 * i].append(x[idx])
            parts[2 * i + 1].append(y[idx])
    if not kept:
        raise ReplicateError("shakespeare: no client is left after sampling; raise fraction or lower min_samples")
    data = FederatedDataset(
        name="shakespeare",
        train=_int_split(parts[0], parts[1]),
        test=_int_split(parts[2], parts[3]),
        num_classes=len(ALL_LETTERS),
        meta={
            "paper": "FedProx draft §5.1, App. C.1, Table 1 (Shakespeare)",
            "procedure": "LEAF preprocess_shakespeare.py + shake_utils.py; FedProx -s niid --sf "
                         f"{fraction} -k {min_samples} -t sample (train {train_fraction})",
            "source": "Project Gutenberg etext #100 (1994), t8.shakespeare.txt",
            "vocabulary": ALL_LETTERS,
            "users": tuple(kept),
            "all_clients": len(users),
            "seeds": {"sample": seed, "split": seed},
            "deviations": ["LEAF's unseeded sampling and split draws are seeded here"],
        },
    )
    return data if num_clients is None else data.first(num_clients)


def _int_split(xs: list[np.ndarray], ys: list[np.ndarray]) -> Split:
    # Split.from_clients casts inputs to float32; character indices stay int64.
    return Split.from_arrays(np.concatenate(xs), np.concatenate(ys), [len(y) for y in ys])
