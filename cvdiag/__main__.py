"""``python -m cvdiag``: the same as the ``cvdiag`` command."""

import sys

from cvdiag.face.cli import main

sys.exit(main())
