"""Answer: condense the question, retrieve, prompt the LLM, verify citations, build `Answer`.

The model drafts; the application owns the citations (see `cite`). The context is lean
(the best sentences of the top papers) because that is what a small local model answers
best from and what keeps its time to first token short.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .chunk import count_tokens, truncate_tokens
from .cite import Source, has_number, named_terms, numbers_in, sentence_pairs, verify
from .config import Settings
from .embed import encode
from .errors import LLMError, QuestionError
from .prompts import REFUSAL_SENTINEL, load_prompts
from .retrieve import HybridRetriever
from .types import Answer, Citation, Passage

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
# Ways a model says it cannot answer without using the sentinel.
_DECLINES = re.compile(
    r"\b(?:do(?:es)? not (?:contain|provide|mention|specify|state|include|say)|no (?:information|mention)|"
    r"(?:cannot|can't|unable to) (?:answer|determine|find|be determined)|not (?:mentioned|specified|provided|stated))\b",
    re.IGNORECASE,
)
_PROMPT_MARGIN = 64  # tokens kept free: tiktoken counts only approximate the model's tokenizer


def unknown_specifics(question: str, texts: list[str]) -> list[str]:
    """Names and numbers of `question` that appear in none of `texts` (case-insensitive)."""
    haystack = " ".join(texts).lower().replace("^", "")

    def mentioned(term: str) -> bool:
        if term.lower().replace("^", "") in haystack:
            return True
        # An acronym the abstract spells out: "LLM" -> "large language models".
        letters = term[:-1] if term.endswith("s") and term[:-1].isupper() else term
        if letters.isupper() and 2 <= len(letters) <= 6:
            spelled = r"[\s-]+".join(rf"{re.escape(c.lower())}\w*" for c in letters)
            return re.search(rf"\b{spelled}", haystack) is not None
        return False

    missing = [t for t in sorted(named_terms(question)) if not mentioned(t)]
    return missing + [n for n in sorted(numbers_in(question)) if not has_number(haystack, n)]


class AnswerEngine:
    """Turns a question (and history) into a verified `Answer`, streaming the draft."""

    def __init__(self, settings: Settings, retriever: HybridRetriever, embedder: Any, connect: Callable[[], Any]) -> None:
        self.settings = settings
        self.retriever = retriever
        self.embedder = embedder
        self.prompts = load_prompts()
        self._connect = connect
        self._llm: Any = None
        self._sentences: dict[str, Source] = {}

    @property
    def llm(self) -> Any:
        """The language model, connected (and for the local default, started) on first use."""
        if self._llm is None:
            self._llm = self._connect()
        return self._llm

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    # -- stages ------------------------------------------------------------------------------

    def _encode(self, texts: list[str]) -> np.ndarray:
        return encode(self.embedder, texts)

    def _source(self, number: int, passage: Passage) -> Source:
        cached = self._sentences.get(passage.paper.id)
        if cached is None:
            raw, clean = sentence_pairs(passage.paper)
            cached = Source(0, passage.paper, raw, clean, self._encode(clean))
            self._sentences[passage.paper.id] = cached
        return Source(number, cached.paper, cached.raw_sentences, cached.clean_sentences, cached.vectors)

    def _condense(self, question: str, history: list[dict[str, str]]) -> str:
        turns = history[-self.settings.history_turns :] if self.settings.history_turns else []
        if not turns and not _CJK.search(question):
            return question
        transcript = "\n".join(f"{t.get('role', 'user')}: {str(t.get('content', ''))[:600]}" for t in turns) or "(none)"
        prompt = self.prompts.condense.format(history=transcript, question=question)
        query = self.llm.chat([{"role": "user", "content": prompt}], max_tokens=64)
        query = query.strip().strip('"').splitlines()[0].strip() if query.strip() else ""
        return query or question

    def _context(self, sources: list[Source], query_vector: np.ndarray) -> list[tuple[Source, list[int]]]:
        """The best sentences of each source (in abstract order) for the prompt."""
        chosen = []
        for source in sources:
            scores = source.vectors @ query_vector
            best = sorted(np.argsort(-scores)[: self.settings.sentences_per_paper].tolist())
            chosen.append((source, best))
        return chosen

    def _messages(self, question: str, context: list[tuple[Source, list[int]]]) -> list[dict[str, str]]:
        system = self.prompts.system.format(refusal=REFUSAL_SENTINEL)
        budget = self.llm.context_window - self.settings.max_answer_tokens - _PROMPT_MARGIN
        context = [(source, list(indices)) for source, indices in context]
        while True:
            blocks = [
                f"[{source.number}] {source.paper.title}: " + " ".join(source.clean_sentences[i] for i in indices)
                for source, indices in context
                if indices
            ]
            user = self.prompts.answer.format(sources="\n\n".join(blocks), question=question)
            if count_tokens(system) + count_tokens(user) <= budget or not any(i for _, i in context):
                break
            # Too long for the model's window: drop the weakest sentence of the last source.
            for source, indices in reversed(context):
                if indices:
                    indices.pop()
                    break
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _refusal(self, answer: Answer, passages: list[Passage]) -> Answer:
        closest = "; ".join(f"{p.paper.title} ({p.paper.source} #{p.paper.ordinal})" for p in passages[:3])
        answer.text = self.prompts.refusal.format(closest=f" The closest papers are: {closest}." if closest else "")
        answer.refused = True
        answer.citations = []
        return answer

    def _extractive(self, answer: Answer, source: Source, query_vector: np.ndarray) -> Answer:
        """The model declined although retrieval is confident: answer with the best sentences."""
        order = np.argsort(-(source.vectors @ query_vector))[:2]
        indices = sorted(order.tolist())
        answer.text = " ".join(source.clean_sentences[i] for i in indices) + f" [{source.number}]"
        answer.citations = [
            Citation(marker=source.number, paper=source.paper, quote=" ".join(source.raw_sentences[i] for i in indices))
        ]
        answer.notices.append("The model did not answer; these are the abstract's most relevant sentences.")
        return answer

    # -- the whole pipeline ----------------------------------------------------------------

    def stream(
        self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None
    ) -> Iterator[str | Answer]:
        """Yield draft tokens as the model writes them, then the verified `Answer`."""
        started = time.perf_counter()
        question = (question or "").strip()
        if not question:
            raise QuestionError("The question is empty. Type a question about the papers.")
        answer = Answer(question=question, text="")
        if count_tokens(question) > self.settings.max_question_tokens:
            question = truncate_tokens(question, self.settings.max_question_tokens)
            answer.notices.append(
                f"The question was longer than {self.settings.max_question_tokens} tokens and was truncated."
            )
        timings = answer.timings
        try:
            answer.search_query = self._condense(question, list(history or []))
        except LLMError as exc:
            answer.search_query = question
            answer.notices.append(f"Could not rewrite the follow-up question ({exc}); searched for it as typed.")
        timings["condense"] = time.perf_counter() - started

        mark = time.perf_counter()
        # One embedding of the query serves retrieval, sentence selection and verification.
        query_vector = self._encode([answer.search_query])[0]
        passages = self.retriever.retrieve(
            answer.search_query, k=k or self.settings.k, source=source, embedding=query_vector.tolist()
        )
        timings["retrieve"] = time.perf_counter() - mark
        answer.passages = passages
        relevant = [p for p in passages if p.dense_score >= self.settings.min_relevance]
        if not relevant:
            timings["total"] = time.perf_counter() - started
            yield self._refusal(answer, passages)
            return

        sources = [self._source(n, p) for n, p in enumerate(relevant[: self.settings.context_papers], start=1)]
        unknown = unknown_specifics(question, [s.paper.text for s in sources])
        if unknown:
            # A name or number the question relies on ("... over SGLang?") that none of the
            # papers mentions: any answer would be about something else, so do not ask the model.
            answer.notices.append(f"None of the closest abstracts mentions {', '.join(unknown)}.")
            timings["total"] = time.perf_counter() - started
            yield self._refusal(answer, passages)
            return
        prompt_question = question if not history else f"{answer.search_query}\n(The user asked: {question})"
        try:
            messages = self._messages(prompt_question, self._context(sources, query_vector))
            draft: list[str] = []
            shown = 0  # tokens already yielded; a draft that may be the refusal sentinel is held back
            mark = time.perf_counter()
            for delta in self.llm.stream_chat(messages, max_tokens=self.settings.max_answer_tokens):
                if not draft:
                    timings["first_token"] = time.perf_counter() - started
                draft.append(delta)
                if not REFUSAL_SENTINEL.startswith("".join(draft).strip()):
                    yield from draft[shown:]
                    shown = len(draft)
            timings["generate"] = time.perf_counter() - mark
        except LLMError as exc:
            answer.retrieval_only = True
            answer.notices.append(str(exc))
            answer.text = "The language model could not answer, so here are the most relevant papers instead."
            timings["total"] = time.perf_counter() - started
            yield answer
            return

        text = "".join(draft).strip()
        known = " ".join(p.paper.text for p in passages)
        first_sentence = re.split(r"(?<=[.!?。！？])\s", text, maxsplit=1)[0]
        declined = REFUSAL_SENTINEL in text or bool(_DECLINES.search(first_sentence))
        verified = None if declined else verify(
            text, sources, self._encode, self.settings.support_threshold, known, query_vector
        )
        if verified is None or not verified.citations:
            if relevant[0].dense_score >= self.settings.extractive_threshold:
                final = self._extractive(answer, sources[0], query_vector)
            else:
                final = self._refusal(answer, passages)
            if verified is not None:
                final.flagged = verified.flagged
        else:
            answer.text, answer.citations, answer.flagged = verified.text, verified.citations, verified.flagged
            answer.timings["supported_share"] = verified.supported_share
            final = answer
        timings["total"] = time.perf_counter() - started
        yield final

    def ask(self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None) -> Answer:
        """The verified answer (the same pipeline as `stream`, without the tokens)."""
        final = None
        for event in self.stream(question, history=history, k=k, source=source):
            if isinstance(event, Answer):
                final = event
        assert final is not None
        return final
