"""``python -m replicate``: the command line (see ``replicate.cli.main``)."""
import sys

from replicate.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
