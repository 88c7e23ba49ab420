"""Decide: between retrieval and the answer, what the evidence supports.

Retrieval finds papers; this stage decides, from the evidence at the level of sentences, what to do
with them: refuse, reply to a near miss (the paper is found but its abstract does not give what is
asked: say what it does say, cited), or answer from chosen sentences. The decision is a `Decision`
value made from the numbered sources, their scored sentences and the judge's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .cite import Source
from .evidence import ScoredSentence
from .slots import Intent

Action = Literal["answer", "near_miss", "refuse"]

# -- the decision --------------------------------------------------------------------------------


@dataclass
class Decision:
    """What to do with a question, made on the numbered sources and their scored sentences."""

    action: Action
    intent: Intent
    sources: list[Source]
    evidence: dict[int, list[ScoredSentence]]  # source number -> every sentence of its abstract, scored
    subject: Source | None = None  # the paper the question is about (named, or the closest)
    named: bool = False  # whether the question names `subject` (by its title or a name only it uses)
    missing: str = ""  # near misses: what the abstract does not give, in the question's words
    notices: list[str] = field(default_factory=list)
    confidence: float = 0.0  # the best evidence sentence's score
    question: str = ""
    english: str = ""  # the question in English: the model's rewrite of a Chinese question or a follow-up

