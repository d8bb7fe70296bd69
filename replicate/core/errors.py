"""One exception type for every user-facing mistake, so messages stay actionable."""
import sys


class ReplicateError(Exception):
    """Bad input or missing data; the message says what to do about it."""


def _one_line(shell, etype, value, tb, tb_offset=None) -> list[str]:
    """IPython's report of a ``ReplicateError`` raised in a cell: its message alone. The traceback
    through the library says nothing the message does not, and papermill copies whatever the kernel
    reports into its own error (a refused ``out_dir`` was 30 lines of it)."""
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)  # IPython leaves the showing to the handler; ipykernel's sends it
    return stb


def report_in_notebooks() -> None:
    """In a notebook kernel, show a ``ReplicateError`` as its one line (``_one_line``); elsewhere nothing.
    Called when the package is imported: IPython is only looked up, never imported."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and ReplicateError not in getattr(shell, "custom_exceptions", ()):
        shell.set_custom_exc((ReplicateError,), _one_line)
