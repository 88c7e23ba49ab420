"""`python -m eval.bench` (from the checkout root) runs the benchmark."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
