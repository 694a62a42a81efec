"""``python -m toolkit`` runs the command line."""

import sys

from toolkit.cli import main

sys.exit(main())
