"""Loaded before pytest's plugins (``-p tests.imports`` in pyproject's addopts): nbval's plugin imports nbformat,
whose jsonschema would import ``rfc3987_syntax`` and compile its IRI grammars (2 s a pytest process) for formats no
notebook schema uses; the figures command keeps it out the same way (``replicate.cli.runner._papermill``)."""
import sys

sys.modules.setdefault("rfc3987_syntax", None)
