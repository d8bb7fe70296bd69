"""replicate: notebook-first, reproducible replications of federated-optimization papers.

Layers, with imports pointing one way: ``data`` → ``models`` → ``problems`` →
``algorithms`` → ``engine`` → ``experiments`` → notebooks; ``plotting``, ``claims``
and ``report`` read results. Importing the package loads no data and no torchvision.
"""

__version__ = "0.1.0"

from replicate.core.errors import report_in_notebooks

report_in_notebooks()  # a ReplicateError in a notebook cell reads as one line
