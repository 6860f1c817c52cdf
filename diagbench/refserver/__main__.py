"""`python -m diagbench.refserver`: the reference server."""

import sys

from diagbench.refserver.server import main

__all__: list[str] = []

sys.exit(main())
