"""`python -m assistant ...` is the `assistant` command."""

import sys

from .cli import main

sys.exit(main())
