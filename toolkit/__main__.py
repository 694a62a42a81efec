"""``python -m toolkit`` runs the command line."""

import sys

from toolkit.console import run

sys.exit(run())
