"""Li, Huang, Yang, Wang, Zhang (ICLR 2020), "On the Convergence of FedAvg on Non-IID Data".

One module per figure or figure family, each with a frozen config per figure (``smoke()`` /
``for_profile``), a data function returning a tidy frame, a ``plot_*`` function and a
``*_claims`` function. Settings follow ``docs/specs/li2020-fedavg-noniid-and-fedprox.md``
(§1 data, §2.1 training, §3 figures, §4 the quadratic example).

- ``table2``: Table 2, dataset statistics (notebook ``li2020_table2``)
- ``fig2``: Figure 2 and Theorem 5, the quadratic example (``li2020_fig2``)
- ``fig1a``: Figure 1a, impact of E (``li2020_fig1a``)
- ``fig3``: Figure 3a-d, impact of K; Figure 1b = 3c (``li2020_fig3``)
- ``schemes``: Figures 1c/1d and 4, sampling and averaging schemes (``li2020_fig1cd``, ``li2020_fig4``)
- ``common``: what the training figures share (datasets, deviations, batch size, curve measures)
"""
