"""Cheng's lecture notes "Convergence of FL" (2024, seed 003): its theorems evaluated on measured runs.

The notes have no figures; their items are Theorem 1 (eq. 3, Li et al. 2020's convex bound with
γ = max{5κ, E}), Li et al.'s choice of E (eq. 8, which the notes cite) and the notes' own
non-convex Theorem 2 (eqs. 5 and 14). The constants come from ``replicate.theory.constants``,
the bounds from ``replicate.theory.bounds``.

- ``convex``: Theorems 1-3 of Li et al. and the notes' Theorem 1 vs measured FedAvg gaps (``notes_convex``)
- ``optimal_e``: eq. (8)'s optimal E vs the rounds-to-target minimum of Li et al. Figure 1a (``notes_optimal_e``)
- ``nonconvex``: the notes' eq. (14) on a one-hidden-layer MLP, E = 1 and E > 1 (``notes_nonconvex``)
- ``common``: cached constants, the run probe, Hessian power iteration, slope fits
"""
