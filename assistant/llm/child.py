"""The local model's server process itself: `llama_cpp.server` with a prompt cache that stays small.

`server.LocalServer` runs `python -m assistant.llm.child <llama_cpp.server arguments>`.
The server's RAM prompt cache keeps the model state after each request, so a request that
shares a prefix with any earlier one (the fixed instruction prefix, a repeated question)
re-reads only the part that differs, not just when it shares it with the request before.

Why this wrapper exists: llama-cpp-python 0.3.x stores, with every cached state, a copy of
the logits of the last 512 prompt positions (~300 MB for Qwen's 151k-token vocabulary) that
the cache's size limit does not count, so memory grew by hundreds of MB per request. With
`logits_all=False` those rows are never read (sampling happens inside llama.cpp), so only
one row is saved and restored, and the cache's limit then bounds its memory.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import llama_cpp
from llama_cpp.server.__main__ import main

_save_state = llama_cpp.Llama.save_state
_load_state = llama_cpp.Llama.load_state


def _one_row_of_logits(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` run while `self.scores` shows one row: `save_state` then copies one row of
    logits instead of up to `n_batch` rows, and `load_state` writes one back instead of
    filling (and so making resident) the whole ~300 MB array. Unused rows are never read."""

    @functools.wraps(method)
    def wrapper(self: llama_cpp.Llama, *args: Any) -> Any:
        if self._logits_all:
            return method(self, *args)
        scores = self.scores
        self.scores = scores[:1]
        try:
            return method(self, *args)
        finally:
            self.scores = scores

    return wrapper


def patch() -> None:
    llama_cpp.Llama.save_state = _one_row_of_logits(_save_state)  # type: ignore[method-assign]
    llama_cpp.Llama.load_state = _one_row_of_logits(_load_state)  # type: ignore[method-assign]


if __name__ == "__main__":
    patch()
    sys.exit(main())
