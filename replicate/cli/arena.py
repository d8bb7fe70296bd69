"""``python -m replicate arena``: the arena's notebook run as ``figures arena/leaderboard`` runs it, with options
of its own, so that a user's algorithm, model or dataset joins without writing a ``--set`` in JSON:

- ``--algorithm path/to/file.py:ClassName``: the user's registered class (``ArenaConfig.user_algorithm``);
- ``--algorithm NAME`` (repeatable): the arena's entries to run (``ArenaConfig.algorithms``; default every one);
- ``--model path/to/file.py:NAME``: the user's ``torch.nn.Module``, on every dataset (``ArenaConfig.user_model``);
- ``--dataset NAME`` or ``--dataset path/to/file.py:NAME`` (repeatable): the datasets to run, the arena's by name or
  the user's ``FederatedDataset`` (``ArenaConfig.datasets``; default the arena's).

A file's path is made absolute here, because the notebook runs in another folder. Everything else is the
``figures`` command's (``--profile``, ``--set``, ``--time-budget``, ``--executor``, …).
"""
from __future__ import annotations

import json
from pathlib import Path

from replicate.core.errors import ReplicateError

# flag → (the knob a user's file sets, the knob its names pick, what the file names); None: files are names too
FLAGS = {"--algorithm": ("user_algorithm", "algorithms", "ClassName"), "--model": ("user_model", None, "NAME"),
         "--dataset": (None, "datasets", "NAME")}


def figures_argv(argv: list[str]) -> list[str]:
    """``arena [options]`` → ``figures arena/leaderboard [options]`` with every ``--algorithm``, ``--model`` and
    ``--dataset`` turned into the ``--set`` it stands for. Raises ``ReplicateError`` on a flag without a value, two
    user algorithms or models, or a name where only a file is taken."""
    rest, files, names = [], {flag: [] for flag in FLAGS}, {flag: [] for flag in FLAGS}
    args = iter(argv)
    for arg in args:
        flag = next((f for f in FLAGS if arg == f or arg.startswith(f + "=")), None)
        if flag is None:
            rest.append(arg)
            continue
        value = arg.partition("=")[2] if "=" in arg else next(args, None)
        user_knob, names_knob, what = FLAGS[flag]
        if not value:
            raise ReplicateError(f"{flag} takes path/to/file.py:{what}" + (" or a name" if names_knob else "")
                                 + " (python -m replicate arena --help)")
        path, colon, name = value.rpartition(":")
        if colon and path.endswith(".py"):
            (files if user_knob else names)[flag].append(f"{Path(path).expanduser().resolve()}:{name}")
        elif names_knob:
            names[flag].append(value)
        else:
            raise ReplicateError(f"{flag} takes path/to/file.py:{what}, got {value!r}")
    sets = []
    for flag, (user_knob, names_knob, _) in FLAGS.items():
        if user_knob and len(files[flag]) > 1:
            kind = user_knob.partition("_")[2]
            raise ReplicateError(f"the arena takes one user {kind} at a time, got {len(files[flag])}: "
                                 + ", ".join(files[flag]))
        sets += [f"{user_knob}={json.dumps(files[flag][0])}"] if files[flag] else []
        sets += [f"{names_knob}={json.dumps(names[flag])}"] if names[flag] else []
    return ["figures", "arena/leaderboard", *rest, *(x for s in sets for x in ("--set", s))]
