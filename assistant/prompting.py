"""Prompting: the prompts the model answers from, and the part of them it keeps per paper.

The answer prompt numbers its sources [1]..[n]; each gives the title and sentences of a paper. With
`whole_first_paper` the first source gives its whole abstract: that part of the prompt is the same
for every question about the paper, so the model's state after it is kept on disk (`keep_lead`) and a
later question, or a judgement on the paper (`judge`), reads only what follows. The quote-first
format (`answer_format="quote_first"`) has the model pick evidence ids in a JSON object before it
writes; `AnswerField` streams the answer out of that object as it is generated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic_core import from_json

from .chunk import count_tokens
from .cite import Source
from .config import Settings
from .errors import LLMError
from .evidence import ScoredSentence, SentenceBank, strongest
from .prompts import REFUSAL_SENTINEL, Prompts
from .types import Paper, Passage

_PROMPT_MARGIN = 64  # tokens kept free: tiktoken counts only approximate the model's tokenizer
Messages = list[dict[str, str]]
Context = list[tuple[Source, list[int]]]


class Prompter:
    """Builds the answer prompts over numbered sources; `llm()` is the model (started on first use)."""

    def __init__(self, settings: Settings, prompts: Prompts, sentences: SentenceBank, llm: Callable[[], Any]) -> None:
        self.settings = settings
        self.prompts = prompts
        self.sentences = sentences
        self.llm = llm

    def source(self, number: int, passage: Passage) -> Source:
        s = self.sentences.get(passage.paper)
        return Source(number, s.paper, s.raw, s.clean, s.vectors)

    def context(self, sources: list[Source], evidence: dict[int, list[ScoredSentence]], kind: str) -> Context:
        """The sentences each source contributes to the prompt (in abstract order): the first source's
        whole abstract (with `whole_first_paper`), the best sentence(s) of each other; a comparison's
        sources give their best sentences."""
        chosen = []
        for n, source in enumerate(sources):
            if self.settings.whole_first_paper and n == 0:
                chosen.append((source, list(range(len(source.clean_sentences)))))
                continue
            few = self.settings.whole_first_paper and kind != "comparison"
            per_paper = self.settings.other_paper_sentences if few else self.settings.sentences_per_paper
            chosen.append((source, sorted(e.index for e in strongest(evidence[source.number], per_paper))))
        return chosen

    def whole(self, paper: Paper) -> Context:
        """`paper`'s whole abstract as the first (and only) source of a prompt, as a question about it opens."""
        source = self.source(1, Passage(paper=paper, text="", score=1.0))
        return [(source, list(range(len(source.clean_sentences))))]

    def about(self, paper: Paper) -> Callable[[str], Messages]:
        """A function giving the prompt of a question about `paper` alone (its kept state is used)."""
        context = self.whole(paper)
        return lambda question: self.messages(question, context)

    @staticmethod
    def block(source: Source, indices: list[int]) -> str:
        return f"[{source.number}] {source.paper.title}: " + " ".join(source.clean_sentences[i] for i in indices)

    def messages(self, question: str, context: Context) -> Messages:
        """The answer prompt; the weakest sentences of the last sources are dropped to fit the window."""
        system = self.prompts.system.format(refusal=REFUSAL_SENTINEL)
        budget = self.llm().context_window - self.settings.max_answer_tokens - _PROMPT_MARGIN
        context = [(source, list(indices)) for source, indices in context]
        while True:
            blocks = [self.block(source, indices) for source, indices in context if indices]
            user = self.prompts.answer.format(sources="\n\n".join(blocks), question=question)
            if count_tokens(system) + count_tokens(user) <= budget or not any(i for _, i in context):
                break
            for source, indices in reversed(context):  # too long: the weakest sentence of the last source goes
                if indices:
                    indices.pop()
                    break
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def lead(self, messages: Messages, context: Context) -> Messages | None:
        """`messages` up to the end of the first paper's block: what `keep_lead` keeps (None when that
        block was cut to fit the model's window)."""
        user = messages[-1]["content"]
        lead = self.block(*context[0])
        end = user.find(lead)
        return None if end < 0 else [*messages[:-1], {"role": "user", "content": user[: end + len(lead)]}]

    def keep_lead(self, messages: Messages, context: Context, strict: bool = False) -> None:
        """Have the model keep its state after the instructions and the first paper's whole abstract
        (read once, then loaded from disk for every later question about the paper)."""
        if not (self.settings.whole_first_paper and context):
            return
        prefix = self.lead(messages, context)
        if prefix is None:
            return
        try:
            self.llm().keep_prefix(prefix)
        except LLMError:
            if strict:
                raise
            # Not kept: the answer's own request reads the whole prompt, and reports a real failure.

    def keep_paper(self, paper: Paper) -> None:
        """Have the model read the instructions and `paper`'s whole abstract and keep that state."""
        if not self.settings.whole_first_paper or self.settings.answer_format == "quote_first":
            return
        self.sentences.warm([paper])
        context = self.whole(paper)
        self.keep_lead(self.messages("", context), context, strict=True)

    def kept(self, paper: Paper) -> bool | None:
        """Whether the model has `paper`'s prompt state at hand (None: a backend that keeps nothing)."""
        context = self.whole(paper)
        prefix = self.lead(self.messages("", context), context)
        return None if prefix is None else self.llm().has_kept(prefix)

    def quote_first(self, question: str, context: Context) -> tuple[Messages, dict[str, Any]]:
        """The request in which the model picks the ids of the sentences that answer (grammar-constrained
        JSON), then writes: its messages and the options that constrain the output."""
        ids = [f"{source.number}.{i + 1}" for source, indices in context for i in indices]
        blocks = [
            f"[{source.number}] {source.paper.title}\n" + "\n".join(f"({source.number}.{i + 1}) {source.clean_sentences[i]}" for i in indices)
            for source, indices in context if indices
        ]
        messages = [
            {"role": "system", "content": self.prompts.system_quote_first.format()},
            {"role": "user", "content": self.prompts.answer_quote_first.format(sentences="\n\n".join(blocks), question=question)},
        ]
        schema = {
            "type": "object",
            "properties": {
                "evidence": {"type": "array", "items": {"type": "string", "enum": ids}, "minItems": 1, "maxItems": 3},
                "answer": {"type": "string"},
            },
            "required": ["evidence", "answer"],
            "additionalProperties": False,
        }
        return messages, {"response_format": self.llm().json_format(schema)}


class AnswerField:
    """Streams the value of the "answer" field out of a JSON object while it is being generated.

    The reply so far is read as partial JSON (pydantic-core's `from_json`, which reads an unfinished
    string up to its last complete character or escape). The reply is grammar-constrained to the
    quote-first schema, so it is JSON from its first character. An escaped surrogate pair
    ("\\ud83d\\ude00") is shown as the one character it encodes, as the finished reply is read.
    """

    def __init__(self) -> None:
        self.buffer = ""
        self.done = False  # the answer's closing quote has arrived
        self.text = ""

    def feed(self, delta: str) -> str:
        """Add generated text; return the newly decoded part of the answer."""
        self.buffer += delta
        if self.done:
            return ""
        try:
            closed = from_json(self.buffer, allow_partial=True)  # holds "answer" once its string is closed
            self.done = isinstance(closed, dict) and isinstance(closed.get("answer"), str)
            value = closed if self.done else from_json(self.buffer, allow_partial="trailing-strings")
        except ValueError:
            # An escape JSON does not allow, such as a lone surrogate "\ud83d": nothing more is shown while
            # streaming; the whole reply is read once it ends (`parse_quote_first`).
            return ""
        answer = value.get("answer") if isinstance(value, dict) else None
        if not isinstance(answer, str):
            return ""
        answer = answer.translate(_NOT_SHOWN)
        piece = answer[len(self.text):]
        self.text = answer
        return piece


# Escaped control characters that would move the cursor or garble a terminal: left out of the shown text.
_NOT_SHOWN = str.maketrans("", "", "\r\b\f")


def parse_quote_first(reply: str, field: AnswerField) -> tuple[dict[int, list[int]], str]:
    """(sentence indices the model chose, by source number; its answer) from a quote-first reply."""
    try:
        data = json.loads(reply)
        ids, text = list(data.get("evidence") or []), str(data.get("answer") or "")
    except (ValueError, AttributeError):  # cut off by the token limit: keep what was decoded
        ids, text = re.findall(r'"(\d+\.\d+)"', reply.split('"answer"')[0]), field.text
    chosen: dict[int, list[int]] = {}
    for value in ids:
        number, _, index = str(value).partition(".")
        if number.isdigit() and index.isdigit() and int(index) >= 1:
            chosen.setdefault(int(number), []).append(int(index) - 1)
    return chosen, text
