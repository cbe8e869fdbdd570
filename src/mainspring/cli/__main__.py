"""``python -m mainspring.cli``."""

import sys

from . import main

sys.exit(main())
