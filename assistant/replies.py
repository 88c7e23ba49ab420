"""Replies that need no drafting: refusals, near misses, corrections, out-of-scope notes and answers in
the abstract's own sentences, in the question's language.

Each function returns a new `Reply` (text, citations, status); the answer engine builds the `Answer`
from the reply it settles on. The words are templates in `prompts/` (English and Chinese); quotes stay verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .cite import Source, make_citation
from .prompts import Prompts
from .types import Citation, Passage, Status


@dataclass(frozen=True)
class Reply:
    """A reply's text, its citations (each with its verbatim quote) and its outcome; for a drafted
    answer also the sentences the verifier flagged and the share it found supported; for a topic list
    the papers possibly related, the papers shown (`listed`) and how likely the first is on the topic;
    for an answer the judge weighed, its `confidence` and the prompt's size."""

    text: str
    status: Status
    citations: list[Citation] = field(default_factory=list)
    notice: str = ""
    flagged: list[str] = field(default_factory=list)
    supported_share: float | None = None
    related: list[Citation] = field(default_factory=list)
    listed: list[Passage] | None = None
    confidence: float | None = None
    prompt_tokens: int = 0


def _chinese(language: str) -> bool:
    return language == "zh"


def refusal(prompts: Prompts, passages: Sequence[Passage], language: str) -> Reply:
    """The abstracts do not answer: say so and name the closest papers."""
    shown = passages[:3]
    if _chinese(language):
        closest = "；".join(f"{p.paper.shown}（{p.paper.label}）" for p in shown)
        text = prompts.refusal_zh.format(closest=f"最接近的论文是：{closest}。" if closest else "")
    else:
        closest = "; ".join(f"{p.paper.shown} ({p.paper.label})" for p in shown)
        text = prompts.refusal.format(closest=f" The closest papers are: {closest}." if closest else "")
    return Reply(text, "not_in_abstracts")


def llm_failed() -> Reply:
    """The model could not answer: the retrieved papers stand in (the reason is a notice)."""
    return Reply("The language model could not answer, so here are the most relevant papers instead.", "llm_failed")


def out_of_scope(prompts: Prompts, papers: int, language: str) -> Reply:
    """The question is not about this collection at all: say so; nothing is cited or made up."""
    template = prompts.out_of_scope_zh if _chinese(language) else prompts.out_of_scope
    return Reply(template.format(count=papers), "out_of_scope")


def near_miss(prompts: Prompts, source: Source, index: int | None, language: str) -> Reply:
    """The paper is found but its abstract does not answer: say so, quoting the sentence that comes
    closest (one judged not to answer; none when every candidate was judged to answer)."""
    title = source.paper.called
    if index is None:
        text = (f"{title} 的摘要没有给出这个问题的答案。" if _chinese(language)
                else f"The {title} abstract does not answer that question.")
        return Reply(text, "not_in_abstracts")
    template = prompts.near_miss_zh if _chinese(language) else prompts.near_miss
    text = template.format(title=title, marker=source.number, quote=source.clean_sentences[index])
    return Reply(text, "not_in_abstracts", [make_citation(source.number, source.paper, source.raw_sentences, [index])])


def correction(prompts: Prompts, source: Source, index: int, language: str) -> Reply:
    """The draft claims what the abstract contradicts: say so and quote what it does say."""
    template = prompts.correction_zh if _chinese(language) else prompts.correction
    text = template.format(title=source.paper.called, marker=source.number, quote=source.clean_sentences[index])
    return Reply(text, "answered", [make_citation(source.number, source.paper, source.raw_sentences, [index])],
                 notice="The model's draft said what the abstract does not support; the reply quotes the abstract instead.")


def extractive(quotes: Sequence[tuple[Source, list[int]]], language: str, which_paper: bool = False) -> Reply:
    """The abstracts' own sentences as the answer (the model declined, or its wording did not hold): one
    paper's, or each side's of a comparison, each quoted with its marker."""
    parts, citations = [], []
    for source, indices in quotes:
        indices = sorted(indices)
        body = source.clean_sentences[indices[0]]
        for before, i in zip(indices, indices[1:]):  # sentences apart in the abstract stay apart, as in the quote
            body += (" " if i == before + 1 else " \u2026 ") + source.clean_sentences[i]
        title, n = source.paper.called, source.number
        if _chinese(language):
            lead = (f"可能是 {title} [{n}]。" if which_paper else f"{title} [{n}] 的摘要原文：")
        else:
            lead = f"This looks like {title} [{n}]: " if which_paper else f"The {title} abstract says: "
        parts.append(f"{lead}\u201c{body}\u201d [{n}]")
        citations.append(make_citation(n, source.paper, source.raw_sentences, indices))
    return Reply(" ".join(parts), "answered", citations,
                 notice="Answered with the abstract's own sentences: the model declined, or its wording did not hold.")
