"""Typed values that flow between the stages: Paper -> Passage -> Citation -> Answer (and, for a
question asked across papers, Row -> Cell -> Table)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .text import clean_markup


@dataclass(frozen=True)
class Paper:
    """One abstract of the corpus.

    `id` is derived from `source` and `ordinal`, so it is stable across rebuilds.
    `abstract` is verbatim; `text` is the same abstract with markup made readable.
    `title` is derived from the abstract by rule (`load.derive_title`) and is what prompts, name
    matching and the index use; `display` is the name the model wrote for it once checked
    (`labels`), shown to a reader in its place (`shown`, `called`).
    """

    id: str
    source: str
    ordinal: int
    title: str
    abstract: str
    text: str
    authors: str = ""
    url: str = ""
    venue: str = ""
    display: str = ""

    @property
    def shown(self) -> str:
        """The paper's name as a reader sees it: "SDG: Stein Diffusion Guidance", else the derived title."""
        return self.display or self.title

    @property
    def called(self) -> str:
        """The paper's name inside a sentence ("The SDG abstract says ..."): the short name of `shown`."""
        return self.display.split(": ", 1)[0] if self.display else self.title

    @property
    def label(self) -> str:
        """Where the paper is: file name and position, as shown beside citations."""
        return f"{self.source} #{self.ordinal}"

    def to_json(self) -> dict[str, Any]:
        """The paper without its abstract (`id` is the key every interface uses)."""
        return {"id": self.id, "title": self.shown, "label": self.label, "source": self.source,
                "ordinal": self.ordinal, "authors": self.authors, "url": self.url}


@dataclass(frozen=True)
class Passage:
    """A retrieved paper: its best-matching chunk and the fused retrieval score."""

    paper: Paper
    text: str
    score: float
    dense_score: float = 0.0
    keyword_score: float = 0.0


@dataclass(frozen=True)
class Span:
    """A contiguous passage of an abstract: sentences `first`..`last` (0-based, inclusive), which
    are `paper.abstract[start:end]` verbatim (`text`)."""

    first: int
    last: int
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Citation:
    """A paper cited by the answer, with the verbatim passage(s) of its abstract that support it.

    `spans` are contiguous passages of `paper.abstract`; sentences that are not adjacent are
    separate spans. `quote` is their text, joined with " … " where there are several. `support`
    is how strongly that evidence matched what it backs: the similarity of its best sentence to the
    answer sentence (or to the question, for a sentence the answer quotes itself), with a bonus for
    the names and numbers they share.
    """

    marker: int
    paper: Paper
    quote: str
    support: float = 0.0
    spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Evidence:
    """What an answer is being read from, sent by `Assistant.events` before the model's first token
    (twice for a Chinese question that names a paper: the papers it names at once, then all of them).

    `passages` are the retrieved papers, best first; `sentences[i]` is the sentence of
    `passages[i]`'s abstract closest to the question ("" for a paper whose sentences were not
    weighed, e.g. when no model is asked); `seconds` is the time from the question to this event.
    """

    question: str
    search_query: str
    passages: tuple[Passage, ...]
    sentences: tuple[str, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "search_query": self.search_query,
            "papers": [
                {"paper": p.paper.to_json(), "score": round(p.score, 4), "sentence": clean_markup(s)}
                for p, s in zip(self.passages, self.sentences)
            ],
            "seconds": round(self.seconds, 4),
        }


Status = Literal["answered", "not_in_abstracts", "out_of_scope", "llm_failed", "retrieval_only"]


@dataclass
class Answer:
    """The final, verified answer returned by every interface (Python, CLI, UI, eval).

    `status` is the one outcome field:
      * "answered" — the text answers the question; every claim cites its paper;
      * "not_in_abstracts" — the abstracts do not give the answer: the text says so and, for a
        near miss, what the closest abstract does say, cited;
      * "out_of_scope" — the question is not about the collection (general knowledge, how-to,
        chit-chat): the text says so and cites nothing;
      * "llm_failed" — the model could not answer: `passages` are the retrieved papers and a
        notice says what happened;
      * "retrieval_only" — papers were asked for without an answer (a deliberate search).
    `refused`, `llm_failed` and `retrieval_only` are read from it. `intent` is the kind of question
    (`kinds.KINDS`: "fact", "which_paper", "topic", "comparison", "yes_no", "summary", "out_of_scope");
    `confidence` how likely the judge found it that the evidence answers (the figure its threshold acts on);
    `supported_share` the share of the answer's sentences the verifier found supported (None
    when no answer was verified); `prompt_tokens` the size of the prompt sent to the model for
    the answer (tiktoken's count, within a few percent of the model's own; 0 when none was sent).
    `timings` are seconds per stage: condense, retrieve (with its parts query_embedding, dense,
    keyword, fuse), decide, first_token, generate, total. `related` (topic lists only) are the papers
    possibly related to the topic, less likely than the listed ones, each with its closest sentence:
    shown apart, never counted as cited.
    """

    question: str
    text: str
    status: Status = "answered"
    citations: list[Citation] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    search_query: str = ""
    intent: str = ""
    confidence: float = 0.0
    supported_share: float | None = None
    prompt_tokens: int = 0
    related: list[Citation] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """The abstracts do not answer the question (and the text says so)."""
        return self.status in ("not_in_abstracts", "out_of_scope")

    @property
    def llm_failed(self) -> bool:
        return self.status == "llm_failed"

    @property
    def retrieval_only(self) -> bool:
        """Only the retrieved papers, no answer: by choice, or because the model failed."""
        return self.status in ("llm_failed", "retrieval_only")

    def to_json(self) -> dict[str, Any]:
        """The answer as JSON-ready data: the one shape of the CLI's --json, the UI's /ask and the eval.

        Papers appear without their abstracts (their `id` names them); a citation's `quote` reads as
        displayed (markup cleaned: 1.25×, not 1.25$\\times$) while its `spans` stay verbatim, since
        their offsets point into the abstract as written.
        """
        return {
            "question": self.question,
            "status": self.status,
            "refused": self.refused,
            "text": self.text,
            "intent": self.intent,
            "confidence": round(self.confidence, 4),
            "supported_share": self.supported_share,
            "search_query": self.search_query,
            "prompt_tokens": self.prompt_tokens,
            "citations": [_citation_json(c) for c in sorted(self.citations, key=lambda c: c.marker)],
            "passages": [
                {"paper": p.paper.to_json(), "score": round(p.score, 4), "dense_score": round(p.dense_score, 4),
                 "keyword_score": round(p.keyword_score, 4), "text": p.text}
                for p in self.passages
            ],
            "flagged": list(self.flagged),
            "notices": list(self.notices),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "related": [_citation_json(c) for c in self.related],
        }


CellStatus = Literal["stated", "not_stated", "failed"]
NOT_STATED = "not stated in the abstract"


@dataclass(frozen=True)
class Row:
    """A paper chosen as a row of a `Table`; for a topic table, `reason` cites the sentence of its
    abstract that puts it on the topic (None when the paper was picked by hand)."""

    paper: Paper
    reason: Citation | None = None
    score: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"paper": self.paper.to_json(), "score": round(self.score, 4),
                "reason": _citation_json(self.reason) if self.reason else None}


@dataclass(frozen=True)
class Cell:
    """One paper's answer to one column question.

    `status` is "stated" (`text` is a short answer and `citation` holds the verbatim, contiguous
    passage(s) of the abstract it comes from), "not_stated" (the abstract does not say: `text` is
    `NOT_STATED`, no citation) or "failed" (the model could not answer: `note` says why).
    `row` and `column` are the cell's position in its `Table`.
    """

    row: int
    column: int
    paper: Paper
    question: str
    text: str
    status: CellStatus
    citation: Citation | None = None
    note: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "column": self.column, "paper": self.paper.id, "question": self.question,
                "status": self.status, "text": self.text,
                "citation": _citation_json(self.citation) if self.citation else None,
                "note": self.note, "seconds": round(self.seconds, 3)}


@dataclass
class Table:
    """One question (a column) asked of many papers (the rows): `cells[r][c]` answers column c for row r.

    `topic` is the topic the rows were chosen by ("" when they were given); `related` the papers
    possibly related to it, not made rows (each with the sentence closest to the topic); `timings`
    are seconds (rows, first_cell, total)."""

    columns: list[str]
    rows: list[Row]
    cells: list[list[Cell]]
    topic: str = ""
    notices: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    related: list[Row] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "columns": list(self.columns),
            "rows": [row.to_json() for row in self.rows],
            "cells": [[cell.to_json() for cell in line] for line in self.cells],
            "notices": list(self.notices),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "related": [row.to_json() for row in self.related],
        }


def _citation_json(citation: Citation) -> dict[str, Any]:
    """A citation as JSON: the quote as displayed (markup cleaned), the spans verbatim."""
    return {"marker": citation.marker, "paper": citation.paper.to_json(), "quote": clean_markup(citation.quote),
            "support": round(citation.support, 4), "spans": [asdict(span) for span in citation.spans]}
