"""One browser session's conversation as typed values: turns holding `Answer`s, never HTML.

The chat messages, the source panels and the history the model sees are all derived from the
turns when they are needed, so nothing rendered is ever parsed back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..types import Answer
from .render import esc, history_text, render_panel, render_turn


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

    def messages(self) -> list[dict[str, Any]]:
        """The chat as Gradio messages, rendered from the turns."""
        out: list[dict[str, Any]] = []
        for number, turn in enumerate(self.turns, start=1):
            out += [
                {"role": "user", "content": esc(turn.question)},
                {"role": "assistant", "content": render_turn(turn, number)},
            ]
        return out

    def panel_at(self, message_index: int) -> str | None:
        """The source panel of the answer shown at chat position `message_index` (None: none there)."""
        number = message_index // 2 + 1
        if message_index < 0 or number > len(self.turns):
            return None
        return render_panel(self.turns[number - 1], number)
