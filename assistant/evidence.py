"""Evidence: the sentences of an abstract, embedded once and scored against a question.

Every sentence of a paper the assistant looks at is split (verbatim and cleaned, aligned), embedded
with the question's model once, and kept (`SentenceBank`). A sentence's score against a question is
its cosine similarity plus a share for the content words they have in common; its id
`<paper id>:<sentence index>` is stable across runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .cite import sentence_pairs
from .types import Paper
from .wording import STOPWORDS, stems

Encode = Callable[[list[str]], np.ndarray]

# -- evidence ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredSentence:
    """One sentence of an abstract scored against the question; `id` is stable across runs."""

    id: str
    paper: Paper
    index: int
    raw: str
    clean: str
    score: float


@dataclass
class Sentences:
    """An abstract split into sentences (verbatim and cleaned, aligned), with their vectors."""

    paper: Paper
    raw: list[str]
    clean: list[str]
    vectors: np.ndarray
    stems: list[set[str]] = field(default_factory=list)
    all_stems: set[str] = field(default_factory=set)


class SentenceBank:
    """Sentences of every paper the assistant has looked at, embedded once and kept."""

    def __init__(self, encode: Encode) -> None:
        self.encode = encode
        self._cache: dict[str, Sentences] = {}

    def get(self, paper: Paper) -> Sentences:
        cached = self._cache.get(paper.id)
        if cached is None:
            self.warm([paper])
            cached = self._cache[paper.id]
        return cached

    def warm(self, papers: Sequence[Paper]) -> None:
        """Embed the sentences of the papers not seen yet, in one batch."""
        todo = [p for p in dict.fromkeys(papers) if p.id not in self._cache]
        if not todo:
            return
        pairs = [sentence_pairs(p) for p in todo]
        vectors = self.encode([s for _, clean in pairs for s in clean])
        at = 0
        for paper, (raw, clean) in zip(todo, pairs):
            sentence_stems = [set(stems(s)) for s in clean]
            self._cache[paper.id] = Sentences(
                paper, raw, clean, vectors[at: at + len(clean)], sentence_stems, set().union(*sentence_stems)
            )
            at += len(clean)


LEXICAL_WEIGHT = 0.2  # shared content words add up to this to a sentence's cosine similarity


def score_sentences(sentences: Sentences, query_vector: np.ndarray, question_stems: set[str]) -> list[ScoredSentence]:
    """Every sentence of one abstract as evidence: embedding similarity plus shared content words."""
    similarity = sentences.vectors @ query_vector
    out = []
    for i, (raw, clean) in enumerate(zip(sentences.raw, sentences.clean)):
        overlap = len(question_stems & sentences.stems[i]) / len(question_stems) if question_stems else 0.0
        out.append(ScoredSentence(f"{sentences.paper.id}:{i}", sentences.paper, i, raw, clean,
                            round(float(similarity[i]) + LEXICAL_WEIGHT * overlap, 4)))
    return out



def question_phrases(question: str) -> list[str]:
    """The question's content phrases: runs of words between stop words and punctuation
    ("automatic speech recognition", "legal documents", "several chatbots talk")."""
    phrases: list[str] = []
    current: list[str] = []
    for token in [*re.findall(r"[\w'-]+|[^\w\s]", question), "."]:
        if token.lower() in STOPWORDS or not re.match(r"\w", token):
            if current:
                phrases.append(" ".join(current))
            current = []
        else:
            current.append(token)
    return [p for p in phrases if len(p) > 2]


def spoken_to(phrase_vectors: np.ndarray, sentences: Sentences) -> float:
    """How clearly an abstract says the question's best-covered phrase (cosine of the closest
    phrase-sentence pair): an abstract near a question about something else says none of it."""
    if not len(phrase_vectors) or not len(sentences.vectors):
        return 0.0
    return float((np.asarray(phrase_vectors) @ np.asarray(sentences.vectors).T).max())


def strongest(evidence: Sequence[ScoredSentence], n: int) -> list[ScoredSentence]:
    """The n best sentences, best first."""
    return sorted(evidence, key=lambda e: -e.score)[:n]

