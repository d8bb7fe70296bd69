"""Charles & Konečný 2021 (AISTATS, arXiv 2103.05032), "Convergence and Accuracy Trade-Offs
in Federated Learning and Meta-Learning": the quadratic-theory Figures 1-5 and 7-10,
Tables 1-2, and ``fig_measured``, an overlay of the analytic frontier with points measured
by running LocalUpdate (not in the paper); the neural experiments of Appendices E-F on FEMNIST
(Figures 6/11, 12, 13) and their datasets (Table 3).

Each figure key has a frozen config with ``smoke`` and ``paper`` profiles
(``Fig1Config.for_profile(profile)``), a data function returning a tidy frame with one row
per plotted point (facet ``panel``, curve ``series``, x = ``rho``, y = ``eps``), a claims
function and a plot function. The maths lives in :mod:`replicate.theory`. The paper's
numerical settings (μ, L, K, γ, α, d, grids) are lost from the text we have, so every
default here is PROPOSED (spec §6) and listed in the config's ``deviations``.

- ``frontiers``: Figures 1-4, analytic frontiers (notebooks ``charles2021_fig1`` .. ``charles2021_fig4``)
- ``simulated``: Figures 5, 7, 8 and 10, frontiers simulated on a random quadratic
  (``charles2021_fig5``, ``_fig7``, ``_fig8``, ``_fig10``)
- ``fig9``: Figure 9, guaranteed MAML frontiers for several α (``charles2021_fig9``)
- ``tables``: Tables 1 and 2, checked by running LocalUpdate (``charles2021_table1_2``)
- ``measured``: ``fig_measured``, the new measured overlay (``charles2021_fig_measured``)
- ``neural``: Figures 12-13, FEMNIST γ sweeps at a fixed or tuned η (``charles2021_fig12``, ``_fig13``)
- ``tuned``: Figure 6 (= 11), FEMNIST server momentum and α with tuned rates (``charles2021_fig6``)
- ``table3``: Table 3, the experiments' datasets beside ours (``charles2021_table3``)
- ``common``: the profile base class, frontier helpers, ``run_local_update`` and ``plot_frontiers``
"""
