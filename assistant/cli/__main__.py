"""`python -m assistant.cli ...` is the `assistant` command."""

import sys

from . import main

sys.exit(main())
