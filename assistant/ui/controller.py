"""The chat's handlers as plain functions of (inputs) -> outputs, testable without a browser.

They turn questions into `Assistant.stream` / `retrieve` calls and record what came back in the
session as typed values (`Session`, `Turn`, `Answer`); the chat and the source panels are
rendered from those. They never touch the vector store or the LLM client themselves.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import AssistantError
from ..types import Answer, Evidence
from .render import chat_messages, empty_sources, job_status, panel_at, render_evidence, render_sources
from .session import Session, Turn
from .status import StatusBoard

if TYPE_CHECKING:
    import gradio as gr

    from ..api import Assistant
else:

    class _Gradio:
        """`gradio`, imported on first use: rendering and the session must not cost its import time."""

        def __getattr__(self, name: str) -> Any:
            import gradio

            return getattr(gradio, name)

    gr = _Gradio()

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # how often the status line refreshes while waiting for the model
QUEUED = "Queued — the local model answers one question at a time."


def _pump(events: Iterator[Any], poll: float) -> Iterator[tuple[str, Any]]:
    """Run `events` in a worker thread; yield ("item", x) as they arrive and ("tick", None) while waiting."""
    inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()

    def work() -> None:
        try:
            for item in events:
                inbox.put(("item", item))
                if stop.is_set():
                    break
            inbox.put(("done", None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            inbox.put(("error", exc))
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - closing an abandoned stream is best effort
                    pass

    threading.Thread(target=work, name="answer-stream", daemon=True).start()
    try:
        while True:
            try:
                kind, value = inbox.get(timeout=poll)
            except queue.Empty:
                yield "tick", None
                continue
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield "item", value
    finally:
        stop.set()


class ChatController:
    """The UI's handlers. Handlers that stream yield tuples `(chat_messages, sources_html, status_html,
    session)`, where an element may be `gr.skip()` (unchanged)."""

    def __init__(self, assistant: Assistant, settings: Settings, board: StatusBoard | None = None) -> None:
        self.assistant = assistant
        self.settings = settings
        self.board = board or StatusBoard()
        self._jobs = 0
        self._jobs_lock = threading.Lock()

    # step 1: instant, not queued
    def submit(self, question: str, session: Session | None, retrieval_only: bool) -> tuple[Any, ...]:
        """Show the question at once and hand it to the LLM or the retrieval handler."""
        session = session or Session()
        question = (question or "").strip()
        if not question:
            gr.Warning("Type a question about the papers first.")
            return gr.skip(), gr.skip(), gr.skip(), session, gr.skip(), gr.skip()
        if session.pending:
            gr.Warning("Still answering the previous question: wait for it, or press Stop.")
            return gr.skip(), gr.skip(), gr.skip(), session, gr.skip(), gr.skip()
        with self._jobs_lock:
            self._jobs += 1
            job = {"id": self._jobs, "question": question}
        session.ask(question)
        if retrieval_only:
            return "", chat_messages(session), job_status("Searching the papers…"), session, gr.skip(), job
        return "", chat_messages(session), job_status(QUEUED, "queued"), session, job, gr.skip()

    @staticmethod
    def _current(session: Session, question: str) -> Turn:
        """The turn a job answers: the pending last one (a fresh one when called on its own)."""
        if session.turns and session.turns[-1].pending and session.turns[-1].question == question:
            return session.turns[-1]
        return session.ask(question)

    # step 2a: the language model (one at a time)
    def answer(
        self, job: dict[str, Any] | None, session: Session | None, k: int, source: str | None
    ) -> Iterator[tuple[Any, ...]]:
        session = session or Session()
        if not job or not job.get("question"):
            return
        question = job["question"]
        turn = self._current(session, question)
        number = len(session.turns)
        history = Session(session.turns[:-1]).history()
        started = time.monotonic()
        state = self.assistant.model_state
        first = {
            "idle": "Starting the language model (first question only)…",
            "loading": "Searching the papers (the language model is still loading)…",
        }.get(state, "Searching the papers…")
        yield gr.skip(), gr.skip(), job_status(first, "busy"), session
        final: Answer | None = None
        try:
            events = self.assistant.events(question, history=history, k=int(k), source=source or None)
            for kind, event in _pump(events, POLL_SECONDS):
                elapsed = time.monotonic() - started
                if kind == "tick":
                    if turn.draft:
                        yield gr.skip(), gr.skip(), job_status(f"Writing… {elapsed:.0f} s", "busy"), session
                        continue
                    if self.assistant.llm_loaded is None and self.board.message:
                        text = f"{self.board.message} ({elapsed:.0f} s)"
                    else:
                        text = f"Reading the abstracts and drafting an answer… {elapsed:.0f} s"
                    yield gr.skip(), gr.skip(), job_status(text, "busy"), session
                elif isinstance(event, Evidence):
                    # What is being read, on screen before the model's first word.
                    text = f"Reading {len(event.passages)} papers… {elapsed:.0f} s"
                    yield gr.skip(), render_evidence(event, number), job_status(text, "busy"), session
                elif isinstance(event, Answer):
                    final = event
                else:
                    first_words = not turn.draft
                    turn.draft += str(event)
                    status = job_status(f"Writing… {elapsed:.0f} s", "busy") if first_words else gr.skip()
                    yield chat_messages(session), gr.skip(), status, session
        except AssistantError as exc:
            turn.error = str(exc)
            gr.Warning(str(exc))
            yield chat_messages(session), gr.skip(), job_status(f"Error: {exc}", "error"), session
            return
        except Exception as exc:  # noqa: BLE001 - shown as a message, logged with its traceback
            log.exception("Unexpected error while answering %r", question)
            turn.error = f"Unexpected error: {type(exc).__name__}: {exc}"
            yield chat_messages(session), gr.skip(), job_status(turn.error, "error"), session
            return
        if final is None:  # the stream ended without an answer (should not happen)
            turn.error = "The assistant returned no answer."
            yield chat_messages(session), gr.skip(), job_status("No answer.", "error"), session
            return
        turn.answer = final
        panel = render_sources(final, number)
        yield chat_messages(session), panel, job_status(self._summary(final, time.monotonic() - started), "done"), session

    @staticmethod
    def _summary(answer: Answer, seconds: float) -> str:
        first = answer.timings.get("first_token")
        timing = f"{seconds:.1f} s" + (f" (first words after {first:.1f} s)" if first else "")
        if answer.status == "out_of_scope":
            return f"Not about this collection · {timing}"
        if answer.refused:
            return f"No answer in these abstracts · {timing}"
        if answer.llm_failed:
            return f"Language model unavailable: showing retrieval results · {timing}"
        n = len(answer.citations)
        return f"Answered in {timing} · {n} source{'s' if n != 1 else ''} verified"

    # step 2b: retrieval only (fast, several at a time)
    def retrieve(
        self, job: dict[str, Any] | None, session: Session | None, k: int, source: str | None
    ) -> tuple[Any, ...]:
        session = session or Session()
        if not job or not job.get("question"):
            return gr.skip(), gr.skip(), gr.skip(), session
        question = job["question"]
        turn = self._current(session, question)
        started = time.monotonic()
        try:
            passages = self.assistant.retrieve(question, k=int(k), source=source or None)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a readable message
            if not isinstance(exc, AssistantError):
                log.exception("Unexpected error while ranking papers for %r", question)
            turn.error = str(exc) if isinstance(exc, AssistantError) else f"Unexpected error: {type(exc).__name__}: {exc}"
            gr.Warning(turn.error)
            return chat_messages(session), gr.skip(), job_status(f"Error: {turn.error}", "error"), session
        turn.answer = Answer(question=question, text="", status="retrieval_only", passages=passages)
        panel = render_sources(turn.answer, len(session.turns))
        seconds = time.monotonic() - started
        status = job_status(f"{len(passages)} papers ranked in {seconds:.2f} s (no language model)", "done")
        return chat_messages(session), panel, status, session

    def stop(self, session: Session | None) -> tuple[Any, ...]:
        """After cancelling: close the unfinished answer (its draft is kept, marked unverified)."""
        session = session or Session()
        if not session.pending:
            return gr.skip(), gr.skip(), session
        session.turns[-1].stopped = True
        return chat_messages(session), job_status("Stopped.", "info"), session

    def clear(self) -> tuple[Any, ...]:
        """A new conversation (the job states keep their last value: no handler is triggered)."""
        return [], empty_sources(), job_status(""), Session()

    def select(self, session: Session | None, evt: gr.SelectData) -> Any:
        """Clicking an earlier answer shows its sources again."""
        session = session or Session()
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if not isinstance(index, int):
            return gr.skip()
        panel = panel_at(session, index)
        return gr.skip() if panel is None else panel

    def ask_api(self, question: str) -> dict[str, Any]:
        """Answer `question` about the papers: the whole `Answer` as JSON (`Answer.to_json`)."""
        try:
            answer = self.assistant.ask(question)
        except AssistantError as exc:
            raise gr.Error(str(exc)) from exc
        return answer.to_json()
