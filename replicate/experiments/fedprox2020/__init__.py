"""FedProx (Li, Sahu, Zaheer, Sanjabi, Talwalkar, Smith): the ICML-2019 draft's experiments
(§5, App. C: Table 1, Figures 1–7) and the final MLSys paper's straggler grid.

One module per figure family: ``table1``, ``heterogeneity`` (Figures 1 and 5), ``epochs``
(Figures 2 and 6), ``mu`` (Figures 3, 4 and 7) and ``stragglers`` (the final paper's
systems-heterogeneity grid); ``common`` holds the per-dataset settings, deviations, the cached
runs (with the dissimilarity recorded every round), the plots' layout and the curve measures.
"""
