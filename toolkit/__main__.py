"""``python -m toolkit`` runs the command line."""

import sys

from toolkit.cli import entry

sys.exit(entry())
