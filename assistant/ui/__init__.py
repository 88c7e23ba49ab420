"""Chat UI: a Gradio app over the `Assistant` (`assistant serve`).

The UI is an edge, like the CLI: it turns questions into `Assistant.stream` / `retrieve` calls and
renders the resulting `Answer`, `Passage` and `Paper` values; it never touches the vector store or
the LLM client itself. Answers stream as draft tokens and are then replaced by the verified text,
whose [n] markers link to source cards showing the supporting sentence highlighted inside the
paper's (cleaned) abstract.

  * `render` — pure HTML from typed values (every corpus or model text escaped);
  * `session` — a conversation as typed turns holding `Answer`s (never HTML to parse back);
  * `status` — the model line, from measured state and settings;
  * `controller` — the handlers, testable without a browser;
  * `app` — the Gradio layout and events, and `serve`.
"""

from .app import app_title, auth_for, build_app, collection_name, examples_for, launch_options, serve
from .controller import ChatController
from .render import (
    chat_messages,
    citation_card,
    empty_sources,
    esc,
    job_status,
    locate_quote,
    panel_at,
    render_answer,
    render_draft,
    render_error,
    render_evidence,
    render_paper_list,
    render_ranked,
    render_sources,
)
from .session import Session, Turn
from .status import StatusBoard, backend_label, model_status, runs_offline

__all__ = [
    "ChatController", "Session", "chat_messages", "panel_at", "StatusBoard", "Turn", "app_title", "auth_for", "backend_label", "build_app",
    "citation_card", "collection_name", "empty_sources", "esc", "examples_for", "job_status",
    "launch_options", "locate_quote", "model_status", "render_answer", "render_draft", "render_error",
    "render_evidence", "render_paper_list", "render_ranked", "render_sources", "runs_offline", "serve",
]
