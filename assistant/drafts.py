"""Drafts: what the answer stage makes of the model's draft once verified: the claims it makes of each
paper, whether it says anything the question did not, and the paper it must name or cite."""

from __future__ import annotations

import re
from dataclasses import replace

from . import slots
from .cite import make_citation
from .decide import Decision
from .query import Query
from .replies import Reply
from .text import SPACED_MARKER, has_cjk, marker_numbers
from .types import Citation
from .wording import NEGATIONS, STOPWORDS, generic, question_names


def copied(statement: str, sentences: list[str]) -> bool:
    """A short answer whose every word is in one sentence of the abstract ("124M to 2B", "HoVer and
    EX-FEVER"): a fragment copied from it holds, and the model cannot judge a fragment as a statement.
    A negation must be too. Words gathered from several sentences are a new claim ("UPipe reaches a
    training throughput of 25%" from one sentence's "25%" and another's "throughput"): it is judged."""
    words = re.findall(r"[\w.%×-]+", statement.lower())
    if not words or len(words) > 8:
        return False
    content = [w.strip(".") for w in words if w in NEGATIONS or w not in STOPWORDS]
    return any(all(w in sentence for w in content) for sentence in map(str.lower, sentences))


def vacuous(text: str, query: Query, decision: Decision) -> bool:
    """A draft that says nothing the question did not (a yes or no aside), that answers "how many" or "how
    much" without a figure, or "which dataset / model" without a name the question does not give: the
    abstract's claims may hold, but it answers nothing ("evaluated on several real-world datasets")."""
    asked = f"{query.text} {query.english}"
    if query.kind.kind != "yes_no" and slots.adds_nothing(text, asked):
        return True
    slot = decision.intent.slot
    if slot in ("number", "count"):
        return not slots.has_slot(slot, text)
    if slot in ("dataset", "name"):
        given = {n.lower() for n in question_names(asked)}
        return not [n for n in question_names(SPACED_MARKER.sub(" ", text)) if n.lower() not in given and not generic(n)]
    return False


# Where a sentence of a draft ends (English or Chinese punctuation, then space).
_DRAFT_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def claims_of(text: str, marker: int) -> str:
    """The sentences of a verified answer that cite source `marker`, without their markers."""
    sentences = _DRAFT_SENTENCE_END.split(text)
    own = [s for s in sentences if any(marker in marker_numbers(m) for m in SPACED_MARKER.findall(s))]
    return " ".join(SPACED_MARKER.sub("", s).strip() for s in own).strip()


# A reason given for a claim: "A because B", "A, since B", "A，因为B" (not the "since" of a date: "since 2019").
_REASON = re.compile(r",?\s+(?:because|since(?!\s+\d)|due to|owing to)\s+|[，,]?\s*因为", re.IGNORECASE)


def explained(statement: str) -> list[str]:
    """The claims a statement gives a reason for: "A" of "A because B". The model judges a statement
    by its surest part, so a why-question's false premise restated as the draft's A ("X loses accuracy
    on the large benchmark because it prunes more weights … while keeping accuracy") holds with its
    true reason; judged alone it does not."""
    claims = []
    for sentence in _DRAFT_SENTENCE_END.split(statement):
        parts = _REASON.split(sentence, maxsplit=1)
        claim = parts[0].strip(" ,，")
        if len(parts) == 2 and (len(claim.split()) >= 3 or (has_cjk(claim) and len(claim) >= 6)):
            claims.append(claim)
    return claims


def cite_both_sides(reply: Reply, decision: Decision) -> Reply:
    """A comparison cites both papers: add the best sentence of a side the draft left out."""
    cited = {c.marker for c in reply.citations}
    text, citations = reply.text, list(reply.citations)
    for source in decision.sources[:2]:
        if source.number in cited or not decision.evidence[source.number]:
            continue
        top = decision.best_sentences(source, 1)[0]
        text += f" {source.paper.called}: {top.clean} [{source.number}]"
        citations.append(make_citation(source.number, source.paper, source.raw_sentences, [top.index], top.score))
    return replace(reply, text=text, citations=sorted(citations, key=lambda c: c.marker))


def name_the_paper(text: str, citations: list[Citation]) -> str:
    """A which-paper answer names the paper: the model often writes "Source reports ..." or starts
    with the verb ("replaces normalizing flows ... [1]"), as the sources are numbered for it."""
    if not citations or any(c.paper.title.lower() in text.lower() or c.paper.called.lower() in text.lower() for c in citations):
        return text
    first = min(citations, key=lambda c: text.find(f"[{c.marker}]") % (len(text) + 1))
    title = first.paper.called
    placeholder = re.match(r"(?:the )?source\b(?: \[\d+\])?", text, re.IGNORECASE)
    if placeholder:
        return title + text[placeholder.end():]
    if text[:1].islower():
        return f"{title} {text}"
    return f"{title} [{first.marker}]: {text}"
