"""``python -m kvcontract``: the same command line as the ``kvcontract`` script."""

import sys

from kvcontract.cli import main

sys.exit(main())
