"""What the page says about the model and the collection, from measured state and settings only.

The model line shows the real state (not started / ready, with the load time as measured),
says "offline" only when nothing leaves the machine, and names the collection that is loaded.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..config import Settings, is_loopback
from ..llm import backend_of, openai_model
from .render import esc


@dataclass
class StatusBoard:
    """The latest progress message of the assistant (model assembly and loading), shared by sessions."""

    message: str = ""
    at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def post(self, message: str) -> None:
        with self._lock:
            self.message, self.at = message, time.monotonic()


def runs_offline(settings: Settings) -> bool:
    """True when neither the model, the embeddings nor the store are reached over the network."""
    backend = backend_of(settings)
    if backend == "openai" or settings.embedding.startswith("openai:"):
        return False
    if backend == "server" and not is_loopback(urlparse(settings.llm_base_url or "").hostname):
        return False
    return settings.chroma_host is None or is_loopback(settings.chroma_host)


def backend_label(settings: Settings) -> str:
    backend = backend_of(settings)
    if backend == "openai":
        return f"{openai_model(settings)} (OpenAI)"
    if backend == "server":
        return f"{settings.llm_model} at {settings.llm_base_url}"
    if settings.gguf_path is not None:
        return f"{Path(settings.gguf_path).stem} (local)"
    from ..llm import PACKAGED_MODEL_NAME

    return f"{PACKAGED_MODEL_NAME} (local)"


def model_status(assistant: Any, settings: Settings) -> str:
    """The model line: which model, its state as measured, the collection, and "offline" when true."""
    llm = assistant.llm_loaded
    state_now = assistant.model_state
    if state_now == "loading":
        name, state, css = backend_label(settings), "loading…", "loading"
    elif state_now == "failed":
        name, css = backend_label(settings), "failed"
        state = f"could not start ({assistant.warm_error}); the next question tries again"
    elif llm is not None:
        loaded = assistant.timings.get("llm_start")
        state = f"ready (loaded in {loaded:.1f} s)" if loaded is not None else "ready"
        done, total = assistant.read_ahead_progress
        if assistant.reading_ahead and done < total:
            state += f" · reading papers ahead when idle: {done}/{total}"
        name, css = getattr(llm, "name", backend_label(settings)), "ok"
    elif backend_of(settings) == "local":
        name, state, css = backend_label(settings), "starts on the first question", "idle"
    else:
        name, state, css = backend_label(settings), "connects on the first question", "idle"
    offline = " · offline" if runs_offline(settings) else ""
    return (
        f'<div class="model-status"><span class="dot dot-{css}"></span>'
        f'<span class="model-name">{esc(name)}</span>'
        f'<span class="model-corpus"><span class="model-state model-{css}">{esc(state)}</span> · '
        f"{len(assistant.papers)} abstracts indexed{offline}</span></div>"
    )
