"""`python -m irfuse`: the `irfuse` command."""

import sys

from irfuse.tools.cli import main

sys.exit(main())
