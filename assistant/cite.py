"""Verify citations: check every answer sentence against the abstracts it cites.

A small local model cites wrongly or not at all in a fair share of answers, so the
application, not the model, is responsible for citations (the ALCE / RAGFlow idea:
match answer sentences to source sentences after generation). For each sentence:
out-of-range markers are dropped; support is measured against every sentence of each
source abstract (embedding similarity plus exact overlap of numbers and named terms);
a citation that does not support the sentence moves to the source that does, or is
removed and the sentence flagged; numbers found in no retrieved abstract make the
sentence unsupported. Every citation carries a verbatim sentence of its abstract.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .text import SPACED_MARKER, clean_markup, has_cjk, marker_numbers, split_sentences
from .types import Citation, Paper, Span

Encode = Callable[[list[str]], np.ndarray]

# ASCII-only boundaries: in Chinese text a number or name sits right next to other letters.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d+(?:[.,]\d+)*)(\s?%|[KMBkmb×x](?![A-Za-z])|×)?")
_TERM = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z][A-Za-z0-9^]*(?:-[A-Za-z0-9]+)*)(?![A-Za-z0-9_-])")
# Offsets from the support threshold. A question is compared with a sentence the way a claim is, but
# question-to-sentence similarity runs lower than claim-to-sentence, so a sentence closest to the
# question quotes a cited paper this far below the threshold.
QUESTION_SUPPORT_OFFSET = 0.25
# A claim whose every name and number is in the cited paper needs this much less similarity.
ALL_TERMS_SUPPORT_OFFSET = 0.15
TERM_BONUS = 0.1  # each name or number of the claim found in the cited paper adds this to the similarity


@dataclass
class Source:
    """A numbered source of the prompt: a paper and its abstract split into sentences."""

    number: int
    paper: Paper
    raw_sentences: list[str]
    clean_sentences: list[str]
    vectors: np.ndarray
    haystack: str = ""

    def __post_init__(self) -> None:
        self.haystack = self.paper.text.lower()


def sentence_pairs(paper: Paper) -> tuple[list[str], list[str]]:
    """The abstract's sentences, verbatim and cleaned, aligned one to one."""
    raw = split_sentences(paper.abstract)
    return raw, [clean_markup(sentence) for sentence in raw]


def sentence_offsets(abstract: str, raw_sentences: list[str]) -> list[tuple[int, int]]:
    """Where each sentence sits in the verbatim abstract (character start, end)."""
    offsets, cursor = [], 0
    for sentence in raw_sentences:
        start = abstract.find(sentence, cursor)
        if start < 0:  # cannot happen for sentences split from this abstract; keep going safely
            start = cursor
        offsets.append((start, start + len(sentence)))
        cursor = start + len(sentence)
    return offsets


def spans_of(paper: Paper, raw_sentences: list[str], indices: list[int]) -> tuple[Span, ...]:
    """Sentences `indices` of the abstract as contiguous passages: adjacent ones join, others stay apart."""
    offsets = sentence_offsets(paper.abstract, raw_sentences)
    runs: list[list[int]] = []
    for i in sorted(set(indices)):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return tuple(
        Span(run[0], run[-1], offsets[run[0]][0], offsets[run[-1]][1], paper.abstract[offsets[run[0]][0]: offsets[run[-1]][1]])
        for run in runs
    )


def make_citation(marker: int, paper: Paper, raw_sentences: list[str], indices: list[int], support: float = 0.0) -> Citation:
    """A citation whose evidence is sentences `indices` of the paper's abstract, as verbatim spans."""
    spans = spans_of(paper, raw_sentences, indices)
    return Citation(marker=marker, paper=paper, quote=" … ".join(s.text for s in spans), support=support, spans=spans)


@dataclass
class Claim:
    """One sentence of the answer and what the verifier concluded about it."""

    text: str
    markers: list[int]
    cited: list[int] = field(default_factory=list)
    supported: bool = False
    reason: str = ""
    quotes: dict[int, int] = field(default_factory=dict)  # source number -> index of its supporting sentence
    scores: dict[int, float] = field(default_factory=dict)  # source number -> how strongly that sentence supports it


@dataclass(frozen=True)
class Verified:
    """The repaired answer text, its citations (each with its best support score), the flagged
    sentences with the reason, and the share of the draft's sentences that were supported."""

    text: str
    citations: list[Citation]
    flagged: list[str]
    supported_share: float


def split_answer(text: str) -> list[str]:
    """Answer sentences; a marker run after the full stop belongs to the sentence before it."""
    text = re.sub(rf"([.!?。！？])((?:{SPACED_MARKER.pattern})+)", r"\2\1", text.strip())
    pieces: list[str] = []
    for block in re.split(r"\n+", text):
        block = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", block)
        for part in re.split(r"(?<=[。！？])", block):
            pieces.extend(split_sentences(part) if part.strip() else [])
    return [p.strip() for p in pieces if p.strip()]


def numbers_in(text: str) -> set[str]:
    """Numbers that carry a claim (ignores lone single digits, which abstracts often spell out)."""
    found = set()
    for match in _NUMBER.finditer(text):
        value = match.group(1).replace(",", "")
        if len(value) == 1 and not match.group(2):
            continue
        found.add(value)
    return found


def has_number(haystack: str, number: str) -> bool:
    """Whole-number match: '2.81' is in '2.81×' but not in '12.81'."""
    pattern = r"(?<![\d.])" + re.escape(number).replace(r"\.", r"\.") + r"(?![\d])(?!\.\d)"
    return re.search(pattern, haystack.replace(",", "")) is not None


def named_terms(text: str) -> set[str]:
    """Method names and other specific tokens ('Vegas', 'KV', 'ViewMask-1-to-3')."""
    terms = set()
    for position, match in enumerate(_TERM.finditer(text)):
        token = match.group(1)
        capitals = sum(c.isupper() for c in token)
        if capitals >= 2 or any(c.isdigit() for c in token) or ("-" in token and capitals) or (capitals and position > 0):
            terms.add(token)
    return terms


def _strip_markers(sentence: str) -> tuple[str, list[int]]:
    markers: list[int] = []
    for match in SPACED_MARKER.finditer(sentence):
        markers.extend(marker_numbers(match.group(1)))
    return SPACED_MARKER.sub("", sentence).strip(), markers


def verify(
    draft: str,
    sources: list[Source],
    encode: Encode,
    threshold: float,
    known_text: str,
    query_vector: np.ndarray | None = None,
) -> Verified:
    """Check and repair the citations of `draft` against `sources` (numbered 1..n).

    `known_text` is every retrieved abstract; a number found nowhere in it is unsupported.
    """
    by_number = {s.number: s for s in sources}
    claims = []
    for sentence in split_answer(draft):
        text, markers = _strip_markers(sentence)
        markers = [m for m in dict.fromkeys(markers)]
        if len(re.sub(r"\W", "", re.sub(r"\b(?:and|or|&)\b|和|与|及", "", text))) < 3:
            # Only markers ("[1] and [2]."): a small model's way of naming the papers. Name them,
            # as long as each is about the question; otherwise it is no answer at all.
            named = _named_papers(markers, by_number, query_vector, threshold)
            if named is not None:
                claims.append(named)
            continue
        claims.append(Claim(text=text, markers=markers))
    if not claims:
        return Verified("", [], [], 0.0)

    latin = [c for c in claims if not has_cjk(c.text) and not c.supported]
    vectors = encode([c.text for c in latin]) if latin else np.zeros((0, 1))
    vector_of = {id(c): vectors[i] for i, c in enumerate(latin)}
    known = known_text.lower()
    for claim in claims:
        if not claim.supported:
            _judge(claim, by_number, vector_of.get(id(claim)), threshold, known, query_vector)

    text_parts, flagged = [], []
    quotes: dict[int, list[int]] = {}
    support: dict[int, float] = {}  # source number -> its strongest support of any claim
    for claim in claims:
        if claim.supported and not claim.cited:  # a named-papers claim: markers are in its text
            text_parts.append(claim.text + ".")
            for number, index in claim.quotes.items():
                quotes.setdefault(number, []).append(index)
        elif claim.supported:
            body, stop = re.match(r"(.*?)([.!?。！？]*)$", claim.text.rstrip(), re.S).groups()
            text_parts.append(body + "".join(f" [{n}]" for n in claim.cited) + (stop or "."))
            for number in claim.cited:
                index = claim.quotes[number]
                if index not in quotes.setdefault(number, []):
                    quotes[number].append(index)
        else:
            flagged.append(f"{claim.text} ({claim.reason})")
            if "number" not in claim.reason:  # keep the prose, uncited; drop invented figures
                text_parts.append(claim.text)
        for number, score in claim.scores.items():
            support[number] = max(support.get(number, score), score)
    citations = [
        make_citation(n, by_number[n].paper, by_number[n].raw_sentences, quotes[n][:3], support.get(n, 0.0))
        for n in sorted(quotes)
    ]
    share = sum(c.supported for c in claims) / len(claims)
    return Verified(" ".join(text_parts), citations, flagged, share)


def _named_papers(
    markers: list[int], sources: dict[int, Source], query_vector: np.ndarray | None, threshold: float
) -> Claim | None:
    """A claim naming the cited papers, each quoted with its sentence closest to the question."""
    if query_vector is None:
        return None
    claim = Claim(text="", markers=markers)
    for number in markers:
        source = sources.get(number)
        if source is None:
            continue
        similarities = source.vectors @ query_vector
        best = int(np.argmax(similarities))
        if similarities[best] >= threshold - QUESTION_SUPPORT_OFFSET:
            claim.cited.append(number)
            claim.quotes[number] = best
            claim.scores[number] = float(similarities[best])
    if not claim.cited:
        return None
    titles = [f"{sources[n].paper.shown} [{n}]" for n in claim.cited]
    claim.text = ("Papers on this: " if len(titles) > 1 else "See ") + ", ".join(titles)
    claim.cited, claim.supported = [], True
    claim.markers = list(claim.quotes)
    return claim


def _judge(
    claim: Claim,
    sources: dict[int, Source],
    vector: np.ndarray | None,
    threshold: float,
    known: str,
    query_vector: np.ndarray | None,
) -> None:
    in_range = [m for m in claim.markers if m in sources]
    numbers = numbers_in(claim.text)
    missing = [n for n in numbers if not has_number(known, n)]
    if missing:
        claim.reason = f"number {', '.join(sorted(missing))} is in no retrieved abstract"
        return
    terms = named_terms(claim.text)

    def overlap(source: Source) -> tuple[int, int]:
        found_numbers = sum(has_number(source.haystack, n) for n in numbers)
        found_terms = sum(t.lower() in source.haystack for t in terms)
        return found_numbers + found_terms, len(numbers) + len(terms)

    support: dict[int, tuple[float, int]] = {}  # source -> (score, index of best sentence)
    for number, source in sources.items():
        hits, total = overlap(source)
        if numbers and not all(has_number(source.haystack, n) for n in numbers):
            continue  # a sentence's numbers must all come from the paper it cites
        if vector is not None:
            similarities = source.vectors @ vector
            best = int(np.argmax(similarities))
            score = float(similarities[best]) + TERM_BONUS * hits
            if score >= threshold or (total and hits == total and score >= threshold - ALL_TERMS_SUPPORT_OFFSET):
                support[number] = (score, best)
        elif number in in_range or (total and hits == total):
            # Non-English sentence: the MiniLM model cannot compare it with English text, so
            # the model's own marker (or exact overlap of names and numbers) has to carry it.
            if not total or hits:
                anchor = query_vector if query_vector is not None else source.vectors.mean(axis=0)
                support[number] = (hits + 0.5 * (number in in_range), int(np.argmax(source.vectors @ anchor)))
    if not support:
        claim.reason = "no source supports it"
        return
    kept = [m for m in in_range if m in support]
    if not kept:  # the model cited nothing, or the wrong paper: attribute to the best support
        kept = [max(support, key=lambda n: support[n][0])]
    claim.cited = kept
    claim.supported = True
    claim.quotes = {n: support[n][1] for n in kept}
    claim.scores = {n: support[n][0] for n in kept}
