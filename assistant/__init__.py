"""A reading assistant for research papers: ask questions, get answers that cite their papers."""

from . import offline

offline.configure()  # before llama-index, tiktoken, onnxruntime or gradio are imported

from .api import Assistant  # noqa: E402
from .config import Settings  # noqa: E402
from .errors import AssistantError  # noqa: E402
from .types import Answer, Citation, Paper, Passage  # noqa: E402

__all__ = ["Assistant", "Settings", "AssistantError", "Answer", "Citation", "Paper", "Passage"]
