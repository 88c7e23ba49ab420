"""Typed values that flow between the stages: Paper -> Passage -> Citation -> Answer."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Paper:
    """One abstract of the corpus.

    `id` is derived from `source` and `ordinal`, so it is stable across rebuilds.
    `abstract` is verbatim; `text` is the same abstract with markup made readable.
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

    @property
    def label(self) -> str:
        """Where the paper is: file name and position, as shown beside citations."""
        return f"{self.source} #{self.ordinal}"


@dataclass(frozen=True)
class Passage:
    """A retrieved paper: its best-matching chunk and the fused retrieval score."""

    paper: Paper
    text: str
    score: float
    dense_score: float = 0.0
    keyword_score: float = 0.0


@dataclass(frozen=True)
class Citation:
    """A paper cited by the answer, with the verbatim sentence(s) of its abstract that support it."""

    marker: int
    paper: Paper
    quote: str
    support: float = 0.0


@dataclass
class Answer:
    """The final, verified answer returned by every interface (Python, CLI, UI, eval)."""

    question: str
    text: str
    citations: list[Citation] = field(default_factory=list)
    refused: bool = False
    passages: list[Passage] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    search_query: str = ""
    retrieval_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
