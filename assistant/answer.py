"""Answer: condense the question, retrieve, decide on evidence, prompt the LLM, verify, build `Answer`.

The model drafts; the application decides and owns the citations. Between retrieval and the
model, `decide` reads what the question asks for and scores every sentence of the retrieved
abstracts; it refuses, replies to a near miss (the paper is found, the asked detail is not in
its abstract), lists every paper on a topic, or chooses the sentences the model answers from.
After the draft, `cite` verifies every sentence and `decide` checks that the answer carries what
was asked for. The context is lean (the best sentences of the top papers): that is what a small
local model answers best from, and what keeps its time to first token short.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import followups, slots, topic_choice, wording
from .chunk import count_tokens, truncate_tokens
from .cite import Source, has_number, make_citation, numbers_in, verify
from .config import Settings
from .decide import Decision
from .evidence import ScoredSentence, SentenceBank, question_phrases, score_sentences, spoken_to, strongest
from .slots import Intent
from .embed import encode
from .errors import LLMError, QuestionError
from .prompts import REFUSAL_SENTINEL, load_prompts
from .rerank import LazyCrossEncoder
from .retrieve import HybridRetriever
from .text import HAN, has_cjk, shorten
from .types import Answer, Citation, Evidence, Paper, Passage

_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\uac00-\ud7af]")
_SENTINEL = re.compile(r"\s*\b" + re.escape(REFUSAL_SENTINEL).replace("_", "[_ ]") + r"\b[.!]?", re.IGNORECASE)
# Some sentence of the candidates must say the topic clearly: on off-topic questions ("spiking
# neural networks", "watermarking") the best sentence reaches 0.39; on all but one of the
# evaluation set's topic and multi-paper questions it is 0.59 or more.
TOPIC_PRESENT = 0.45
_PROMPT_MARGIN = 64  # tokens kept free: tiktoken counts only approximate the model's tokenizer


class AnswerEngine:
    """Turns a question (and history) into a verified `Answer`, streaming the draft."""

    def __init__(self, settings: Settings, retriever: HybridRetriever, embedder: Any, connect: Callable[[], Any]) -> None:
        self.settings = settings
        self.retriever = retriever
        self.embedder = embedder
        self.prompts = load_prompts()
        self.sentences = SentenceBank(self._encode)
        self.rerank = LazyCrossEncoder()  # topic lists and topic tables only
        self._connect = connect
        self._llm: Any = None
        self._llm_lock = threading.Lock()  # a warm-up thread and a question must not start two servers

    @property
    def llm(self) -> Any:
        """The language model, connected (and for the local default, started) on first use; a caller
        that arrives while another thread is starting it waits for that start."""
        if self._llm is None:
            with self._llm_lock:
                if self._llm is None:
                    self._llm = self._connect()
        return self._llm

    def warm_up(self) -> None:
        """Start the model and have it read the fixed instructions once, so that the server's
        prompt cache holds them and the first question reads only its own part of the prompt."""
        if self.settings.answer_format == "quote_first":
            system = self.prompts.system_quote_first.format()
        else:
            system = self.prompts.system.format(refusal=REFUSAL_SENTINEL)
        self.llm.chat([{"role": "system", "content": system}, {"role": "user", "content": "Ready?"}], max_tokens=1)

    @property
    def llm_loaded(self) -> Any:
        """The language model if it is already connected, else None (never starts it)."""
        return self._llm

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    # -- stages ------------------------------------------------------------------------------

    def _encode(self, texts: list[str]) -> np.ndarray:
        return encode(self.embedder, texts)

    def _source(self, number: int, passage: Passage) -> Source:
        s = self.sentences.get(passage.paper)
        return Source(number, s.paper, s.raw, s.clean, s.vectors)

    def _condense(self, question: str, history: list[dict[str, str]]) -> tuple[str, str]:
        """What to search for, and the question in English (what its intent is read from).

        A Chinese question is rewritten by the model into an English query. A follow-up is, with
        `follow_up_search="conversation"`, searched for as typed when it brings its own subject
        ("Which paper prunes tree ensembles?") and together with the last exchange when it leans on
        it ("How did they evaluate it?"): no model call, so its evidence shows at once. With
        "rewrite", the model rewrites every follow-up into a standalone query first."""
        turns = history[-self.settings.history_turns :] if self.settings.history_turns else []
        if not turns and not has_cjk(question):
            return question, question
        if not has_cjk(question) and self.settings.follow_up_search == "conversation":
            return followups.conversation_query(question, turns), question
        transcript = "\n".join(f"{t.get('role', 'user')}: {str(t.get('content', ''))[:followups.TURN_CHARS]}" for t in turns) or "(none)"
        prompt = self.prompts.condense.format(history=transcript, question=question)
        query = self.llm.chat([{"role": "user", "content": prompt}], max_tokens=64)
        query = query.strip().strip('"').splitlines()[0].strip() if query.strip() else ""
        return (query, query) if query else (question, question)

    def _evidence(self, sources: list[Source], query: str, query_vector: np.ndarray) -> dict[int, list[ScoredSentence]]:
        """Every sentence of each source scored against the question, by source number."""
        question_stems = set(wording.stems(query))
        return {
            s.number: score_sentences(self.sentences.get(s.paper), query_vector, question_stems) for s in sources
        }

    def _context(
        self, sources: list[Source], evidence: dict[int, list[ScoredSentence]], intent: Intent, question: str
    ) -> list[tuple[Source, list[int]]]:
        """The sentences each source contributes to the prompt (in abstract order).

        With `whole_first_paper`, the first source gives its whole abstract: that part of the prompt
        is the same for every question about the paper, so the model's state after it is kept
        (`_keep_lead`) and a later question reads only the rest; each further source gives its best
        sentence(s), enough to name it when it is the paper asked about. Otherwise (and for a
        comparison's sources) each gives its best sentences and those that say what is asked."""
        chosen = []
        for n, source in enumerate(sources):
            if self.settings.whole_first_paper and n == 0:
                chosen.append((source, list(range(len(source.clean_sentences)))))
                continue
            few = self.settings.whole_first_paper and intent.kind != "comparison"
            per_paper = self.settings.other_paper_sentences if few else self.settings.sentences_per_paper
            picks = [e.index for e in strongest(evidence[source.number], per_paper)]
            if intent.focus and not few:
                extra = slots.focus_sentences(intent, self.sentences.get(source.paper), question)
                ranked = sorted(extra, key=lambda i: -evidence[source.number][i].score)
                picks += [i for i in ranked if i not in picks][:1]
            chosen.append((source, sorted(picks)))
        return chosen

    def _keep_lead(self, messages: list[dict[str, str]], context: list[tuple[Source, list[int]]], strict: bool = False) -> None:
        """Have the model keep its state after the instructions and the first paper's whole abstract
        (read once, then loaded from disk for every later question about the paper). The answer's
        own request then reads only the rest of the prompt."""
        if not (self.settings.whole_first_paper and context):
            return
        prefix = self._lead(messages, context)
        if prefix is None:  # the first block was cut to fit the model's window: nothing stable to keep
            return
        try:
            self.llm.keep_prefix(prefix)
        except LLMError:
            if strict:
                raise
            # Not kept: the answer's own request reads the whole prompt, and reports a real failure.

    def _lead(self, messages: list[dict[str, str]], context: list[tuple[Source, list[int]]]) -> list[dict[str, str]] | None:
        """`messages` up to the end of the first paper's block: what `_keep_lead` keeps (None when
        that block was cut to fit the model's window)."""
        user = messages[-1]["content"]
        lead = self._block(*context[0])
        end = user.find(lead)
        return None if end < 0 else [*messages[:-1], {"role": "user", "content": user[: end + len(lead)]}]

    def keep_paper(self, paper: Paper) -> None:
        """Have the model read the instructions and `paper`'s whole abstract, as a question about the
        paper opens its prompt, and keep that state (see `_keep_lead`)."""
        if not self.settings.whole_first_paper or self.settings.answer_format == "quote_first":
            return
        self.sentences.warm([paper])
        context = self._whole(paper)
        self._keep_lead(self._messages("", context), context, strict=True)

    def _whole(self, paper: Paper) -> list[tuple[Source, list[int]]]:
        """`paper`'s whole abstract as the first (and only) source of a prompt, as a question about it opens."""
        source = self._source(1, Passage(paper=paper, text="", score=1.0))
        return [(source, list(range(len(source.clean_sentences))))]

    def topic_odds(self, topic: str, passage: Passage, kept_only: bool = False) -> float | None:
        """The model's log-odds that `passage`'s paper is about `topic` ("yes" against "no"), asked
        with the paper's whole abstract as a question about it opens its prompt, so a kept paper is
        not read again. None where the backend gives no log-probabilities, or with `kept_only` when
        the embedded model has not kept the paper (reading it first would cost ~3 s)."""
        context = self._whole(passage.paper)
        messages = self._messages(self.prompts.topic_judge.format(topic=topic), context)
        if kept_only:
            prefix = self._lead(messages, context)
            if prefix is None or self.llm.has_kept(prefix) is False:
                return None
        logprobs = self.llm.choice_logprobs(messages, ["yes", "no"])
        return None if logprobs is None else logprobs["yes"] - logprobs["no"]

    def topic_judge(self, topic: str, notices: list[str]) -> topic_choice.Judge | None:
        """`topic_odds` for `topic` as `topic_choice.on_topic` asks it, or None when the settings turn it off.
        Only papers the model has kept are asked about (kept by `assistant warm`, or read ahead while
        idle): the others are weighed by the rule alone. A model that fails is asked no more for this
        topic (a notice says so)."""
        if not self.settings.topic_judge:
            return None
        failed: list[LLMError] = []

        def judge(passage: Passage) -> float | None:
            if failed:
                return None
            try:
                return self.topic_odds(topic, passage, kept_only=True)
            except LLMError as exc:
                failed.append(exc)
                notices.append(f"The model could not weigh the papers ({exc}); they were chosen without it.")
                return None

        return judge

    @staticmethod
    def _block(source: Source, indices: list[int]) -> str:
        return f"[{source.number}] {source.paper.title}: " + " ".join(source.clean_sentences[i] for i in indices)

    def _messages(self, question: str, context: list[tuple[Source, list[int]]]) -> list[dict[str, str]]:
        system = self.prompts.system.format(refusal=REFUSAL_SENTINEL)
        budget = self.llm.context_window - self.settings.max_answer_tokens - _PROMPT_MARGIN
        context = [(source, list(indices)) for source, indices in context]
        while True:
            blocks = [self._block(source, indices) for source, indices in context if indices]
            user = self.prompts.answer.format(sources="\n\n".join(blocks), question=question)
            if count_tokens(system) + count_tokens(user) <= budget or not any(i for _, i in context):
                break
            # Too long for the model's window: drop the weakest sentence of the last source.
            for source, indices in reversed(context):
                if indices:
                    indices.pop()
                    break
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    # -- replies that need no model ------------------------------------------------------------

    def _refusal(self, answer: Answer, passages: list[Passage]) -> Answer:
        closest = "; ".join(f"{p.paper.title} ({p.paper.label})" for p in passages[:3])
        answer.text = self.prompts.refusal.format(closest=f" The closest papers are: {closest}." if closest else "")
        answer.status = "not_in_abstracts"
        answer.citations, answer.flagged = [], []
        return answer

    def _near_miss(self, answer: Answer, source: Source, missing: str, evidence: list[ScoredSentence]) -> Answer:
        """The paper is found but its abstract does not give what was asked: say what it does say."""
        closest = strongest(evidence, 1)
        answer.status = "not_in_abstracts"
        answer.flagged = []
        title = source.paper.title
        if not closest:
            answer.text = f"The {title} abstract does not {missing}."
            answer.citations = []
            return answer
        sentence = closest[0]
        answer.text = (
            f"The {title} abstract [{source.number}] does not {missing}. "
            f"The closest it says is: \u201c{sentence.clean}\u201d [{source.number}]"
        )
        answer.citations = [make_citation(source.number, source.paper, source.raw_sentences, [sentence.index], sentence.score)]
        return answer

    def _extractive(self, answer: Answer, source: Source, indices: list[int], intent: Intent) -> Answer:
        """The model declined although the evidence answers the question: answer with those sentences."""
        indices = sorted(indices)
        body = " ".join(source.clean_sentences[i] for i in indices)
        if HAN.search(answer.question) and not _KANA_HANGUL.search(answer.question):
            # A Chinese question gets its frame in Chinese; the quoted sentences stay the abstract's.
            lead = f"可能是 {source.paper.title} [{source.number}]。" if intent.kind == "which_paper" else ""
            lead += "摘要原文："
        else:
            lead = f"This looks like {source.paper.title} [{source.number}]: " if intent.kind == "which_paper" else ""
        answer.text = f"{lead}{body} [{source.number}]"
        answer.citations = [make_citation(source.number, source.paper, source.raw_sentences, indices)]
        answer.flagged = []
        answer.status = "answered"
        answer.notices.append("Answered with the abstract's own sentences: the model declined, or its wording could not be verified.")
        return answer

    def _topic_list(self, answer: Answer, intent: Intent, candidates: list[Passage], query_vector: np.ndarray) -> Answer | None:
        """Every candidate paper whose own best sentence supports the topic, each cited with it."""
        topic_vector = self._encode([intent.topic])[0] if intent.topic else query_vector
        members, scored = topic_choice.on_topic(
            intent.topic, topic_vector, candidates, self.sentences, self.rerank, self.settings.topic_threshold,
            self.topic_judge(intent.topic, answer.notices),
        )
        if not scored:
            return None
        answer.confidence = round(max(m.sentence.score for m in scored), 4)
        if answer.confidence < TOPIC_PRESENT or not members:
            return None
        lines, citations = [], []
        for number, member in enumerate(members, start=1):
            s = self.sentences.get(member.passage.paper)
            lines.append(f"- {member.passage.paper.title} [{number}]: {member.sentence.clean}")
            citations.append(make_citation(number, member.passage.paper, s.raw, [member.sentence.index], member.sentence.score))
        count = "One paper" if len(members) == 1 else f"{len(members)} papers"
        answer.text = f"{count} in the collection {'is' if len(members) == 1 else 'are'} about {intent.topic or 'this'}:\n" + "\n".join(lines)
        answer.citations = citations
        listed = {m.passage.paper.id for m in members}
        answer.passages = [m.passage for m in members] + [m.passage for m in scored if m.passage.paper.id not in listed][:2]
        answer.status = "answered"
        return answer

    # -- the whole pipeline ----------------------------------------------------------------

    def events(
        self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None
    ) -> Iterator[Evidence | str | Answer]:
        """Yield one `Evidence` (the papers being read, before the model is asked), then draft tokens
        as the model writes them, then the verified `Answer`. A Chinese question that names a paper
        gets a first `Evidence` with the papers it names before the model translates it."""
        started = time.perf_counter()
        asked = (question or "").strip()
        question = wording.sanitize(asked)
        if not question:
            raise QuestionError("The question is empty. Type a question about the papers.")
        answer = Answer(question=asked, text="")
        if count_tokens(question) > self.settings.max_question_tokens:
            question = truncate_tokens(question, self.settings.max_question_tokens)
            answer.notices.append(
                f"The question was longer than {self.settings.max_question_tokens} tokens and was truncated."
            )
        timings = answer.timings
        if has_cjk(question):
            # The model translates a Chinese question before the search (1.5-2 s). A paper it names
            # by a name only that paper uses ("EchoAttention 发现了……") is known at once: show it now.
            named = wording.named_papers(question, self.retriever.retrieve(question, k=self.settings.topic_candidates, source=source))
            if named:
                yield Evidence(question=asked, search_query=question, passages=tuple(named),
                               sentences=tuple("" for _ in named), seconds=time.perf_counter() - started)
        try:
            answer.search_query, english = self._condense(question, list(history or []))
        except LLMError as exc:
            answer.search_query = english = question
            answer.notices.append(f"Could not rewrite the follow-up question ({exc}); searched for it as typed.")
        timings["condense"] = time.perf_counter() - started
        intent = slots.read_question(english, original=question)
        answer.intent = intent.kind

        mark = time.perf_counter()
        # One embedding of the query serves retrieval, sentence selection and verification. A
        # follow-up searched for with its conversation has its sentences weighed against itself and
        # the question it follows: the last answer, which finds the paper, would pull them towards
        # what was already said.
        weighed = answer.search_query if answer.search_query == english else followups.with_last_question(english, history or [])
        vectors = self._encode(list(dict.fromkeys([answer.search_query, weighed])))
        query_vector, weigh_vector = vectors[0], vectors[-1]
        mark_vector = time.perf_counter()
        k = k or self.settings.k
        # Topic lists and comparisons look wider: every paper of a topic, both sides of a comparison.
        wanted = max(k, self.settings.topic_candidates) if intent.kind in ("topic", "comparison") else k
        passages = self.retriever.retrieve(
            answer.search_query, k=wanted, source=source, embedding=query_vector.tolist(), timings=timings
        )
        timings["retrieve"] = time.perf_counter() - mark
        timings["query_embedding"] = mark_vector - mark  # the retriever was handed the vector computed here
        answer.passages = passages[:k]
        # A paper the question names is relevant however its text scores ("... SCM-GRPO ...").
        # (Only its own words: a follow-up searched for with the last answer does not name that paper.)
        named = wording.named_papers(f"{question} {english}" if english != question else question, passages)
        relevant = [p for p in passages if p.dense_score >= self.settings.min_relevance or p in named]
        if not relevant:
            yield self._evidence_event(answer, started)
            timings["total"] = time.perf_counter() - started
            yield self._refusal(answer, passages)
            return

        if intent.kind == "topic":
            yield self._evidence_event(answer, started)
            listed = self._topic_list(answer, intent, passages, query_vector)
            timings["decide"] = time.perf_counter() - mark
            timings["total"] = time.perf_counter() - started
            yield listed if listed is not None else self._refusal(answer, passages)
            return

        decision = self._decide(question, weighed, intent, relevant, named, weigh_vector, bool(history))
        decision.english = english
        answer.confidence = round(decision.confidence, 4)
        sources, evidence = decision.sources, decision.evidence
        timings["decide"] = time.perf_counter() - mark
        best = {s.paper.id: strongest(evidence[s.number], 1)[0].clean for s in sources if evidence[s.number]}
        yield self._evidence_event(answer, started, best)
        if decision.action == "refuse":
            answer.notices.extend(decision.notices)
            timings["total"] = time.perf_counter() - started
            yield self._refusal(answer, passages)
            return
        if decision.action == "near_miss":  # its text says what the abstract does not give
            timings["total"] = time.perf_counter() - started
            yield self._near_miss(answer, decision.subject, decision.missing, evidence[decision.subject.number])
            return

        prompt_question = _prompt_question(question, english, answer.search_query, history)
        context = self._context(sources, evidence, intent, question)
        chosen: dict[int, list[int]] | None = None
        try:
            mark = time.perf_counter()
            if self.settings.answer_format == "quote_first":
                messages, options = self._quote_first(prompt_question, context)
            else:
                messages, options = self._messages(prompt_question, context), {}
            answer.prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
            if self.settings.answer_format != "quote_first":
                kept_from = time.perf_counter()  # after `_messages`, which starts the model on first use
                self._keep_lead(messages, context)
                timings["keep"] = time.perf_counter() - kept_from
            deltas = self.llm.stream_chat(messages, max_tokens=self.settings.max_answer_tokens, **options)
            if self.settings.answer_format == "quote_first":
                reply: list[str] = []
                field = _AnswerField()
                for delta in deltas:
                    if not reply:
                        timings["first_token"] = time.perf_counter() - started
                    reply.append(delta)
                    shown_text = field.feed(delta)
                    if shown_text:
                        yield shown_text
                chosen, text = _parse_quote_first("".join(reply), field)
            else:
                draft: list[str] = []
                shown = 0  # tokens already yielded; a draft that may be the refusal sentinel is held back
                for delta in deltas:
                    if not draft:
                        timings["first_token"] = time.perf_counter() - started
                    draft.append(delta)
                    if not REFUSAL_SENTINEL.startswith("".join(draft).strip().upper()):
                        yield from draft[shown:]
                        shown = len(draft)
                text = "".join(draft)
            timings["generate"] = time.perf_counter() - mark
        except LLMError as exc:
            answer.status = "llm_failed"
            answer.notices.append(str(exc))
            answer.text = "The language model could not answer, so here are the most relevant papers instead."
            timings["total"] = time.perf_counter() - started
            yield answer
            return

        final = self._after_draft(answer, text, decision, passages, weigh_vector, chosen)
        timings["total"] = time.perf_counter() - started
        yield final

    def _decide(
        self, question: str, query: str, intent: Intent, relevant: list[Passage], named: list[Passage],
        query_vector: np.ndarray, follow_up: bool = False,
    ) -> Decision:
        """Before the model: refuse, reply to a near miss, or answer from the chosen sources."""
        context = relevant[: self.settings.context_papers]
        if named and intent.kind == "fact" and not follow_up:
            # A fact about the paper the question names: only its sentences are read (the others
            # could not be cited for it anyway), and the model reads a third of the prompt. Not for
            # a follow-up, whose paper comes from the model's rewrite: there the other papers stay
            # (with one paper, 2 of the 13 follow-ups of the evaluation set lost their answer).
            context = named[:1]
        elif named:  # the papers the question names come first
            context = list(dict.fromkeys([*named[: 2 if intent.kind == "comparison" else 1], *context]))
            context = context[: max(len(named[:2]), self.settings.context_papers)]
        if intent.kind == "comparison":
            # A comparison reads the two papers it compares (named, else the two closest): a third
            # paper's sentences would cost the model ~1 s of reading and could only be cited wrongly.
            context = context[:2]
        if self.settings.whole_first_paper and intent.kind != "comparison" and len(context) > 1:
            # A first paper far ahead of the others is the one asked about: the others' sentences
            # would only be read (time) and, now and then, cited instead of it.
            if context[0].score - max(p.score for p in context[1:]) >= self.settings.lone_paper_margin:
                context = context[:1]
        self.sentences.warm([p.paper for p in context])
        sources = [self._source(n, p) for n, p in enumerate(context, start=1)]
        evidence = self._evidence(sources, query, query_vector)
        plan = Decision("answer", intent, sources, evidence, question=question)
        top_scores = {s.number: max((e.score for e in evidence[s.number]), default=0.0) for s in sources}
        subject = sources[0] if named and intent.kind in ("fact", "which_paper") else None
        plan.subject = subject or max(sources, key=lambda s: top_scores[s.number])
        plan.named = subject is not None
        plan.confidence = max(top_scores.values())

        # Names and numbers the question relies on ("... over SGLang?") must be in the paper it is
        # about (or, when it names none, in one of the closest): otherwise any answer would be
        # about something else.
        unknown = wording.unknown_specifics(
            question, [subject.paper.text] if subject else [s.paper.text for s in sources], strict=subject is not None
        )
        if unknown:
            plan.notices.append(
                f"The {subject.paper.title} abstract does not mention {', '.join(unknown)}." if subject
                else f"None of the closest abstracts mentions {', '.join(unknown)}."
            )
            if subject is not None:
                plan.action, plan.missing = "near_miss", f"mention {', '.join(unknown)}"
            else:
                plan.action = "refuse"
            return plan
        if subject is None and intent.kind == "which_paper":
            # "Which paper does speech recognition?" when none does: the closest abstract is near the
            # question's wording but says none of its phrases (measured on the evaluation set's
            # which-paper questions, answerable in everyday words and off-topic).
            phrases = question_phrases(query)
            if phrases and spoken_to(self._encode(phrases), self.sentences.get(sources[0].paper)) < self.settings.phrase_threshold:
                plan.action = "refuse"
                plan.notices.append("The closest abstract does not speak to any part of the question.")
                return plan
        # The paper a detail question is about: the one it names, or one whose sentence is this close.
        about = subject or (plan.subject if plan.confidence >= self.settings.subject_threshold else None)
        # The slot and focus of a question in another language are read from the model's English
        # rewrite, which may ask for more than the user did: the checks after the draft still apply.
        translated = question != query and has_cjk(question)
        if about is not None and not translated and intent.kind == "fact" and intent.slot not in ("mechanism", "yes_no", "other", "paper"):
            if not slots.focus_sentences(intent, self.sentences.get(about.paper), question):
                # No sentence of the paper it is about says what is asked ("the batch size") and
                # carries it (a number for "how many", a name for "which model").
                plan.action, plan.missing, plan.subject = "near_miss", slots.asked_for(intent), about
                plan.notices.append(f"The {about.paper.title} abstract does not {plan.missing}.")
        elif subject is not None and not translated and intent.kind == "fact" and intent.focus and intent.slot == "other":
            if slots.missing_focus(intent, self.sentences.get(subject.paper)):
                plan.action, plan.missing = "near_miss", slots.asked_for(intent)
                plan.notices.append(f"The {subject.paper.title} abstract does not {plan.missing}.")
        elif subject is None and plan.confidence < self.settings.answer_threshold:
            # No paper is named and no sentence of the closest papers comes near the question.
            plan.action = "refuse"
            plan.notices.append("No sentence of the closest abstracts is close enough to the question to answer from.")
        return plan

    @staticmethod
    def _evidence_event(answer: Answer, started: float, best: dict[str, str] | None = None) -> Evidence:
        """The papers being read, each with its sentence closest to the question (from `best`)."""
        best = best or {}
        return Evidence(
            question=answer.question,
            search_query=answer.search_query,
            passages=tuple(answer.passages),
            sentences=tuple(best.get(p.paper.id, "") for p in answer.passages),
            seconds=time.perf_counter() - started,
        )

    def _quote_first(
        self, question: str, context: list[tuple[Source, list[int]]]
    ) -> tuple[list[dict[str, str]], dict[str, Any]]:
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
        return messages, {"response_format": self.llm.json_format(schema)}

    def _after_draft(
        self, answer: Answer, draft: str, plan: Decision, passages: list[Passage], query_vector: np.ndarray,
        chosen: dict[int, list[int]] | None = None,
    ) -> Answer:
        """Verify the draft's citations and check that it answers what was asked; else fall back.

        `chosen` (quote-first replies) holds the sentences the model picked as evidence, by source
        number; they become the quotes. An empty answer means the model found none.
        """
        intent, sources = plan.intent, plan.sources
        text = draft.strip()
        first_sentence = re.split(r"(?<=[.!?。！？])\s", text, maxsplit=1)[0]
        declined = bool(_SENTINEL.match(text)) or not _SENTINEL.sub("", text).strip() or bool(wording.DECLINES.search(first_sentence))
        text = _SENTINEL.sub("", text).strip()  # a sentinel after an answer is a fragment, not a refusal
        known = " ".join(p.paper.text for p in passages)
        verified = None if declined else verify(
            text, sources, self._encode, self.settings.support_threshold, known, query_vector
        )
        answered = verified is not None and bool(verified.citations)
        if answered and intent.slot != "yes_no" and slots.adds_nothing(verified.text, f"{plan.question} {plan.english}"):
            answered = False  # it restates the question ("yes" is the content of a yes/no answer)
        if answered and intent.slot in ("number", "count"):
            # "How many X" answered without a number, or with a number of something else, is not an
            # answer: the figure must be in the answer, and X in the answer or the passage it cites.
            cited = " ".join(c.quote for c in verified.citations)
            answered = slots.has_slot(intent.slot, verified.text) and slots.states(intent, f"{verified.text} {cited}")
        if answered and chosen:
            # The model's own picks are the quotes where the verifier cites the same paper.
            by_number = {s.number: s for s in sources}
            verified.citations = [
                make_citation(c.marker, c.paper, by_number[c.marker].raw_sentences, chosen[c.marker], c.support)
                if chosen.get(c.marker) else c
                for c in verified.citations
            ]
        if answered:
            answer.text, answer.citations, answer.flagged = verified.text, verified.citations, verified.flagged
            answer.supported_share = verified.supported_share
            if intent.kind == "which_paper":
                answer.text = _name_the_paper(answer.text, answer.citations)
            if intent.kind == "comparison":
                self._cite_both_sides(answer, plan)
            return answer
        # The model declined, or wrote something that does not carry what was asked.
        fallback = self._answering_sentences(plan, "" if declined else text)
        if fallback is not None:
            source, indices = fallback
            return self._extractive(answer, source, indices, intent)
        subject_score = max((e.score for e in plan.evidence[plan.subject.number]), default=0.0) if plan.subject else 0.0
        if plan.subject is not None and intent.kind != "which_paper" and subject_score >= self.settings.subject_threshold:
            missing = slots.asked_for(intent)
            return self._near_miss(answer, plan.subject, missing, plan.evidence[plan.subject.number])
        return self._refusal(answer, passages)

    def _answering_sentences(self, plan: Decision, draft: str) -> tuple[Source, list[int]] | None:
        """Sentences that answer the question on their own, for when the draft is not an answer.

        - a which-paper question: the subject's closest sentence names the paper;
        - a draft whose figures the verifier could not attach ("2.42× [1]"): the one sentence
          that holds all of them, if it carries the asked slot;
        - a question whose asked slot can be checked (a number, a count, a dataset, a baseline, a
          name): the sentences that carry the slot (and say its focus, when it has one).
        Anything else stays unanswered: a sentence merely near the question is not an answer to it.
        """
        intent = plan.intent
        threshold = self.settings.extractive_threshold
        # The paper the question names, or else the one retrieval ranks first: a lower-ranked paper
        # whose one sentence happens to score higher was the wrong paper in every such case of the
        # evaluation set.
        subject = plan.subject if plan.named else plan.sources[0]
        if intent.kind == "which_paper" and plan.evidence[subject.number]:
            top = strongest(plan.evidence[subject.number], 1)[0]
            return (subject, [top.index]) if top.score >= self.settings.paper_threshold else None
        checkable = intent.slot in ("number", "count", "dataset", "baseline", "name")
        ordered = [subject, *(s for s in plan.sources if s is not subject)]
        figures = numbers_in(draft)
        if figures and (checkable or intent.slot == "other"):
            for source in ordered:
                holding = [e for e in plan.evidence[source.number] if all(has_number(e.clean, n) for n in figures)]
                if holding:
                    top = max(holding, key=lambda e: e.score)
                    if top.score >= threshold - 0.1 and slots.states(intent, top.clean):
                        return source, [top.index]
        if not checkable:
            if not plan.named and intent.slot != "paper" and plan.evidence[subject.number]:
                # A paper described in other words, whose abstract the model would not answer from:
                # its closest sentences, when they are close enough to stand as the answer.
                top = strongest(plan.evidence[subject.number], 2)
                if top[0].score >= threshold:
                    return subject, [e.index for e in top if e.score >= threshold - 0.1]
            return None
        if intent.slot in ("number", "count") and not intent.focus:
            return None  # "how many?" of what: no sentence can be checked to say it
        evidence = plan.evidence[subject.number]
        candidates = slots.focus_sentences(intent, self.sentences.get(subject.paper), plan.question)
        ranked = sorted(candidates, key=lambda i: -evidence[i].score)
        # On the evaluation set, sentences that carry the slot of an answerable question score 0.41
        # and up against long everyday-words questions; those of unanswerable ones that get this
        # far, 0.70 and up.
        if ranked and evidence[ranked[0]].score >= self.settings.focus_threshold:
            return subject, ranked[:1] if not intent.focus else ranked[:2]
        return None

    def _cite_both_sides(self, answer: Answer, plan: Decision) -> None:
        """A comparison cites both papers: add the best sentence of a side the draft left out."""
        cited = {c.marker for c in answer.citations}
        for source in plan.sources[:2]:
            if source.number in cited or not plan.evidence[source.number]:
                continue
            top = strongest(plan.evidence[source.number], 1)[0]
            answer.text += f" {source.paper.title}: {top.clean} [{source.number}]"
            answer.citations.append(make_citation(source.number, source.paper, source.raw_sentences, [top.index], top.score))
        answer.citations.sort(key=lambda c: c.marker)


def _prompt_question(question: str, english: str, searched: str, history: list[dict[str, str]] | None) -> str:
    """The question as the model reads it: a rewritten follow-up with what the user typed; one that
    leans on the conversation with the question it follows (so "it" has something to refer to)."""
    if not history:
        return question
    if english != question:
        return f"{english}\n(The user asked: {question})"
    if searched != question:
        earlier = followups.last_said(history, "user")
        return f"{question}\n(This follows the earlier question: {shorten(earlier, 300)})" if earlier else question
    return question


def _name_the_paper(text: str, citations: list[Citation]) -> str:
    """A which-paper answer names the paper: the model often writes "Source reports ..." or starts
    with the verb ("replaces normalizing flows ... [1]"), as the sources are numbered for it."""
    if not citations or any(c.paper.title.lower() in text.lower() for c in citations):
        return text
    first = min(citations, key=lambda c: text.find(f"[{c.marker}]") % (len(text) + 1))
    title = first.paper.title
    placeholder = re.match(r"(?:the )?source\b(?: \[\d+\])?", text, re.IGNORECASE)
    if placeholder:
        return title + text[placeholder.end():]
    if text[:1].islower():
        return f"{title} {text}"
    return f"{title} [{first.marker}]: {text}"


class _AnswerField:
    """Streams the value of the "answer" field out of a JSON object while it is being generated.

    Hand-written: the stack has no incremental JSON parser, and only this one string field of a
    flat object needs decoding (escapes included) as it arrives.
    """

    _ESCAPES = {"n": "\n", "t": "\t", "r": "", '"': '"', "\\": "\\", "/": "/", "b": "", "f": ""}

    def __init__(self) -> None:
        self.buffer = ""
        self.position: int | None = None
        self.done = False
        self.text = ""

    def feed(self, delta: str) -> str:
        """Add generated text; return the newly decoded part of the answer."""
        self.buffer += delta
        if self.done:
            return ""
        if self.position is None:
            match = re.search(r'"answer"\s*:\s*"', self.buffer)
            if not match:
                return ""
            self.position = match.end()
        out, i, buffer = [], self.position, self.buffer
        while i < len(buffer):
            c = buffer[i]
            if c == "\\":
                if i + 1 >= len(buffer) or (buffer[i + 1] == "u" and i + 6 > len(buffer)):
                    break  # the escape is not complete yet
                if buffer[i + 1] == "u":
                    out.append(chr(int(buffer[i + 2: i + 6], 16)))
                    i += 6
                else:
                    out.append(self._ESCAPES.get(buffer[i + 1], buffer[i + 1]))
                    i += 2
                continue
            if c == '"':
                self.done = True
                i += 1
                break
            out.append(c)
            i += 1
        self.position = i
        piece = "".join(out)
        self.text += piece
        return piece


def _parse_quote_first(reply: str, field: _AnswerField) -> tuple[dict[int, list[int]], str]:
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
