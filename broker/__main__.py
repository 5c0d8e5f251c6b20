"""``python -m broker``: the same as the ``broker`` command."""

import sys

from broker.cli import main

sys.exit(main())
