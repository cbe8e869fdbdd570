"""``python -m mainspring``: the ``mainspring`` command."""

import sys

from .cli import main

sys.exit(main())
