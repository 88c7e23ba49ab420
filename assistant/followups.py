"""Follow-ups: whether a question leans on the conversation, and what it is searched for with.

A follow-up that brings its own subject is searched for as typed; one that points back ("How did they
evaluate it?") is searched for with the last exchange, which names the paper: no model call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .intent import _WHICH_PAPER
from .wording import question_names, stems

# -- follow-ups ------------------------------------------------------------------------------------

# Words that point back into the conversation: "it", "they", "that method", "those neurons", "the
# approach". A demonstrative counts after a verb or preposition or at the start ("with that
# framework", "When do those neurons"), not as a conjunction ("a paper that uses ..."); "the
# approach" counts unless a description follows ("the paper on count data").
_POINTS_BACK = re.compile(
    r"\b(?:it|its|itself|they|them|their|theirs|themselves)\b"
    r"|(?:^|[.?!,;:]\s*|\b(?:of|for|in|on|with|about|by|from|to|under|behind|does|do|did|was|is|are|were|when|where|"
    r"how|and|use|uses|used|using)\s+)(?:this|that|these|those|the same)\s+(?!(?:is|are|was|were|does|do|did|has|have)\b)[\w-]+"
    r"|\bthe (?:paper|work|study|method|approach|model|framework|technique|algorithm|authors|system|idea|proposal)\b"
    r"(?!\s+(?:on|about|that|which|where|for|from|in|with|called|named|by|of|proposing|using|studying)\b)",
    re.IGNORECASE,
)


# A sentence that asks for a paper binds its own "it" ("which paper prunes trees, and how much does
# it save?"); one that brings a new subject binds the "it" of the sentences after it.
_ASKS_PAPER = re.compile(
    r"\b(?:which|what)\s+(?:paper|work|study|article|one)\b|\b(?:has|have|did)\s+(?:someone|anyone)\b"
    r"|\b(?:is|are)\s+there\s+(?:a|an|any|some)?\s*(?:papers?|works?|research|stud(?:y|ies)|methods?)\b",
    re.IGNORECASE,
)
ELLIPTICAL_WORDS = 3  # a follow-up of fewer content words that names nothing has no subject of its own
_NEW_SUBJECT = re.compile(r"\b(?:is|are|was|were)\s+there\s+(?:a|an|any|some)\b", re.IGNORECASE)


def refers_back(question: str) -> bool:
    """Whether a follow-up leans on the conversation for what it is about ("How did they evaluate
    it?"), rather than bringing its own subject ("Which paper prunes tree ensembles, and by how much
    does it compress them?", "Is there a neural operator for subsurface flow? What does it learn
    from?", "What does ReWA stand for?"). A short one that names nothing ("And the speedup?")
    leans on the conversation too. Such a follow-up is searched for together with the
    conversation; any other is searched for as typed (no model call to rewrite it)."""
    q = " ".join(question.split())
    if len(stems(q)) < ELLIPTICAL_WORDS and not question_names(q):
        return True  # "And the speedup?", "What about memory?": the subject is the conversation's
    introduced = False
    for sentence in re.split(r"(?<=[.?!:])\s+", q):
        if _POINTS_BACK.search(sentence):
            return not (introduced or _ASKS_PAPER.search(sentence))
        introduced = introduced or bool(_WHICH_PAPER.search(sentence) or _NEW_SUBJECT.search(sentence))
    return False


TURN_CHARS = 600  # of an earlier message, read with a follow-up (by the search, or by the model's rewrite)
FOLLOW_UP_ANSWER_CHARS = 300  # of the last answer, searched with a follow-up that leans on it (it names the paper)


def conversation_query(question: str, history: Sequence[dict[str, str]]) -> str:
    """What an English follow-up is searched for: the question as typed when it brings its own
    subject, else the question with the last question and the start of the last answer (which
    names the paper). It costs no model call, and finds the paper as often as the model's rewrite
    (the evaluation README, "Constants")."""
    if not history or not refers_back(question):
        return question
    context = [last_said(history, "user")[:TURN_CHARS], last_said(history, "assistant")[:FOLLOW_UP_ANSWER_CHARS]]
    return " ".join([question, *filter(None, context)])


def with_last_question(question: str, history: Sequence[dict[str, str]]) -> str:
    """A follow-up with the question it follows: what its evidence sentences are weighed against."""
    return " ".join(filter(None, [question, last_said(history, "user")[:TURN_CHARS]]))


def last_said(history: Sequence[dict[str, str]], role: str) -> str:
    """The last message of `role` in a conversation ("" when there is none)."""
    return next((str(t.get("content", "")) for t in reversed(history) if t.get("role", "user") == role), "")


