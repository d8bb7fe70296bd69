"""The arena: every registered algorithm on the same datasets, at one budget, tuned by one protocol.

``entries``: the competitors, their search ranges and what a round of each costs; ``board``: the config, the
tuning and the leaderboard. Run it with ``python -m replicate arena`` or notebooks/arena_leaderboard.ipynb.
"""
from replicate.experiments.arena.board import ArenaConfig, arena, claims, leaderboard, plot_arena, tables

__all__ = ["ArenaConfig", "arena", "claims", "leaderboard", "plot_arena", "tables"]
