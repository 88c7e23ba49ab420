"""The model handle: the language model the settings choose, connected on first use.

Every part that asks the model (the prompter, the judge, the topic lister, the tables, the
labels) holds `handle.get`, so the embedded model starts when the first of them needs it, and
only once: a warm-up thread and a question arriving together wait for the same start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ..config import Settings


class ModelHandle:
    """One language model for one assistant: `get()` connects (or starts it) on first use."""

    def __init__(self, settings: Settings, notify: Callable[[str], None]) -> None:
        self.settings = settings
        self.notify = notify
        self.quiet = False  # a warm-up that asked not to report the loading steps
        self.start_seconds: float | None = None  # how long the last connection took
        self._llm: Any = None
        self._lock = threading.Lock()  # a warm-up thread and a question must not start two servers

    def get(self) -> Any:
        """The connected model; a caller that arrives while another thread starts it waits for that start."""
        if self._llm is None:
            with self._lock:
                if self._llm is None:
                    from .client import connect  # the OpenAI client loads when the model is first asked

                    mark = time.perf_counter()
                    self._llm = connect(self.settings, progress=None if self.quiet else self.notify, notify=self.notify)
                    self.start_seconds = time.perf_counter() - mark
        return self._llm

    @property
    def loaded(self) -> Any:
        """The model if it is already connected, else None (never starts it)."""
        return self._llm

    def close(self) -> None:
        """Stop the local server if this handle started one; the next `get` starts it again."""
        if self._llm is not None:
            self._llm.close()
            self._llm = None
