"""Khanduri et al. 2021 (NeurIPS, arXiv 2106.10435), "STEM: A Stochastic Two-Sided Momentum
Algorithm Achieving Near-Optimal Sample and Communication Complexities for Federated Learning".

The seed text lost every formula; the spec (``docs/specs/khanduri2021-stem.md``)
RECONSTRUCTS the bounds, the trade-off curves and Table 1's cells, and PROPOSES the settings the
text does not give. The maths lives in :mod:`replicate.theory.stem`.

- ``tradeoff``: Figure 1, the analytic (b, I) trade-off surface and curve (``khanduri2021_fig1``)
- ``measured``: Figure 1 measured (beyond the paper): STEM run to a target for (b, I) pairs on and off
  the trade-off curve (``khanduri2021_fig1_measured``)
- ``table1``: Table 1, sample and communication complexities, with this work's rows re-derived
  from the reconstructed bounds (``khanduri2021_table1``)
- ``samples``: Figure 5, STEM vs FedAvg vs SCAFFOLD on MNIST against the samples accessed per
  worker, a small and a large I (``khanduri2021_fig5``)
- ``cifar``: Figures 2-4, the same comparison on CIFAR-10 against rounds (``khanduri2021_fig2``, ``_fig3``,
  ``_fig4``)
- ``common``: what the measured figures share (run configs, tuning, the final runs)
"""
