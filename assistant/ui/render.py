"""Pure rendering: HTML from our own typed values (`Answer`, `Citation`, `Passage`, `Paper`, `Turn`).

Nothing here holds state or calls the assistant. Every piece of text that comes from the corpus
or the model is HTML-escaped before it is placed into HTML.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Any

from ..text import MARKER, clean_markup, marker_numbers, shorten, split_sentences
from ..types import Answer, Citation, Evidence, Paper, Passage
from .session import Session, Turn

SNIPPET_CHARS = 300  # the best-matching passage shown on a ranked card
THINKING = '<span class="thinking" title="Waiting for the answer"><i></i><i></i><i></i></span>'
_WORD = re.compile(r"\S+")


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
        f'<span class="src-title">{esc(paper.shown)}</span></div>'
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
        snippet = esc(shorten(passage.text, SNIPPET_CHARS))
    score = (
        f' · <span class="src-score" title="fused retrieval score">score {passage.score:.2f}</span>' if show_score else ""
    )
    return (
        f'<article class="src-card src-ranked" id="{card_id(turn, rank)}">'
        f'<div class="src-head"><span class="cite-badge rank-badge">{rank}</span>'
        f'<span class="src-title">{esc(paper.shown)}</span></div>'
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
    question = f'<span class="src-question">“{esc(shorten(answer.question, 90))}”</span>'
    if answer.citations:
        cards = [citation_card(c, turn) for c in sorted(answer.citations, key=lambda c: c.marker)]
        return _panel("Sources", f"Cited in the answer to {question}", cards)
    if answer.status == "out_of_scope":
        return _panel("Sources", f"Nothing in the collection is about {question}.", [])
    passages = answer.passages[:3] if answer.refused else answer.passages
    if not passages:
        return _panel("Sources", f"No papers matched {question}.", [])
    cards = [passage_card(p, i, turn) for i, p in enumerate(passages, start=1)]
    if answer.refused:
        return _panel("Closest papers", f"Not an answer: the abstracts nearest to {question}.", cards)
    if answer.llm_failed:
        return _panel("Most relevant papers", "The language model could not answer; ranked by retrieval.", cards)
    return _panel("Ranked papers", f"Retrieval only (no language model) for {question}.", cards)


def render_evidence(evidence: Evidence, turn: int = 1) -> str:
    """The source panel while the answer is being written: the papers being read, each showing its
    sentence closest to the question (replaced by the cited sources when the answer is done)."""
    question = f'<span class="src-question">“{esc(shorten(evidence.question, 90))}”</span>'
    cards = [
        passage_card(dataclasses.replace(passage, text=sentence) if sentence else passage, rank, turn, show_score=False)
        for rank, (passage, sentence) in enumerate(zip(evidence.passages, evidence.sentences), start=1)
    ]
    if not cards:
        return _panel("Sources", f"No papers matched {question}.", [])
    found = f"found in {evidence.seconds:.2f} s"
    return _panel("Reading", f"The papers the answer to {question} is being read from ({found}).", cards)


def link_markers(escaped: str, turn: int, known: set[int]) -> str:
    """Turn [n] / [n, m] markers of already-escaped text into badges linking to their cards."""

    def badge(match: re.Match[str]) -> str:
        numbers = marker_numbers(match.group(1))
        parts = []
        for n in numbers:
            if n in known:
                parts.append(f'<a class="cite" href="#{card_id(turn, n)}" title="Source {n}">{n}</a>')
            else:
                parts.append(f'<span class="cite cite-missing">{n}</span>')
        return "".join(parts)

    return MARKER.sub(badge, escaped)


def render_answer(answer: Answer, turn: int = 1) -> str:
    """The chat message for a final answer: escaped text, [n] badges, notices, flagged sentences."""
    known = {c.marker for c in answer.citations}
    body = link_markers(esc(answer.text), turn, known)
    parts = [body]
    if answer.status == "not_in_abstracts" and answer.passages and not answer.citations:
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
        f'<li><a class="cite" href="#{card_id(turn, i)}">{i}</a> {esc(p.paper.shown)} '
        f'<span class="msg-dim">{esc(p.paper.label)}</span></li>'
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


def filter_papers(papers: list[Paper], query: str) -> list[Paper]:
    words = [w.lower() for w in _WORD.findall(query or "")]
    if not words:
        return list(papers)
    keep = []
    for paper in papers:
        hay = f"{paper.shown} {paper.title} {paper.text} {paper.authors} {paper.label}".lower()
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
        title_spans = _merge([s for w in words for s in _all_spans(paper.shown, w)])
        rows.append(
            f'<details class="paper-row"><summary><span class="paper-title">{highlight(paper.shown, title_spans)}</span>'
            f'<span class="paper-where">{esc(paper.label)}</span></summary>'
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


def job_status(text: str, kind: str = "info") -> str:
    return f'<div class="job-status job-{kind}">{esc(text)}</div>' if text else '<div class="job-status"></div>'


def render_turn(turn: Turn, number: int) -> str:
    """The chat message of one turn, from what the turn holds (never from earlier HTML)."""
    if turn.answer is not None:
        if turn.answer.status == "retrieval_only":
            return render_ranked(turn.answer.passages, number)
        return render_answer(turn.answer, number)
    if turn.error:
        return render_error(turn.error)
    if turn.stopped:
        if turn.draft.strip():
            note = "Stopped before the answer was complete; this draft was not verified."
            return f'{esc(turn.draft.strip())}\n\n<div class="msg-note">{note}</div>'
        return '<div class="msg-note">Stopped before an answer was written.</div>'
    if turn.draft:
        return render_draft(turn.draft)
    return THINKING


def render_panel(turn: Turn, number: int) -> str | None:
    """The source panel of a finished turn (None while it has no answer)."""
    return render_sources(turn.answer, number) if turn.answer is not None else None


def chat_messages(session: Session) -> list[dict[str, Any]]:
    """The chat as Gradio messages, rendered from the session's turns."""
    out: list[dict[str, Any]] = []
    for number, turn in enumerate(session.turns, start=1):
        out += [
            {"role": "user", "content": esc(turn.question)},
            {"role": "assistant", "content": render_turn(turn, number)},
        ]
    return out


def panel_at(session: Session, message_index: int) -> str | None:
    """The source panel of the answer shown at chat position `message_index` (None: none there)."""
    number = message_index // 2 + 1
    if message_index < 0 or number > len(session.turns):
        return None
    return render_panel(session.turns[number - 1], number)
