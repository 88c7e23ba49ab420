"""Typed values that flow between the stages: Paper -> Passage -> Citation -> Answer."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal


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
    separate spans. `quote` is their text, joined with " … " where there are several.
    """

    marker: int
    paper: Paper
    quote: str
    support: float = 0.0
    spans: tuple[Span, ...] = ()


Status = Literal["answered", "not_in_abstracts", "llm_failed", "retrieval_only"]


@dataclass
class Answer:
    """The final, verified answer returned by every interface (Python, CLI, UI, eval).

    `status` says what happened: "answered"; "not_in_abstracts" (the abstracts do not give the
    answer: the text says so, and for a near miss what the closest abstract does say, cited);
    "llm_failed" (the model could not answer: the passages are the retrieved papers);
    "retrieval_only" (papers were asked for without an answer). `refused` is True exactly for
    "not_in_abstracts" and `retrieval_only` for "llm_failed" and "retrieval_only".
    `intent` is what the question was read as asking ("fact", "which_paper", "topic", "comparison");
    `confidence` how closely the best evidence sentence matches the question (the figure the
    decision thresholds act on).
    """

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
    status: Status = "answered"
    intent: str = ""
    confidence: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
