"""``python -m cvdiag``: the same as the ``cvdiag`` command."""

import sys

from .cli import main

sys.exit(main())
