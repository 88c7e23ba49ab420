"""Chat UI: a Gradio app over the `Assistant` (`assistant serve`, or `python -m assistant.ui`).

The UI is an edge, like the CLI: it turns questions into `Assistant.stream` / `retrieve`
calls and renders the resulting `Answer`, `Passage` and `Paper` values; it never touches
the vector store or the LLM client itself. Answers stream as draft tokens and are then
replaced by the verified text, whose [n] markers link to source cards showing the
supporting sentence highlighted inside the paper's (cleaned) abstract.

Every piece of text that comes from the corpus or the model is HTML-escaped before it is
placed into HTML. Each browser session has its own conversation (`gr.State`). The
LLM-backed handlers share one queue slot (the local model answers one question at a time);
retrieval-only searches and the paper browser do not wait for it. `serve` binds to
loopback unless a username and password are configured, never shares, and sends no
analytics; the page loads no external fonts or scripts.
"""

from __future__ import annotations

import argparse
import html
import ipaddress
import logging
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Settings
from .errors import AssistantError
from .text import clean_markup, split_sentences
from .types import Answer, Citation, Paper, Passage

if TYPE_CHECKING:
    import gradio as gr

    from .api import Assistant
else:

    class _Gradio:
        """`gradio`, imported on first use: registering the CLI command must not cost its import time."""

        def __getattr__(self, name: str) -> Any:
            import gradio

            return getattr(gradio, name)

    gr = _Gradio()

log = logging.getLogger(__name__)

TITLE = "ICML 2026 Reading Assistant"
STATIC = Path(__file__).resolve().parent / "static"
LLM_CONCURRENCY = "llm"  # the queue slot shared by every handler that runs the language model
RETRIEVAL_CONCURRENCY = 2
SNIPPET_CHARS = 300  # the best-matching passage shown on a ranked card
POLL_SECONDS = 0.5  # how often the status line refreshes while waiting for the model
QUEUED = "Queued — the local model answers one question at a time."

# Example questions drawn from the corpus: a fact, a "which paper", a paraphrase, Chinese.
EXAMPLES = [
    "How does ViewMask-1-to-3 generate new views of an object?",
    "Which paper studies fairness when several decision makers interact over time?",
    "Is there a way to learn rewards for a robot from coarse good/okay/bad scores given by people?",
    "哪篇论文提出了用于长上下文推理的自推测解码方法？",
]

# System fonts only: nothing is fetched from the internet.
SANS = [
    "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Liberation Sans", "Arial",
    "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", "sans-serif",
]
MONO = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "Liberation Mono", "DejaVu Sans Mono", "monospace"]

THINKING = '<span class="thinking" title="Waiting for the answer"><i></i><i></i><i></i></span>'
_MARKER_RUN = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_WORD = re.compile(r"\S+")


def _static(name: str) -> str:
    path = STATIC / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:  # a packaging problem must not stop the UI; it only looks plainer
        log.warning("UI asset %s is missing; the page will use default styling.", path)
        return ""


def make_theme() -> gr.themes.Base:
    """A quiet theme on system fonts (Gradio's default fonts are files, but we need none)."""
    return gr.themes.Default(
        primary_hue=gr.themes.colors.indigo,
        secondary_hue=gr.themes.colors.slate,
        neutral_hue=gr.themes.colors.slate,
        radius_size=gr.themes.sizes.radius_md,
        font=SANS,
        font_mono=MONO,
    ).set(
        body_background_fill="#f7f8fa",
        block_border_width="1px",
        block_shadow="none",
        button_primary_shadow="none",
    )


def launch_options() -> dict[str, Any]:
    """Look and privacy options for `Blocks.launch` (Gradio 6 takes theme/css/head there)."""
    return {
        "theme": make_theme(),
        "css": _static("ui.css"),
        "head": f"<script>{_static('ui.js')}</script>",
        "footer_links": ["api"],
        "share": False,
        "ssr_mode": False,
        "mcp_server": False,
        "enable_monitoring": False,
        "run_history": False,
    }


# -- rendering (pure functions of our own values) ------------------------------------------


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _find_spans(text: str, pieces: list[str]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    lowered = text.lower()
    for piece in pieces:
        piece = piece.strip()
        if len(piece) < 3:
            continue
        start = text.find(piece)
        if start < 0:
            start = lowered.find(piece.lower())
        if start >= 0:
            spans.append((start, start + len(piece)))
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def locate_quote(paper: Paper, quote: str) -> list[tuple[int, int]]:
    """Where the verbatim `quote` (from `paper.abstract`, with markup) sits in `paper.text`."""
    quote = (quote or "").strip()
    if not quote:
        return []
    spans = _find_spans(paper.text, [clean_markup(quote)])
    if spans:
        return spans
    # Several sentences that are not adjacent, or cleaning that depends on context.
    return _find_spans(paper.text, [clean_markup(s) for s in split_sentences(quote)])


def highlight(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` escaped, with each span wrapped in <mark>."""
    out, at = [], 0
    for start, end in spans:
        out.append(esc(text[at:start]))
        out.append(f"<mark>{esc(text[start:end])}</mark>")
        at = end
    out.append(esc(text[at:]))
    return "".join(out)


def excerpt(text: str, spans: list[tuple[int, int]], mark: bool = True) -> str:
    """The spans alone (escaped, highlighted unless `mark` is False), with ellipses for what is left out."""
    parts = []
    for start, end in spans:
        lead = "… " if start > 0 else ""
        tail = " …" if end < len(text) else ""
        body = f"<mark>{esc(text[start:end])}</mark>" if mark else esc(text[start:end])
        parts.append(f"{lead}{body}{tail}")
    return " ".join(parts)


def card_id(turn: int, marker: int) -> str:
    return f"src-{turn}-{marker}"


def safe_url(url: str) -> str | None:
    """`url` if it is a plain http(s) link (never javascript: or data:)."""
    return url if re.match(r"https?://[^\s\"'<>]+$", url or "") else None


def _meta(paper: Paper, extra: str = "") -> str:
    url = safe_url(paper.url)
    link = f' · <a href="{esc(url)}" target="_blank" rel="noopener noreferrer">link</a>' if url else ""
    authors = f'<div class="src-authors">{esc(paper.authors)}</div>' if paper.authors else ""
    return (
        f'{authors}<div class="src-meta"><span class="src-file">{esc(paper.source)}</span>'
        f' <span class="src-ordinal">#{paper.ordinal}</span>{link}{extra}</div>'
    )


def span_html(citation: Citation) -> tuple[str, str]:
    """(the cited passages, the whole abstract with them highlighted), from the citation's spans:
    the abstract is shown sentence by sentence and the cited sentences are marked, so nothing is
    searched for again."""
    sentences = [clean_markup(s) for s in split_sentences(citation.paper.abstract)]
    marked = {i for span in citation.spans for i in range(span.first, span.last + 1)}
    abstract_html = " ".join(f"<mark>{esc(s)}</mark>" if i in marked else esc(s) for i, s in enumerate(sentences))
    pieces = []
    for span in citation.spans:
        lead = "… " if span.first > 0 else ""
        tail = " …" if span.last < len(sentences) - 1 else ""
        pieces.append(f"{lead}<mark>{esc(' '.join(sentences[span.first: span.last + 1]))}</mark>{tail}")
    return " ".join(pieces), abstract_html


def citation_card(citation: Citation, turn: int) -> str:
    paper = citation.paper
    spans = [] if citation.spans else locate_quote(paper, citation.quote)
    if citation.spans:
        quote_html, abstract_html = span_html(citation)
    elif spans:  # a citation made without spans: place its quote in the abstract
        quote_html = excerpt(paper.text, spans)
        abstract_html = highlight(paper.text, spans)
    else:  # cannot place it: show the quote as given, cleaned
        quote_html = f"<mark>{esc(clean_markup(citation.quote))}</mark>"
        abstract_html = esc(paper.text)
    return (
        f'<article class="src-card" id="{card_id(turn, citation.marker)}">'
        f'<div class="src-head"><span class="cite-badge">{citation.marker}</span>'
        f'<span class="src-title">{esc(paper.title)}</span></div>'
        f"{_meta(paper)}"
        f'<blockquote class="src-quote">{quote_html}</blockquote>'
        f'<details class="src-abstract"><summary>Full abstract</summary><p>{abstract_html}</p></details>'
        "</article>"
    )


def passage_card(passage: Passage, rank: int, turn: int, show_score: bool = True) -> str:
    paper = passage.paper
    spans = _find_spans(paper.text, [passage.text])
    if spans:
        start, end = spans[0]
        if end - start > SNIPPET_CHARS:  # cut at a word boundary
            cut = paper.text.rfind(" ", start, start + SNIPPET_CHARS)
            end = cut if cut > start else start + SNIPPET_CHARS
        snippet = excerpt(paper.text, [(start, end)], mark=False)
    else:
        snippet = esc(_short(passage.text, SNIPPET_CHARS))
    score = (
        f' · <span class="src-score" title="fused retrieval score">score {passage.score:.2f}</span>' if show_score else ""
    )
    return (
        f'<article class="src-card src-ranked" id="{card_id(turn, rank)}">'
        f'<div class="src-head"><span class="cite-badge rank-badge">{rank}</span>'
        f'<span class="src-title">{esc(paper.title)}</span></div>'
        f"{_meta(paper, score)}"
        f'<blockquote class="src-quote src-passage">{snippet}</blockquote>'
        f'<details class="src-abstract"><summary>Full abstract</summary><p>{highlight(paper.text, spans)}</p></details>'
        "</article>"
    )


def _panel(heading: str, note: str, cards: list[str]) -> str:
    note_html = f'<p class="src-note">{note}</p>' if note else ""
    return f'<section class="src-panel"><h3 class="src-heading">{heading}</h3>{note_html}{"".join(cards)}</section>'


def empty_sources() -> str:
    return (
        '<section class="src-panel src-empty"><h3 class="src-heading">Sources</h3>'
        '<p class="src-note">Ask a question: the papers cited in the answer appear here, '
        "each with the sentence of its abstract that supports the claim, highlighted.</p></section>"
    )


def render_sources(answer: Answer, turn: int = 1) -> str:
    """The source panel for one answer: cited papers, or the closest/ranked papers."""
    question = f'<span class="src-question">“{esc(_short(answer.question, 90))}”</span>'
    if answer.citations:
        cards = [citation_card(c, turn) for c in sorted(answer.citations, key=lambda c: c.marker)]
        return _panel("Sources", f"Cited in the answer to {question}", cards)
    passages = answer.passages[:3] if answer.refused else answer.passages
    if not passages:
        return _panel("Sources", f"No papers matched {question}.", [])
    cards = [passage_card(p, i, turn) for i, p in enumerate(passages, start=1)]
    if answer.refused:
        return _panel("Closest papers", f"Not an answer: the abstracts nearest to {question}.", cards)
    if answer.retrieval_only and answer.notices:
        return _panel("Most relevant papers", "The language model could not answer; ranked by retrieval.", cards)
    return _panel("Ranked papers", f"Retrieval only (no language model) for {question}.", cards)


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def link_markers(escaped: str, turn: int, known: set[int]) -> str:
    """Turn [n] / [n, m] markers of already-escaped text into badges linking to their cards."""

    def badge(match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        parts = []
        for n in numbers:
            if n in known:
                parts.append(f'<a class="cite" href="#{card_id(turn, n)}" title="Source {n}">{n}</a>')
            else:
                parts.append(f'<span class="cite cite-missing">{n}</span>')
        return "".join(parts)

    return _MARKER_RUN.sub(badge, escaped)


def render_answer(answer: Answer, turn: int = 1) -> str:
    """The chat message for a final answer: escaped text, [n] badges, notices, flagged sentences."""
    known = {c.marker for c in answer.citations}
    body = link_markers(esc(answer.text), turn, known)
    parts = [body]
    if answer.refused and answer.passages and not answer.citations:
        parts.append('<div class="msg-note">The closest papers are listed beside the chat.</div>')
    for notice in answer.notices:
        parts.append(f'<div class="msg-note">{esc(notice)}</div>')
    if answer.flagged:
        items = "".join(f"<li>{esc(s)}</li>" for s in answer.flagged)
        n = len(answer.flagged)
        parts.append(
            f'<details class="msg-flagged"><summary>{n} sentence{"s" if n != 1 else ""} of the draft could not be '
            f"verified against the abstracts</summary><ul>{items}</ul></details>"
        )
    return "\n\n".join(parts)


def render_ranked(passages: list[Passage], turn: int) -> str:
    """The chat message for a retrieval-only turn."""
    if not passages:
        return "No papers matched."
    rows = "".join(
        f'<li><a class="cite" href="#{card_id(turn, i)}">{i}</a> {esc(p.paper.title)} '
        f'<span class="msg-dim">{esc(p.paper.source)} #{p.paper.ordinal}</span></li>'
        for i, p in enumerate(passages, start=1)
    )
    return (
        '<div class="msg-ranked">The most relevant papers (retrieval only, no language model):'
        f'<ul class="ranked-list">{rows}</ul></div>'
    )


def render_draft(text: str) -> str:
    note = '<div class="msg-note">Drafting — citations are verified when the answer is complete.</div>'
    return f'{esc(text)}<span class="draft-cursor">▍</span>\n\n{note}'


def render_error(message: str) -> str:
    return f'<div class="msg-error"><strong>Could not answer.</strong> {esc(message)}</div>'


def sources_json(answer: Answer) -> list[dict[str, Any]]:
    """The sources as plain data (the `/ask` API): the cited papers with their quotes, or, for a
    refusal or a retrieval-only answer, the closest papers (marker None, quote empty).

    `quote` reads as the chat and the CLI show it (markup cleaned: 1.25×, not 1.25$\\times$);
    `spans` stay verbatim, since their offsets point into the abstract as written."""
    if not answer.citations:
        return [
            {"marker": None, "title": p.paper.title, "source": p.paper.source, "ordinal": p.paper.ordinal, "quote": ""}
            for p in answer.passages[:3]
        ]
    return [
        {"marker": c.marker, "title": c.paper.title, "source": c.paper.source, "ordinal": c.paper.ordinal,
         "quote": clean_markup(c.quote),
         "spans": [{"start": s.start, "end": s.end, "text": s.text} for s in c.spans]}
        for c in sorted(answer.citations, key=lambda c: c.marker)
    ]


def filter_papers(papers: list[Paper], query: str) -> list[Paper]:
    words = [w.lower() for w in _WORD.findall(query or "")]
    if not words:
        return list(papers)
    keep = []
    for paper in papers:
        hay = f"{paper.title} {paper.text} {paper.authors} {paper.source} #{paper.ordinal}".lower()
        if all(w in hay for w in words):
            keep.append(paper)
    return keep


def render_paper_list(papers: list[Paper], query: str = "", total: int | None = None) -> str:
    """The paper browser: one expandable entry per paper, search terms highlighted."""
    shown = filter_papers(papers, query)
    total = len(papers) if total is None else total
    words = [w for w in _WORD.findall(query or "")]
    count = f"{len(shown)} of {total} papers" if words else f"{total} papers"
    rows = []
    for paper in shown:
        spans = _merge([s for w in words for s in _all_spans(paper.text, w)])
        title_spans = _merge([s for w in words for s in _all_spans(paper.title, w)])
        rows.append(
            f'<details class="paper-row"><summary><span class="paper-title">{highlight(paper.title, title_spans)}</span>'
            f'<span class="paper-where">{esc(paper.source)} #{paper.ordinal}</span></summary>'
            f'<div class="paper-body">{_byline(paper)}<p>{highlight(paper.text, spans)}</p></div></details>'
        )
    empty = '<p class="src-note">No paper matches all of these words.</p>' if not shown else ""
    return f'<div class="paper-list"><p class="paper-count">{count}</p>{"".join(rows)}{empty}</div>'


def _byline(paper: Paper) -> str:
    parts = [esc(paper.authors)] if paper.authors else []
    url = safe_url(paper.url)
    if url:
        parts.append(f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer">{esc(url)}</a>')
    return f'<div class="src-authors">{" · ".join(parts)}</div>' if parts else ""


def _all_spans(text: str, word: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(re.escape(word), text, re.IGNORECASE)]


# -- model status ---------------------------------------------------------------------------


@dataclass
class StatusBoard:
    """The latest progress message of the assistant (model assembly and loading), shared by sessions."""

    message: str = ""
    at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def post(self, message: str) -> None:
        with self._lock:
            self.message, self.at = message, time.monotonic()


def llm_loaded(assistant: Any) -> Any:
    """The connected LLM, or None while it has not been started (never starts it)."""
    return assistant.llm_loaded


def backend_label(settings: Settings) -> str:
    if settings.llm_backend == "openai":
        model = "gpt-4o-mini" if settings.llm_model == "local" else settings.llm_model
        return f"{model} (OpenAI)"
    if settings.llm_backend == "server" or settings.llm_base_url:
        return f"{settings.llm_model} at {settings.llm_base_url}"
    if settings.gguf_path is not None:
        return f"{Path(settings.gguf_path).stem} (local)"
    from .llm import PACKAGED_MODEL_NAME

    return f"{PACKAGED_MODEL_NAME} (local)"


def model_status(assistant: Any, settings: Settings) -> str:
    llm = llm_loaded(assistant)
    if llm is not None:
        name, state, css = getattr(llm, "name", backend_label(settings)), "ready", "ok"
    elif settings.llm_backend == "local" and not settings.llm_base_url:
        name, state, css = backend_label(settings), "loads on first question (about 20 s)", "idle"
    else:
        name, state, css = backend_label(settings), "connects on first question", "idle"
    papers = len(getattr(assistant, "papers", []))
    return (
        f'<div class="model-status"><span class="dot dot-{css}"></span>'
        f'<span class="model-name">{esc(name)}</span>'
        f'<span class="model-corpus"><span class="model-state model-{css}">{esc(state)}</span> · '
        f"{papers} abstracts indexed · offline</span></div>"
    )


def job_status(text: str, kind: str = "info") -> str:
    return f'<div class="job-status job-{kind}">{esc(text)}</div>' if text else '<div class="job-status"></div>'


# -- the session and the handlers -------------------------------------------------------------


def new_session() -> dict[str, Any]:
    """One browser session's conversation: what is shown, what the model sees, the source panels."""
    # panels: index of an assistant message in "display" -> the source panel of that answer
    return {"display": [], "history": [], "panels": {}, "turns": 0, "pending": False}


def _plain_history(history: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{"role": str(t["role"]), "content": str(t["content"])} for t in history]


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
    """The UI's handlers as plain functions of (inputs) -> outputs, testable without a browser.

    Handlers that stream yield tuples `(chat_messages, sources_html, status_html, session)`,
    where an element may be `gr.skip()` (unchanged).
    """

    def __init__(self, assistant: Assistant, settings: Settings, board: StatusBoard | None = None) -> None:
        self.assistant = assistant
        self.settings = settings
        self.board = board or StatusBoard()
        self._jobs = 0
        self._jobs_lock = threading.Lock()

    # step 1: instant, not queued
    def submit(self, question: str, session: dict[str, Any] | None, retrieval_only: bool) -> tuple[Any, ...]:
        """Show the question at once and hand it to the LLM or the retrieval handler."""
        session = session or new_session()
        question = (question or "").strip()
        if not question:
            gr.Warning("Type a question about the papers first.")
            return gr.skip(), gr.skip(), gr.skip(), session, gr.skip(), gr.skip()
        if session.get("pending"):
            gr.Warning("Still answering the previous question: wait for it, or press Stop.")
            return gr.skip(), gr.skip(), gr.skip(), session, gr.skip(), gr.skip()
        with self._jobs_lock:
            self._jobs += 1
            job = {"id": self._jobs, "question": question}
        session["pending"] = True
        session["display"] = session["display"] + [
            {"role": "user", "content": esc(question)},
            {"role": "assistant", "content": THINKING},
        ]
        if retrieval_only:
            status = job_status("Searching the papers…")
            return "", session["display"], status, session, gr.skip(), job
        return "", session["display"], job_status(QUEUED, "queued"), session, job, gr.skip()

    def _finish(
        self, session: dict[str, Any], content: str, panel: str | None, history_text: str | None, question: str
    ) -> None:
        session["display"] = session["display"][:-1] + [{"role": "assistant", "content": content}]
        session["pending"] = False
        if panel is not None:  # keyed by message position: error turns have no panel
            session["panels"] = {**session["panels"], len(session["display"]) - 1: panel}
        if history_text is not None:
            session["history"] = session["history"] + [
                {"role": "user", "content": question},
                {"role": "assistant", "content": history_text},
            ]

    def _draft(self, session: dict[str, Any], content: str) -> list[dict[str, Any]]:
        session["display"] = session["display"][:-1] + [{"role": "assistant", "content": content}]
        return session["display"]

    # step 2a: the language model (one at a time)
    def answer(
        self, job: dict[str, Any] | None, session: dict[str, Any] | None, k: int, source: str | None
    ) -> Iterator[tuple[Any, ...]]:
        session = session or new_session()
        if not job or not job.get("question"):
            return
        question = job["question"]
        turn = session["turns"] + 1
        started = time.monotonic()
        loading = llm_loaded(self.assistant) is None
        first = "Starting the language model (first question only)…" if loading else "Searching the papers…"
        yield gr.skip(), gr.skip(), job_status(first, "busy"), session
        draft: list[str] = []
        final: Answer | None = None
        try:
            history = _plain_history(session["history"])
            events = self.assistant.stream(question, history=history, k=int(k), source=source or None)
            for kind, event in _pump(events, POLL_SECONDS):
                elapsed = time.monotonic() - started
                if kind == "tick":
                    if draft:
                        yield gr.skip(), gr.skip(), job_status(f"Writing… {elapsed:.0f} s", "busy"), session
                        continue
                    if llm_loaded(self.assistant) is None and self.board.message:
                        text = f"{self.board.message} ({elapsed:.0f} s)"
                    else:
                        text = f"Reading the abstracts and drafting an answer… {elapsed:.0f} s"
                    yield gr.skip(), gr.skip(), job_status(text, "busy"), session
                elif isinstance(event, Answer):
                    final = event
                else:
                    draft.append(str(event))
                    status = job_status(f"Writing… {elapsed:.0f} s", "busy") if len(draft) == 1 else gr.skip()
                    yield self._draft(session, render_draft("".join(draft))), gr.skip(), status, session
        except AssistantError as exc:
            self._finish(session, render_error(str(exc)), None, None, question)
            gr.Warning(str(exc))
            yield session["display"], gr.skip(), job_status(f"Error: {exc}", "error"), session
            return
        except Exception as exc:  # noqa: BLE001 - shown as a message, logged with its traceback
            log.exception("Unexpected error while answering %r", question)
            message = f"Unexpected error: {type(exc).__name__}: {exc}"
            self._finish(session, render_error(message), None, None, question)
            yield session["display"], gr.skip(), job_status(message, "error"), session
            return
        if final is None:  # the stream ended without an answer (should not happen)
            self._finish(session, render_error("The assistant returned no answer."), None, None, question)
            yield session["display"], gr.skip(), job_status("No answer.", "error"), session
            return
        session["turns"] = turn
        panel = render_sources(final, turn)
        self._finish(session, render_answer(final, turn), panel, final.text, question)
        yield session["display"], panel, job_status(self._summary(final, time.monotonic() - started), "done"), session

    @staticmethod
    def _summary(answer: Answer, seconds: float) -> str:
        first = answer.timings.get("first_token")
        timing = f"{seconds:.1f} s" + (f" (first words after {first:.1f} s)" if first else "")
        if answer.refused:
            return f"No answer in these abstracts · {timing}"
        if answer.retrieval_only:
            return f"Language model unavailable: showing retrieval results · {timing}"
        n = len(answer.citations)
        return f"Answered in {timing} · {n} source{'s' if n != 1 else ''} verified"

    # step 2b: retrieval only (fast, several at a time)
    def retrieve(
        self, job: dict[str, Any] | None, session: dict[str, Any] | None, k: int, source: str | None
    ) -> tuple[Any, ...]:
        session = session or new_session()
        if not job or not job.get("question"):
            return gr.skip(), gr.skip(), gr.skip(), session
        question = job["question"]
        started = time.monotonic()
        try:
            passages = self.assistant.retrieve(question, k=int(k), source=source or None)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a readable message
            if not isinstance(exc, AssistantError):
                log.exception("Unexpected error while ranking papers for %r", question)
            message = str(exc) if isinstance(exc, AssistantError) else f"Unexpected error: {type(exc).__name__}: {exc}"
            self._finish(session, render_error(message), None, None, question)
            gr.Warning(message)
            return session["display"], gr.skip(), job_status(f"Error: {message}", "error"), session
        turn = session["turns"] = session["turns"] + 1
        answer = Answer(question=question, text="", status="retrieval_only", passages=passages)
        panel = render_sources(answer, turn)
        summary = "; ".join(p.paper.title for p in passages[:3])
        self._finish(session, render_ranked(passages, turn), panel, f"Most relevant papers: {summary}", question)
        seconds = time.monotonic() - started
        status = job_status(f"{len(passages)} papers ranked in {seconds:.2f} s (no language model)", "done")
        return session["display"], panel, status, session

    def stop(self, session: dict[str, Any] | None) -> tuple[Any, ...]:
        """After cancelling: close the unfinished answer so a new question can be asked."""
        session = session or new_session()
        if not session.get("pending"):
            return gr.skip(), gr.skip(), session
        display = session["display"]
        if display and display[-1]["role"] == "assistant":
            draft = str(display[-1]["content"]).replace(THINKING, "").replace('<span class="draft-cursor">▍</span>', "")
            draft = draft.split("\n\n<div class=\"msg-note\">Drafting", 1)[0].strip()
            if draft:
                note = "Stopped before the answer was complete; this draft was not verified."
                content = f'{draft}\n\n<div class="msg-note">{note}</div>'
            else:
                content = '<div class="msg-note">Stopped before an answer was written.</div>'
            session["display"] = display[:-1] + [{"role": "assistant", "content": content}]
        session["pending"] = False
        return session["display"], job_status("Stopped.", "info"), session

    def clear(self) -> tuple[Any, ...]:
        """A new conversation (the job states keep their last value: no handler is triggered)."""
        return [], empty_sources(), job_status(""), new_session()

    def select(self, session: dict[str, Any] | None, evt: gr.SelectData) -> Any:
        """Clicking an earlier answer shows its sources again."""
        session = session or new_session()
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if not isinstance(index, int) or index < 0:
            return gr.skip()
        return session["panels"].get(index, gr.skip())

    def ask_api(self, question: str) -> tuple[str, list[dict[str, Any]]]:
        """Answer `question` about the papers: (answer text with [n] markers, cited sources as JSON)."""
        try:
            answer = self.assistant.ask(question)
        except AssistantError as exc:
            raise gr.Error(str(exc)) from exc
        text = " ".join([answer.text, *answer.notices])  # e.g. why only the closest papers came back
        return text, sources_json(answer)


# -- the app ------------------------------------------------------------------------------------


def _header(assistant: Any) -> str:
    n = len(assistant.papers)
    return (
        f'<header class="app-header"><h1>{esc(TITLE)}</h1>'
        f"<p>Ask about {n} ICML 2026 paper abstracts. Every claim in an answer cites its paper, "
        "and each citation shows the sentence that supports it. Runs entirely on this machine.</p></header>"
    )


def build_app(assistant: Assistant, settings: Settings) -> gr.Blocks:
    """The chat UI for `assistant` (launch with `app.launch(**launch_options())`, or use `serve`)."""
    board = StatusBoard()
    previous = assistant.notify

    def notify(message: str) -> None:
        board.post(message)
        previous(message)

    assistant.notify = notify
    controller = ChatController(assistant, settings, board)
    sources = list(assistant.sources)
    papers = list(assistant.papers)

    with gr.Blocks(title=TITLE, analytics_enabled=False) as app:
        app.controller = controller  # type: ignore[attr-defined]  # for tests
        session = gr.State(new_session())
        llm_job = gr.State(None)
        retrieval_job = gr.State(None)
        with gr.Row(elem_id="top-row", equal_height=True):
            gr.HTML(_header(assistant), elem_id="app-header")
            model_line = gr.HTML(model_status(assistant, settings), elem_id="model-line")
        with gr.Tabs(elem_id="tabs"):
            with gr.Tab("Ask", id="ask"):
                with gr.Row(equal_height=False, elem_id="main-row"):
                    with gr.Column(scale=3, min_width=420, elem_id="chat-col"):
                        chatbot = gr.Chatbot(
                            value=[],
                            show_label=False,
                            height="60vh",
                            min_height=340,
                            elem_id="chat",
                            latex_delimiters=[],
                            buttons=["copy"],
                            feedback_options=None,
                            layout="bubble",
                            placeholder=(
                                "<div class='chat-placeholder'><strong>Ask about the papers</strong><br>"
                                "Answers cite their sources as numbered badges; the sentences that support them "
                                "appear on the right. Try one of these:</div>"
                            ),
                            examples=[{"display_text": text, "text": text} for text in EXAMPLES],
                        )
                        with gr.Row(elem_id="ask-row", equal_height=True):
                            question = gr.Textbox(
                                placeholder="Ask a question about the papers…  (Enter to send)",
                                show_label=False,
                                lines=1,
                                max_lines=6,
                                scale=8,
                                autofocus=True,
                                elem_id="question",
                                container=False,
                                submit_btn=False,
                            )
                            send = gr.Button("Ask", variant="primary", scale=0, min_width=80, elem_id="send")
                        with gr.Row(elem_id="status-row", equal_height=True):
                            status = gr.HTML(job_status(""), elem_id="job-status")
                            small = {"size": "sm", "variant": "secondary", "scale": 0}
                            stop = gr.Button("Stop", min_width=60, elem_id="stop", **small)
                            new_chat = gr.Button("New chat", min_width=90, elem_id="new-chat", **small)
                        with gr.Accordion("Search options", open=False, elem_id="options"):
                            with gr.Row():
                                k = gr.Slider(1, 10, value=min(settings.k, 10), step=1, label="Papers retrieved (k)")
                                source = gr.Dropdown(
                                    choices=[("All files", "")] + [(s, s) for s in sources],
                                    value="",
                                    label="Corpus file",
                                )
                            retrieval_only = gr.Checkbox(
                                value=False,
                                label="Retrieval only: rank the papers instantly, without the language model",
                            )
                    with gr.Column(scale=2, min_width=320, elem_id="sources-col"):
                        sources_html = gr.HTML(empty_sources(), elem_id="sources")
            with gr.Tab("Browse papers", id="browse"):
                search = gr.Textbox(
                    placeholder="Filter by words in the title or abstract…",
                    show_label=False,
                    container=False,
                    elem_id="paper-search",
                )
                paper_list = gr.HTML(render_paper_list(papers), elem_id="paper-list")

        chat_outputs = [chatbot, sources_html, status, session]
        submit_outputs = [question, chatbot, status, session, llm_job, retrieval_job]
        submit_inputs = [question, session, retrieval_only]
        hidden = {"queue": False, "api_visibility": "private"}
        # Queued (for its State change to reach the browser) but never waiting: no concurrency limit.
        instant = {"concurrency_limit": None, "show_progress": "hidden", "api_visibility": "private"}
        question.submit(controller.submit, submit_inputs, submit_outputs, **instant)
        send.click(controller.submit, submit_inputs, submit_outputs, **instant)

        def from_example(evt: gr.SelectData, current: dict[str, Any], only: bool) -> tuple[Any, ...]:
            value = evt.value if isinstance(evt.value, dict) else {}
            return controller.submit(str(value.get("text", "")), current, only)

        chatbot.example_select(from_example, [session, retrieval_only], submit_outputs, **instant)
        answering = llm_job.change(
            controller.answer,
            [llm_job, session, k, source],
            chat_outputs,
            concurrency_limit=1,
            concurrency_id=LLM_CONCURRENCY,
            show_progress="minimal",
            show_progress_on=[status],
            api_visibility="private",
        )
        answering.then(lambda: model_status(assistant, settings), None, model_line, show_progress="hidden", **hidden)
        ranking = retrieval_job.change(
            controller.retrieve,
            [retrieval_job, session, k, source],
            chat_outputs,
            concurrency_limit=RETRIEVAL_CONCURRENCY,
            concurrency_id="retrieval",
            show_progress="hidden",
            api_visibility="private",
        )
        stop.click(controller.stop, [session], [chatbot, status, session], cancels=[answering], **hidden)
        cleared = [chatbot, sources_html, status, session]
        new_chat.click(controller.clear, None, cleared, cancels=[answering, ranking], show_progress="hidden", **hidden)
        chatbot.clear(controller.clear, None, cleared, cancels=[answering, ranking], show_progress="hidden", **hidden)
        chatbot.select(controller.select, [session], [sources_html], show_progress="hidden", **hidden)
        search.input(
            lambda q: render_paper_list(papers, q), [search], [paper_list],
            show_progress="hidden", trigger_mode="always_last", **hidden,
        )
        app.load(lambda: model_status(assistant, settings), None, model_line, show_progress="hidden", **hidden)

        def ask(question: str) -> tuple[str, list[dict[str, Any]]]:
            return controller.ask_api(question)

        # Gradio reads the endpoint's types from the signature; this module's annotations are strings.
        ask.__annotations__ = {"question": str, "return": tuple[str, list[dict[str, Any]]]}
        gr.api(
            ask,
            api_name="ask",
            api_description="Answer a question about the papers. Returns the answer text with [n] markers "
            "and the cited sources as a list of {marker, title, source, ordinal, quote, spans}: quote is the cited "
            "passage as displayed (LaTeX and Markdown cleaned); spans are the verbatim passages of the abstract "
            "({start, end, text} in the abstract as written).",
            concurrency_limit=1,
            concurrency_id=LLM_CONCURRENCY,
        )
    app.queue(default_concurrency_limit=1, max_size=64)
    return app


# -- serving ------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def auth_for(host: str, settings: Settings) -> tuple[str, str] | None:
    """The login to require: none on loopback (unless configured), mandatory beyond it."""
    if settings.username and settings.password:
        return settings.username, settings.password
    if is_loopback(host):
        return None
    raise AssistantError(
        f"Refusing to serve the UI on {host}, which is reachable from other machines, without a login. "
        "Set ASSISTANT_USERNAME and ASSISTANT_PASSWORD, or bind to 127.0.0.1."
    )


def serve(settings: Settings | None = None, host: str | None = None, port: int | None = None) -> None:
    """Open the assistant and serve the chat UI until interrupted (http://host:port)."""
    settings = settings or Settings()
    host = host or settings.host
    port = port or settings.port
    auth = auth_for(host, settings)
    from .api import Assistant

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    assistant = Assistant.from_settings(settings, notify=say)
    try:
        app = build_app(assistant, settings)
        say(f"Serving {TITLE} on http://{host}:{port}" + (" (login required)" if auth else ""))
        app.launch(server_name=host, server_port=port, auth=auth, show_error=False, quiet=True, **launch_options())
    finally:
        assistant.close()
