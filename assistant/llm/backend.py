"""Which language model the settings choose: the one place this precedence is written."""

from __future__ import annotations

from typing import Literal

from ..config import Settings

Backend = Literal["openai", "server", "local"]


def backend_of(settings: Settings) -> Backend:
    """`llm_backend="openai"`: OpenAI, or an OpenAI-style proxy at `llm_base_url` (key required);
    else `llm_backend="server"` or `llm_base_url` set: any compatible server; else the embedded model."""
    if settings.llm_backend == "openai":
        return "openai"
    if settings.llm_backend == "server" or settings.llm_base_url:
        return "server"
    return "local"


def openai_model(settings: Settings) -> str:
    """The model asked of OpenAI: the setting, or gpt-4o-mini while it is the local default."""
    return "gpt-4o-mini" if settings.llm_model == "local" else settings.llm_model
