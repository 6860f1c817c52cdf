import sys

from diagbench.refserver.server import main

sys.exit(main())
