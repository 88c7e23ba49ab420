"""Answer: read the question, retrieve, decide with the judge, prompt the model, check its claims, build `Answer`.

The model drafts; the application decides and owns the citations. After retrieval, `decide` chooses
the sources and scores their sentences, and the judge (`judge`) weighs whether the evidence answers:
the model's own odds of declining on the very prompt it answers from, the kind of question, and what
the word rules found, combined by a rule fitted on data. A question the evidence does not answer gets
a reply that says so (`replies`): a near miss quoting what the paper's abstract does say (a sentence
judged not to answer), a refusal naming the closest papers, or, for a question about something else
entirely, a note that the collection does not cover it. An answer is drafted, its citations verified
(`cite`), and its claims checked against the abstracts by the model; a claim the abstract contradicts
is corrected with the abstract's own words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from . import drafts, replies
from .chunk import count_tokens
from .cite import Source, make_citation, verify
from .config import Settings
from .decide import ONE_PAPER_KINDS, READ_CANDIDATES, Decision, first_paper_leads, plan, reading_order
from .intent import asks_two, read_question
from .slots import focus_sentences
from .errors import LLMError
from .evidence import ScoredSentence, SentenceBank
from .judge import Judge
from .kinds import KindReader
from .prompting import AnswerField, Prompter, parse_quote_first
from .llm import ModelHandle
from .prompts import REFUSAL_SENTINEL, Prompts
from .query import Query, read_query, transcript, words_of
from .retrieve import HybridRetriever
from .text import has_cjk
from .topic_list import TopicLister
from .types import Answer, Evidence, Paper, Passage
from .wording import DECLINES, named_papers

_SENTINEL = re.compile(r"\s*\b" + re.escape(REFUSAL_SENTINEL).replace("_", "[_ ]") + r"\b[.!]?", re.IGNORECASE)
# A question the kind reader finds this likely to be about something else is told so, unless it names a paper.
OUT_OF_SCOPE = 0.5
NAMED_CANDIDATES = 12  # papers searched for one a question names (and both sides of a comparison)
_CHINESE_ANSWER = "请用中文回答（保留论文中的名称、数字和术语）。"


@dataclass(frozen=True)
class Gathered:
    """What retrieval found for a question: the passages (best first), the ones it names, the ones
    relevant enough to read, and the question's vector as its sentences are weighed."""

    passages: list[Passage]
    named: list[Passage]
    relevant: list[Passage]
    weigh_vector: np.ndarray


class AnswerEngine:
    """Turns a question (and history) into a verified `Answer`, streaming the draft."""

    def __init__(self, settings: Settings, retriever: HybridRetriever, *, encode: Callable[[list[str]], np.ndarray],
                 sentences: SentenceBank, prompts: Prompts, prompter: Prompter, judge: Judge, topics: TopicLister,
                 kinds: KindReader, model: ModelHandle, rerank: Callable[[str, Sequence[str]], np.ndarray]) -> None:
        self.settings = settings
        self.retriever = retriever
        self.encode = encode
        self.sentences = sentences
        self.prompts = prompts
        self.prompter = prompter
        self.judge = judge
        self.topics = topics
        self.kinds = kinds
        self.model = model
        self.rerank = rerank  # the cross-encoder: the sentences quoted for a comparison whose draft failed

    @property
    def llm(self) -> Any:
        """The language model, connected (and for the local default, started) on first use."""
        return self.model.get()

    def warm_up(self) -> None:
        """Start the model and have it read the fixed instructions once (kept in its prompt cache)."""
        system = (self.prompts.system_quote_first.format() if self.settings.answer_format == "quote_first"
                  else self.prompts.system.format(refusal=REFUSAL_SENTINEL))
        self.llm.chat([{"role": "system", "content": system}, {"role": "user", "content": "Ready?"}], max_tokens=1)

    def keep_paper(self, paper: Paper) -> None:
        """Have the model read `paper`'s whole abstract as a question about it opens, and keep the state."""
        self.prompter.keep_paper(paper)

    # -- reading the question ------------------------------------------------------------------

    def _rewrite(self, text: str, turns: list[dict[str, str]]) -> str:
        """The model's standalone English rewrite of a question (in Chinese, or a follow-up)."""
        prompt = self.prompts.condense.format(history=transcript(turns), question=text)
        reply = self.llm.chat([{"role": "user", "content": prompt}], max_tokens=64).strip()
        return reply.strip('"').splitlines()[0].strip() if reply else ""

    def read(self, question: str, history: list[dict[str, str]] | None = None) -> Query:
        """The question read once (see `query`)."""
        return read_query(
            question, history or [], max_tokens=self.settings.max_question_tokens,
            history_turns=self.settings.history_turns, rewrite_follow_ups=self.settings.follow_up_search == "rewrite",
            rewrite=self._rewrite, read_kind=self.kinds.read,
        )

    # -- replies without a draft -----------------------------------------------------------------

    def _answering(self, query: Query, source: Source, candidates: list[ScoredSentence],
                   likely: bool) -> tuple[int | None, int | None]:
        """Of `candidates` (sentences of `source`, best first): the first the judge finds answers the
        question and the first it finds does not (either None; `likely`: see `Judge.sentence_answers`),
        stopping at the first that answers (`likely`) or does not. Without log-probabilities no sentence
        is taken to answer (similarity does not tell an answering sentence from a near miss's)."""
        ask = self.prompter.about(source.paper)
        answering = not_answering = None
        for sentence in candidates:
            found = self.judge.sentence_answers(query.prompt, sentence.clean, ask, likely)
            if found and answering is None:
                answering = sentence.index
                if likely:
                    break
            elif not found and not_answering is None:
                not_answering = sentence.index
                if not likely:
                    break
        return answering, not_answering

    def _unanswered(self, query: Query, passages: list[Passage], decision: Decision | None, notices: list[str],
                    likely: bool = False) -> replies.Reply:
        """The evidence does not answer. Out of scope: say so. A paper found: a near miss quoting its closest
        sentence the judge finds does not answer (one it finds answers is the answer, for a question that
        asks two things). Else: a refusal naming the closest papers. `likely`: the answer rule found the
        question answerable and a draft failed; then the two closest sentences are judged, readily (a
        comparison quotes each side's best two instead). Failed judgements are added to `notices`."""
        language = query.language
        if query.kind.p("out_of_scope") >= OUT_OF_SCOPE and (decision is None or not decision.named):
            return replies.out_of_scope(self.prompts, len(self.retriever.papers), language)
        if decision is None:
            return replies.refusal(self.prompts, passages, language)
        if likely and decision.kind == "comparison" and decision.action == "answer" and not decision.named \
                and len(decision.sources) > 1:
            # No one sentence answers a comparison of two papers, and the draft that set them side by side did
            # not hold: each side's two sentences the cross-encoder finds answer it best, side by side (they
            # hold a fact asked for 15 of 24 sides, the two closest by `evidence` for 9: evaluation README);
            # unless the word rules found it asks what the abstracts never mention.
            return replies.extractive([(s, np.argsort(-self.rerank(query.english, s.clean_sentences))[:2].tolist())
                                       for s in decision.sources[:2]], language)
        subject = decision.subject if decision.named or decision.confidence >= self.settings.subject_threshold else None
        source = subject or decision.sources[0]
        candidates = decision.best_sentences(source, 2)
        # Sentences the word rules find carry what is asked (a figure for "how many", a name for "which
        # dataset"): never quoted as the closest to an answer they give.
        carrying = [i for i in focus_sentences(decision.intent, self.sentences.get(source.paper), query.text)
                    if decision.intent.slot not in ("mechanism", "yes_no", "other", "paper")]
        try:
            answering, not_answering = self._answering(query, source, [c for c in candidates if c.index not in carrying],
                                                       likely)
        except LLMError as exc:
            notices.append(f"The model could not check the closest sentence ({exc}).")
            answering, not_answering = None, None
        if likely:
            # The answer rule found the question answerable and the draft failed: a sentence the judge
            # finds answers, or that carries what is asked, is the answer; for a yes/no question, the
            # closest sentence (it decides the yes or the no).
            by_score = {e.index: e.score for e in decision.evidence[source.number]}

            def adds(index: int) -> bool:  # held to what a draft is held to: it gives what is asked
                return not drafts.vacuous(source.clean_sentences[index], query, decision)

            def leans_yes(index: int) -> bool:  # the model's odds that it answers are at least even
                odds = self._sentence_odds(query, source, index, notices)
                return odds is None or odds >= 0.0

            rescue = answering if answering is not None and adds(answering) else None
            if rescue is None and query.kind.kind != "which_paper":
                # Carrying words is evidence only about a paper the question is about, not the closest of
                # many, and only where the model, asked, leans to finding that the sentence answers.
                rescue = max((i for i in carrying if adds(i) and leans_yes(i)), key=by_score.get, default=None)
            if rescue is None and query.kind.kind == "which_paper" and candidates and self._is_about(query, source, passages, notices):
                # A which-paper question asks for the paper, not for a sentence that answers it: the
                # paper read first is the answer where the model finds it is about the question.
                rescue = candidates[0].index
            if rescue is None and query.kind.kind == "yes_no" and candidates and decision.action == "answer":
                rescue = candidates[0].index  # unless the word rules found the question asks what no abstract says
            if rescue is not None:
                return replies.extractive([(source, [rescue])], language, query.kind.kind == "which_paper")
        if subject is None:
            return replies.refusal(self.prompts, passages, language)
        if not likely and asks_two(query.english):
            # Two questions joined: the word rules read one asked detail, so the judge decides, at its own
            # threshold (evaluation README, "A question that asks two things").
            answered = [c.index for c in candidates if (odds := self._sentence_odds(query, source, c.index, notices))
                        is not None and odds >= self.judge.fitted.sentence_threshold]
            if answered:
                return replies.extractive([(source, answered)], language)
        # The rule found it not answerable: a sentence the judge finds answers is not quoted as the closest
        # (the rule outweighs one sentence's judgement, and a reply must not contradict itself).
        return replies.near_miss(self.prompts, source, not_answering, language)

    def _is_about(self, query: Query, source: Source, passages: list[Passage], notices: list[str]) -> bool:
        """Whether the model's log-odds that `source`'s paper is about the question reach the fitted
        `which_paper_odds` (asked as the reading of `gather` asks it; a paper not kept is not read)."""
        threshold = self.judge.fitted.which_paper_odds
        passage = next((p for p in passages if p.paper.id == source.paper.id), None)
        if threshold is None or passage is None:
            return False
        try:
            odds = self.topics.odds(query.english, passage, kept_only=True)
        except LLMError as exc:
            notices.append(f"The model could not weigh the paper ({exc}).")
            return False
        return odds is not None and odds >= threshold

    def _sentence_odds(self, query: Query, source: Source, index: int, notices: list[str]) -> float | None:
        """The judge's log-odds that sentence `index` of `source` answers the question (None: not told)."""
        try:
            return self.judge.sentence_odds(query.prompt, source.clean_sentences[index], self.prompter.about(source.paper))
        except LLMError as exc:
            notices.append(f"The model could not check the sentence ({exc}).")
            return None

    # -- the whole pipeline ----------------------------------------------------------------

    def gather(self, query: Query, k: int, source: str | None, timings: dict[str, float]) -> Gathered:
        """Retrieval for a read question: the passages, those the question names, those relevant enough."""
        mark = time.perf_counter()
        vectors = self.encode(list(dict.fromkeys([query.search, query.weighed])))
        timings["query_embedding"] = time.perf_counter() - mark
        wanted = max(k, NAMED_CANDIDATES) if query.kind.kind in ("topic", "comparison") else k
        passages = self.retriever.retrieve(query.search, k=wanted, source=source, embedding=vectors[0].tolist(),
                                           timings=timings)
        timings["retrieve"] = time.perf_counter() - mark
        # A paper the question names is relevant however its text scores ("... SCM-GRPO ...").
        named = named_papers(f"{query.text} {query.english}" if query.english != query.text else query.text, passages)
        if not named and self.settings.paper_judge and query.kind.kind in ONE_PAPER_KINDS and not query.follow_up:
            reading = time.perf_counter()
            passages = self._by_reading(query, passages)
            timings["reading"] = time.perf_counter() - reading
        relevant = [p for p in passages if p.dense_score >= self.settings.min_relevance or p in named]
        return Gathered(passages, named, relevant, vectors[-1])

    def _by_reading(self, query: Query, passages: list[Passage]) -> list[Passage]:
        """The first `READ_CANDIDATES` passages ordered by their retrieval score plus the fitted weight
        times the model's log-odds that the paper is about the question, asked after its kept abstract
        (evaluation README, "Ordering by the model's reading"); the scores stay retrieval's. Retrieval's
        order where a paper is not kept, the backend gives no log-probabilities or the model fails, and
        where the first paper leads the second by `lone_paper_margin` (`decide.choose_papers` then reads
        it alone; a reading costs 0.4-0.6 s a paper)."""
        head, weight = passages[:READ_CANDIDATES], self.judge.fitted.reading_weight
        if not weight or len(head) < 2 or first_paper_leads([p.score for p in head], self.settings.lone_paper_margin):
            return passages
        odds: list[float] = []
        for passage in head:
            try:
                found = self.topics.odds(query.english, passage, kept_only=True)
            except LLMError:
                return passages
            if found is None:
                return passages
            odds.append(found)
        order = reading_order([p.score for p in head], odds, weight)
        return [head[i] for i in order] + passages[READ_CANDIDATES:]

    def plan(self, query: Query, gathered: Gathered) -> Decision:
        """The sources the answer reads, their scored sentences and the word rules' verdict."""
        kind = "fact" if query.kind.kind == "topic" else query.kind.kind
        if len(gathered.named) >= 2 and kind != "which_paper":
            kind = "comparison"  # a question that names two papers reads both, side by side
        intent = read_question(query.english, original=query.text)
        return plan(self.settings, query.text, query.weighed, intent, kind,
                    gathered.relevant, gathered.named, gathered.weigh_vector, self.sentences, self.prompter.source,
                    self.encode, query.follow_up)

    def prompt(self, query: Query, decision: Decision) -> tuple[list[dict[str, str]], dict[str, Any], Any]:
        """The answer's request (messages, options) and its context; the first paper's part is kept."""
        question = query.prompt + (f"\n{_CHINESE_ANSWER}" if query.language == "zh" else "")
        context = self.prompter.context(decision.sources, decision.evidence, decision.kind)
        if self.settings.answer_format == "quote_first":
            messages, options = self.prompter.quote_first(question, context)
            return messages, options, context
        messages = self.prompter.messages(question, context)
        self.prompter.keep_lead(messages, context)
        return messages, {}, context

    def judged(self, query: Query, decision: Decision, messages: list[dict[str, str]]) -> tuple[float, bool]:
        """The judge's verdict: how likely the evidence answers, and whether to answer."""
        declines = None if self.settings.answer_format == "quote_first" else self.judge.decline_odds(messages)
        return self.judge.answers(decision.features(query.kind, declines))

    def events(
        self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None
    ) -> Iterator[Evidence | str | Answer]:
        """Yield one `Evidence` (the papers being read, before the model is asked), then draft tokens
        as the model writes them, then the verified `Answer`. A Chinese question that names a paper
        gets a first `Evidence` with the papers it names before the model translates it."""
        started = time.perf_counter()
        text, _ = words_of(question, self.settings.max_question_tokens)
        if has_cjk(text):
            # The model translates a Chinese question before the search (1.5-2 s). A paper it names
            # by a name only that paper uses ("EchoAttention 发现了……") is known at once: show it now.
            named = named_papers(text, self.retriever.retrieve(text, k=NAMED_CANDIDATES, source=source))
            if named:
                yield Evidence(question=question, search_query=text, passages=tuple(named),
                               sentences=tuple("" for _ in named), seconds=time.perf_counter() - started)
        query = self.read(question, history)
        # What went wrong on the way and how long each stage took: gathered as the stages run, then
        # given to the `Answer`, which is built once from the reply the stages settle on.
        notices, timings = list(query.notices), {"condense": time.perf_counter() - started}
        k = k or self.settings.k
        gathered = self.gather(query, k, source, timings)
        passages = gathered.passages[:k]
        mark = time.perf_counter()
        if not gathered.relevant or (query.kind.kind == "topic" and not gathered.named):
            yield self._evidence_event(question, query, passages, started)
            listed = self.topics.reply(query, source, notices) if gathered.relevant else None
            reply = listed or self._unanswered(query, gathered.passages, None, notices)
            timings["decide"] = time.perf_counter() - mark
        else:
            decision = self.plan(query, gathered)
            notices.extend(decision.notices)
            best = {s.paper.id: decision.best_sentences(s, 1)[0].clean
                    for s in decision.sources if decision.evidence[s.number]}
            timings["decide"] = time.perf_counter() - mark
            yield self._evidence_event(question, query, passages, started, best)
            reply = yield from self._answer(query, decision, gathered, started, timings, notices)
        timings["total"] = time.perf_counter() - started
        yield Answer(
            question=question.strip(), text=reply.text, status=reply.status, citations=list(reply.citations),
            passages=passages if reply.listed is None else reply.listed, flagged=list(reply.flagged),
            notices=notices + ([reply.notice] if reply.notice else []), timings=timings,
            search_query=query.search, intent=query.kind.kind,
            confidence=reply.confidence or 0.0, supported_share=reply.supported_share,
            prompt_tokens=reply.prompt_tokens, related=list(reply.related),
        )

    def _answer(self, query: Query, decision: Decision, gathered: Gathered, started: float,
                timings: dict[str, float], notices: list[str]) -> Iterator[str]:
        """Judge, draft (streaming its tokens) and check; returns the `Reply` settled on (a generator's
        value): the checked draft, or what stands in for it. A model that fails gives `llm_failed`."""
        prompt_tokens, confidence = 0, None
        try:
            mark = time.perf_counter()
            messages, options, _ = self.prompt(query, decision)
            prompt_tokens = sum(count_tokens(m["content"]) for m in messages)
            p, go = self.judged(query, decision, messages)
            confidence = round(p, 4)
            timings["judge"] = time.perf_counter() - mark
            if go:
                reply = yield from self._draft(query, decision, gathered, messages, options, started, timings, notices)
            else:
                reply = self._unanswered(query, gathered.passages, decision, notices)
        except LLMError as exc:
            notices.append(str(exc))
            reply = replies.llm_failed()
        return replace(reply, confidence=confidence, prompt_tokens=prompt_tokens)

    def _draft(self, query: Query, decision: Decision, gathered: Gathered, messages: list[dict[str, str]],
               options: dict[str, Any], started: float, timings: dict[str, float], notices: list[str]) -> Iterator[str]:
        """Stream the model's draft, then check it (`_after_draft`); returns the `Reply`."""
        mark = time.perf_counter()
        quote_first = self.settings.answer_format == "quote_first"
        deltas = self.llm.stream_chat(messages, max_tokens=self.settings.max_answer_tokens, **options)
        pieces: list[str] = []
        field = AnswerField()
        shown = 0  # tokens already yielded; a draft that may be the refusal sentinel is held back
        for delta in deltas:
            if not pieces:
                timings["first_token"] = time.perf_counter() - started
            pieces.append(delta)
            if quote_first:
                visible = field.feed(delta)
                if visible:
                    yield visible
            elif not REFUSAL_SENTINEL.startswith("".join(pieces).strip().upper()):
                yield from pieces[shown:]
                shown = len(pieces)
        timings["generate"] = time.perf_counter() - mark
        chosen, draft = parse_quote_first("".join(pieces), field) if quote_first else (None, "".join(pieces))
        mark = time.perf_counter()
        reply = self._after_draft(query, draft, decision, gathered.passages, gathered.weigh_vector, notices, chosen)
        timings["check"] = time.perf_counter() - mark
        return reply

    def _after_draft(self, query: Query, draft: str, decision: Decision, passages: list[Passage], vector: np.ndarray,
                     notices: list[str], chosen: dict[int, list[int]] | None = None) -> replies.Reply:
        """Verify the draft's citations and check its claims against the abstracts; else fall back to
        the abstract's own sentences, a near miss or a refusal."""
        text = draft.strip()
        first_sentence = re.split(r"(?<=[.!?。！？])\s", text, maxsplit=1)[0]
        declined = bool(_SENTINEL.match(text)) or not _SENTINEL.sub("", text).strip() or bool(DECLINES.search(first_sentence))
        text = _SENTINEL.sub("", text).strip()  # a sentinel after an answer is a fragment, not a refusal
        known = " ".join(p.paper.text for p in passages)
        verified = None if declined else verify(text, decision.sources, self.encode, self.settings.support_threshold,
                                                known, vector)
        why = ("The model found no answer in the abstracts." if declined
               else "No sentence of the draft could be matched to the abstracts." if verified is None or not verified.citations
               else "The draft restated the question, or gave no figure for a question asking how many or how much."
               if drafts.vacuous(verified.text, query, decision) else "")
        if why:
            notices.append(why)
            return self._unanswered(query, passages, decision, notices, likely=True)
        by_number = {s.number: s for s in decision.sources}
        for citation in verified.citations:
            statement = drafts.claims_of(verified.text, citation.marker)
            if not statement or drafts.copied(statement, by_number[citation.marker].clean_sentences):
                continue
            source = by_number[citation.marker]
            # A claim the draft gives a reason for that no sentence of the abstract close to it states: a premise.
            premise = next((c for c in drafts.explained(statement) if not self.judge.premise_holds(
                c, self.sentences.get(source.paper), self.encode([c])[0], self.prompter.about(source.paper))), None)
            check = None if premise else self.judge.claim(statement, self.prompter.about(citation.paper))
            if check and check.holds:
                continue
            said = "contradicts" if check and check.verdict == "false" else "does not say"
            notices.append(f"The draft said what the {citation.paper.called} abstract {said}: \u201c{premise or statement}\u201d")
            best = decision.best_sentences(source, 1)
            # A premise the abstract does not state is corrected too: the reason the draft gave for it would be
            # read as confirming it, and "does not answer" would leave it standing.
            if (premise or check.verdict == "false") and best:
                return replies.correction(self.prompts, source, best[0].index, query.language)
            return self._unanswered(query, passages, decision, notices, likely=True)
        citations = verified.citations
        if chosen:  # quote-first: the model's own picks are the quotes where the verifier cites the same paper
            citations = [
                make_citation(c.marker, c.paper, by_number[c.marker].raw_sentences, chosen[c.marker], c.support)
                if chosen.get(c.marker) else c for c in citations
            ]
        reply = replies.Reply(verified.text, "answered", citations, flagged=verified.flagged,
                              supported_share=verified.supported_share)
        if query.kind.kind == "which_paper":
            reply = replace(reply, text=drafts.name_the_paper(reply.text, reply.citations))
        if decision.kind == "comparison":
            reply = drafts.cite_both_sides(reply, decision)
        return reply

    @staticmethod
    def _evidence_event(question: str, query: Query, passages: list[Passage], started: float,
                        best: dict[str, str] | None = None) -> Evidence:
        """The papers being read, each with its sentence closest to the question (from `best`)."""
        best = best or {}
        return Evidence(
            question=question.strip(), search_query=query.search, passages=tuple(passages),
            sentences=tuple(best.get(p.paper.id, "") for p in passages), seconds=time.perf_counter() - started,
        )
