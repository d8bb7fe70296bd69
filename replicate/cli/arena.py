"""``python -m replicate arena``: the arena's notebook run as ``figures arena/leaderboard`` runs it, with one
option of its own, ``--algorithm``, so that a user's algorithm joins without writing a ``--set`` in JSON:

- ``--algorithm path/to/file.py:ClassName``: the user's registered class (``ArenaConfig.user_algorithm``; the
  path is made absolute here, because the notebook runs in another folder);
- ``--algorithm NAME`` (repeatable): the arena's entries to run (``ArenaConfig.algorithms``; default every one).

Everything else is the ``figures`` command's (``--profile``, ``--set``, ``--time-budget``, ``--executor``, …).
"""
from __future__ import annotations

import json
from pathlib import Path

from replicate.core.errors import ReplicateError

FLAG = "--algorithm"


def figures_argv(argv: list[str]) -> list[str]:
    """``arena [options]`` → ``figures arena/leaderboard [options]`` with every ``--algorithm`` turned into the
    ``--set`` it stands for. Raises ``ReplicateError`` on a flag without a value or two user files."""
    rest, files, names = [], [], []
    args = iter(argv)
    for arg in args:
        if arg == FLAG or arg.startswith(FLAG + "="):
            value = arg.partition("=")[2] if "=" in arg else next(args, None)
            if not value:
                raise ReplicateError(f"{FLAG} takes path/to/file.py:ClassName or an entry's name "
                                     "(python -m replicate arena --help)")
            path, colon, cls = value.rpartition(":")
            if colon and path.endswith(".py"):
                files.append(f"{Path(path).expanduser().resolve()}:{cls}")
            else:
                names.append(value)
        else:
            rest.append(arg)
    if len(files) > 1:
        raise ReplicateError(f"the arena takes one user algorithm at a time, got {len(files)}: {', '.join(files)}")
    sets = ([f"user_algorithm={json.dumps(files[0])}"] if files else []) + (
        [f"algorithms={json.dumps(names)}"] if names else [])
    return ["figures", "arena/leaderboard", *rest, *(x for s in sets for x in ("--set", s))]
