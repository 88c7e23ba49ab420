"""Performance benchmark of the reading assistant: embedding, indexing, retrieval, Chroma server, LLM, memory.

Run from the checkout root:

    .venv/bin/python -m eval.bench                # full run: 10,000 synthetic abstracts
    .venv/bin/python -m eval.bench --quick        # 1,000 synthetic abstracts, to check the set-up
    .venv/bin/python -m eval.bench --skip-llm --skip-server

Prints a report and writes it as JSON to eval/reports/bench-<timestamp>.json. Everything it
builds lives in one temporary folder that is removed at the end; every server it starts is
stopped by pid (also on Ctrl-C). The machine is usually shared, so read ratios measured
within one run (retrieve/bare, indexing/embedding) rather than absolute figures across runs.

The package imports the assistant's stages here, before any of its modules, and times it: the
machine section reports how long importing the assistant takes.
"""

from __future__ import annotations

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_T_IMPORT = time.perf_counter()
import assistant  # noqa: E402,F401  (sets the offline environment before the heavy imports)
import numpy  # noqa: E402,F401
import assistant.api  # noqa: E402,F401
import assistant.chunk  # noqa: E402,F401
import assistant.config  # noqa: E402,F401
import assistant.embed  # noqa: E402,F401
import assistant.index  # noqa: E402,F401
import assistant.load  # noqa: E402,F401
import assistant.retrieve  # noqa: E402,F401
import assistant.store  # noqa: E402,F401
import assistant.table  # noqa: E402,F401
import assistant.text  # noqa: E402,F401
import assistant.types  # noqa: E402,F401

IMPORT_SECONDS = time.perf_counter() - _T_IMPORT
