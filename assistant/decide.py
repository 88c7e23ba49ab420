"""Decide: which papers the answer reads, what the word rules find, and (with the judge) what to do.

`plan` chooses the numbered sources of the prompt (the papers the question names first; one paper for
a detail of a named paper, two for a comparison) and scores every sentence of each against the
question. The word rules of `slots` and `wording` then give their verdict: "answer", "near_miss" (a
name, a number or the asked detail the abstract never says) or "refuse" (nothing close enough). That
verdict is one feature of the judge's fitted rule, not the decision: `features` lists them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .cite import Source
from .config import Settings
from .evidence import ScoredSentence, SentenceBank, score_sentences, spoken_to, question_phrases
from .kinds import KindReading
from .intent import Intent
from .slots import asked_for, focus_sentences, missing_focus
from .text import has_cjk
from .types import Passage
from .wording import stems, unknown_specifics

Action = Literal["answer", "near_miss", "refuse"]
# Kinds that ask about one paper's content: read from the paper the question names, alone.
ONE_PAPER_KINDS = ("fact", "yes_no", "summary", "which_paper")


@dataclass(frozen=True)
class Decision:
    """The sources a question is answered from, their scored sentences, and the word rules' verdict."""

    action: Action  # the word rules' verdict (a feature of the judge's rule)
    intent: Intent  # the slot and focus the word rules read
    kind: str  # the kind of question (`kinds`)
    sources: list[Source]
    evidence: dict[int, list[ScoredSentence]]  # source number -> every sentence of its abstract, scored
    subject: Source | None = None  # the paper the question is about (named, else the first or the closest)
    named: bool = False  # whether the question names `subject` (by its title or a name only it uses)
    notices: tuple[str, ...] = ()  # what the word rules found, in words
    confidence: float = 0.0  # the best evidence sentence's score
    top_dense: float = 0.0  # the dense similarity of the best retrieved paper

    def best_sentences(self, source: Source, n: int) -> list[ScoredSentence]:
        return sorted(self.evidence[source.number], key=lambda e: -e.score)[:n]

    def features(self, kind: KindReading, declines: float | None) -> dict[str, float | None]:
        """The judge's features (`judge.DECISION_FEATURES`)."""
        first = self.sources[0].number
        return {
            "model declines": declines,
            "rules: answer": float(self.action == "answer"),
            "rules: near miss": float(self.action == "near_miss"),
            "best sentence similarity": max((e.score for e in self.evidence[first]), default=0.0),
            "paper named": float(self.named),
            "p(yes_no)": kind.p("yes_no"),
            "p(summary)": kind.p("summary"),
            "p(out_of_scope)": kind.p("out_of_scope"),
            "top dense score": self.top_dense,
        }


# The first papers of a question that names none, ordered by the model's reading: with five, the same
# paper comes first for 179 of 180 evaluation questions, for two thirds more time (the evaluation's
# fit_reading.py).
READ_CANDIDATES = 3


def reading_order(scores: list[float], odds: list[float], weight: float) -> list[int]:
    """The first papers' indices, best first, by retrieval score + `weight` x the model's log-odds
    that the paper is about the question (ties keep retrieval's order; `AnswerEngine.gather`)."""
    return sorted(range(len(scores)), key=lambda i: -(scores[i] + weight * odds[i]))


MakeSource = Callable[[int, Passage], Source]
Encode = Callable[[list[str]], np.ndarray]


def choose_papers(settings: Settings, kind: str, relevant: Sequence[Passage], named: Sequence[Passage],
                  follow_up: bool) -> list[Passage]:
    """The papers the prompt reads, in order."""
    context = list(relevant[: settings.context_papers])
    if named and kind in ONE_PAPER_KINDS and not follow_up:
        # A question about the paper it names: only its sentences are read (the others could not be
        # cited for it anyway). Not for a follow-up, whose paper comes from the conversation: there
        # the other papers stay, as the named paper may not be the one the conversation is about.
        return list(named[:1])
    if named:  # the papers the question names come first
        context = list(dict.fromkeys([*named[: 2 if kind == "comparison" else 1], *context]))
        context = context[: max(len(named[:2]), settings.context_papers)]
    if kind == "comparison":
        # The two papers it compares (named, else the two closest): a third could only be cited wrongly.
        return context[:2]
    if settings.whole_first_paper and first_paper_leads([p.score for p in context], settings.lone_paper_margin):
        # A first paper far ahead of the others is the one asked about: the others' sentences would
        # only be read (time) and, now and then, cited instead of it.
        return context[:1]
    return context


def first_paper_leads(scores: Sequence[float], margin: float) -> bool:
    """Whether the first of two papers or more leads every other by `margin` (`lone_paper_margin`): the
    answer then reads it alone, and the model is not asked to order them (`AnswerEngine.gather`)."""
    return len(scores) >= 2 and scores[0] - max(scores[1:]) >= margin


def plan(
    settings: Settings, question: str, weighed: str, intent: Intent, kind: str, relevant: Sequence[Passage],
    named: Sequence[Passage], vector: np.ndarray, bank: SentenceBank, make_source: MakeSource, encode: Encode,
    follow_up: bool = False,
) -> Decision:
    """The sources and their scored sentences, and the word rules' verdict on them."""
    context = choose_papers(settings, kind, relevant, named, follow_up)
    bank.warm([p.paper for p in context])
    sources = [make_source(n, p) for n, p in enumerate(context, start=1)]
    question_stems = set(stems(weighed))
    evidence = {s.number: score_sentences(bank.get(s.paper), vector, question_stems) for s in sources}
    top_scores = {s.number: max((e.score for e in evidence[s.number]), default=0.0) for s in sources}
    # A comparison that names one paper is about that paper: what it is compared with must be in it.
    about_one = kind in ONE_PAPER_KINDS or (kind == "comparison" and len(named) == 1)
    subject = sources[0] if named and about_one else None
    if kind in ONE_PAPER_KINDS and not follow_up:
        # A question about one paper that names none is about the first: retrieval's, or the model's
        # reading's where retrieval is unsure (`AnswerEngine.gather`). Of the questions that read two
        # papers or more (13 project's, 5 held-out, 22 outside), the first is a gold paper for 11, 3
        # and 18; the paper with the sentence closest in wording, used before, for 8, 1 and 13.
        likeliest = sources[0]
    else:
        likeliest = max(sources, key=lambda s: top_scores[s.number])
    # The verdict is not yet given: the word rules read the sources as chosen, then give it.
    chosen = Decision("answer", intent, kind, sources, evidence,
                      subject=subject or likeliest, named=subject is not None,
                      confidence=max(top_scores.values()), top_dense=max((p.dense_score for p in relevant), default=0.0))
    action, notice = _rules(settings, question, weighed, intent, chosen, bank, encode)
    return replace(chosen, action=action, notices=(notice,) if notice else ())


def asked_part(question: str) -> str:
    """The sentences of a question that ask something (ending in a question mark), or all of it."""
    asking = [s for s in re.split(r"(?<=[.?!])\s+", question.strip()) if s.rstrip().endswith(("?", "？"))]
    return " ".join(asking) or question


def _rules(settings: Settings, question: str, weighed: str, intent: Intent, decision: Decision,
           bank: SentenceBank, encode: Encode) -> tuple[Action, str]:
    """The word rules' verdict and what they found, in words."""
    subject = decision.subject if decision.named else None
    sources = decision.sources
    # Names and numbers the question relies on ("... over SGLang?") that the paper it is about (or,
    # when it names none, every one of the closest) never mentions. Only its questions count: the
    # context a user gives first and instructions around a question ("cite Smith et al.") are not asked.
    unknown = unknown_specifics(asked_part(question), [subject.paper.text] if subject else [s.paper.text for s in sources],
                                strict=subject is not None)
    if unknown:
        if subject is not None:
            return "near_miss", f"The {subject.paper.called} abstract does not mention {', '.join(unknown)}."
        return "refuse", f"None of the closest abstracts mentions {', '.join(unknown)}."
    if subject is None and intent.kind == "which_paper":
        # The closest abstract is near the question's wording but says none of its phrases.
        phrases = question_phrases(weighed)
        if phrases and spoken_to(encode(phrases), bank.get(sources[0].paper)) < settings.phrase_threshold:
            return "refuse", "The closest abstract does not speak to any part of the question."
    about = subject or (decision.subject if decision.confidence >= settings.subject_threshold else None)
    translated = has_cjk(question)  # the slot of a question in another language is not read from its words
    if about is not None and not translated and intent.kind == "fact" and intent.slot not in ("mechanism", "yes_no", "other", "paper"):
        if not focus_sentences(intent, bank.get(about.paper), question):
            return "near_miss", f"The {about.paper.called} abstract does not {asked_for(intent)}."
    elif subject is not None and not translated and intent.kind == "fact" and intent.focus and intent.slot == "other":
        if missing_focus(intent, bank.get(subject.paper)):
            return "near_miss", f"The {subject.paper.called} abstract does not {asked_for(intent)}."
    elif subject is None and decision.confidence < settings.answer_threshold:
        return "refuse", "No sentence of the closest abstracts is close enough to the question to answer from."
    return "answer", ""
