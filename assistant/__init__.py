"""A reading assistant for research papers: ask questions, get answers that cite their papers."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import offline

offline.configure()  # before llama-index, tiktoken, onnxruntime or gradio are imported

if TYPE_CHECKING:
    from .api import Assistant
    from .config import Settings
    from .errors import AssistantError
    from .topics import TopicGroup
    from .types import Answer, Cell, Citation, Evidence, Paper, Passage, Row, Table

# Imported on first use, so that processes needing one small module (the model server runs
# `python -m assistant.llm.child`) do not load llama-index and chromadb.
_EXPORTS = {
    "Assistant": "api", "Settings": "config", "AssistantError": "errors",
    "Answer": "types", "Citation": "types", "Evidence": "types", "Paper": "types", "Passage": "types",
    "Table": "types", "Row": "types", "Cell": "types", "TopicGroup": "topics",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'assistant' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
