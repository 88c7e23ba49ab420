"""Query: the question read once, as one frozen value every later stage uses.

What the user typed becomes: the question as words (markup and control characters removed, cut to
the question limit), the question in English (a question in Chinese is rewritten by the model, as
is a follow-up when the settings ask for it), what retrieval searches for, what evidence sentences
are weighed against, what the model reads, the language the reply is written in, and the kind of
question (`kinds`). Nothing downstream reads the raw question again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .chunk import count_tokens, truncate_tokens
from .followups import TURN_CHARS, conversation_query, last_said, with_last_question
from .wording import sanitize
from .errors import LLMError, QuestionError
from .kinds import KindReading
from .text import has_cjk, shorten

Language = Literal["en", "zh"]
# Kana and hangul: Japanese and Korean questions are answered in English (the rewrite is searched).
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\uac00-\ud7af]")


@dataclass(frozen=True)
class Query:
    """A question as every stage after reading it sees it."""

    asked: str  # as typed
    text: str  # as words, cut to the question limit
    history: tuple[dict[str, str], ...]
    english: str  # in English: the model's rewrite of a Chinese question (or of a follow-up), else `text`
    search: str  # what retrieval searches for
    weighed: str  # what the evidence sentences are weighed against
    prompt: str  # the question as the model reads it
    language: Language
    kind: KindReading
    notices: tuple[str, ...] = field(default=())

    @property
    def follow_up(self) -> bool:
        return bool(self.history)


def words_of(asked: str, max_tokens: int) -> tuple[str, list[str]]:
    """The question as words, and the notices of what was done to it; QuestionError when empty."""
    text = sanitize((asked or "").strip())
    if not text:
        raise QuestionError("The question is empty. Type a question about the papers.")
    notices = []
    if count_tokens(text) > max_tokens:
        text = truncate_tokens(text, max_tokens)
        notices.append(f"The question was longer than {max_tokens} tokens and was truncated.")
    return text, notices


def language_of(text: str) -> Language:
    """The language a reply to `text` is written in: Chinese for a question in Chinese, else English."""
    return "zh" if has_cjk(text) and not _KANA_HANGUL.search(text) else "en"


def search_texts(text: str, english: str, history: Sequence[dict[str, str]], rewritten: bool) -> tuple[str, str, str]:
    """(what to search for, what sentences are weighed against, what the model reads).

    A rewritten question is searched for as rewritten. An English follow-up is searched for as typed
    when it brings its own subject, else with the last exchange (`followups.conversation_query`); its
    sentences are weighed against it and the question it follows, not the last answer, which would
    pull them towards what was already said."""
    if rewritten:
        search = english
    elif history:
        search = conversation_query(text, history)
    else:
        search = text
    weighed = search if search == english else with_last_question(english, history)
    return search, weighed, prompt_text(text, english, search, history)


def prompt_text(text: str, english: str, search: str, history: Sequence[dict[str, str]]) -> str:
    """The question as the model reads it: a rewritten question with what the user typed; a follow-up
    that leans on the conversation with the question it follows (so "it" has something to refer to)."""
    if english != text:
        return f"{english}\n(The user asked: {text})"
    if history and search != text:
        earlier = last_said(history, "user")
        return f"{text}\n(This follows the earlier question: {shorten(earlier, 300)})" if earlier else text
    return text


def transcript(history: Sequence[dict[str, str]]) -> str:
    """The conversation as the rewrite prompt shows it."""
    return "\n".join(f"{t.get('role', 'user')}: {str(t.get('content', ''))[:TURN_CHARS]}" for t in history) or "(none)"


Rewrite = Callable[[str, Sequence[dict[str, str]]], str]
ReadKind = Callable[[str], KindReading]


def read_query(
    asked: str, history: Sequence[dict[str, str]], *, max_tokens: int, history_turns: int, rewrite_follow_ups: bool,
    rewrite: Rewrite, read_kind: ReadKind,
) -> Query:
    """Read a question once. `rewrite(text, turns)` is the model's English, standalone rewrite (asked for
    a question in Chinese, and for every follow-up with `rewrite_follow_ups`); `read_kind` reads the kind
    of an English question. A rewrite that fails leaves the question as typed, with a notice."""
    text, notices = words_of(asked, max_tokens)
    turns = list(history[-history_turns:]) if history_turns else []
    english, rewritten = text, False
    if has_cjk(text) or (turns and rewrite_follow_ups):
        try:
            english = rewrite(text, turns) or text
            rewritten = english != text
        except LLMError as exc:
            notices.append(f"Could not rewrite the question ({exc}); searched for it as typed.")
    search, weighed, prompt = search_texts(text, english, turns, rewritten)
    return Query(
        asked=asked, text=text, history=tuple(turns), english=english, search=search, weighed=weighed,
        prompt=prompt, language=language_of(text), kind=read_kind(english), notices=tuple(notices),
    )
