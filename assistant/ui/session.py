"""One browser session's conversation as typed values: turns holding `Answer`s, never HTML.

The history the model sees is derived from the turns here; the chat messages and source panels
are rendered from them (`render.chat_messages`, `render.panel_at`), so nothing rendered is ever
parsed back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ..types import Answer


def history_text(answer: Answer) -> str:
    """What the model is shown of an earlier turn: the answer, or the papers a search ranked."""
    if answer.status == "retrieval_only":
        return "Most relevant papers: " + "; ".join(p.paper.shown for p in answer.passages[:3])
    return answer.text


@dataclass
class Turn:
    """A question and what became of it: an answer, a streamed draft, an error, or a stop."""

    question: str
    answer: Answer | None = None
    draft: str = ""
    error: str = ""
    stopped: bool = False

    @property
    def pending(self) -> bool:
        return self.answer is None and not self.error and not self.stopped


@dataclass
class Session:
    """The turns of one conversation, oldest first. A turn's number (its cards' ids) is its position."""

    turns: list[Turn] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        """Whether the last question is still being answered."""
        return bool(self.turns) and self.turns[-1].pending

    @property
    def answered(self) -> int:
        return sum(turn.answer is not None for turn in self.turns)

    def ask(self, question: str) -> Turn:
        turn = Turn(question)
        self.turns.append(turn)
        return turn

    def history(self) -> list[dict[str, str]]:
        """What the model is shown of the conversation: the answered turns, as plain text."""
        messages: list[dict[str, str]] = []
        for turn in self.turns:
            if turn.answer is not None:
                messages += [
                    {"role": "user", "content": turn.question},
                    {"role": "assistant", "content": history_text(turn.answer)},
                ]
        return messages
