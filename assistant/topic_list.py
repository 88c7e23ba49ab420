"""Topic lists: the papers on a topic, for a topic question in the chat and for the rows of a table.

One way to choose them (`TopicLister.choose`): every paper retrieval finds near the topic (up to
`topic_candidates`) is weighed by `topic_choice.on_topic` (a fitted rule over the embeddings and the
cross-encoder and, for papers the model has kept, the model's odds that the paper is about the
topic). Two tiers come out: the papers on the topic, each with the sentence of its abstract that puts
it there, and a short "possibly related" list of the rest, those most alike in their words to the
papers on the topic first. A topic question's topic is what it asks about in its own words; a
question in Chinese has it stated back in Chinese by the model.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import topic_choice
from .cite import make_citation
from .config import Settings
from .errors import LLMError
from .evidence import SentenceBank
from .prompting import Prompter
from .query import Query
from .replies import Reply
from .retrieve import HybridRetriever
from .intent import read_question
from .types import Citation, Passage

RELATED_MAX = 5
ODDS_REMEMBERED = 2048  # the model's odds kept by topic and paper (`TopicLister.odds`): a few kilobytes
# The most characters of the model's Chinese phrase for a topic: a longer reply is not a phrase.
TOPIC_ZH_CHARS = 30
# How much of that phrase (its Chinese characters and Latin words) must be the question's own: on 18
# Chinese topic questions the phrases the model drew from the question were 0.8-1.0 its own, its
# translations ("联邦学习" for federated learning), terms of its own ("迭代折叠" for iteration-collapse)
# and copied examples 0.1-0.4 (the evaluation README, "The topic of a Chinese question").
TOPIC_ZH_OWN_SHARE = 0.75
_UNITS = re.compile(r"[\u3400-\u9fff]|[A-Za-z0-9][A-Za-z0-9_-]*")


def _bare(phrase: str) -> str:
    """A topic phrase without quotes, end punctuation or a closing "paper(s)" / "(的)论文": the lead of
    the reply says 论文 already ("…篇论文关于“X”")."""
    phrase = phrase.strip().strip("\"'“”「」《》。：:；;，,？?！! ")
    return re.sub(r"\s*(?:(?:的)?论文|papers?)$|的$", "", phrase, flags=re.IGNORECASE).strip()


def _share_of_own_words(phrase: str, question: str) -> float:
    """The share of `phrase`'s Chinese characters and Latin words that `question` has too."""
    units = [u.lower() for u in _UNITS.findall(phrase)]
    own = {u.lower() for u in _UNITS.findall(question)}
    return sum(u in own for u in units) / len(units) if units else 0.0


@dataclass(frozen=True)
class TopicChoice:
    """The papers on a topic (best first) and those possibly related to it (at most `RELATED_MAX`); both
    empty where no candidate's sentence says the topic clearly."""

    topic: str
    members: list[topic_choice.TopicMember]
    related: list[topic_choice.TopicMember]
    present: bool  # some candidate's sentence says the topic clearly (`topic_choice.says_topic`)


class TopicLister:
    """Chooses and lists the papers on a topic."""

    def __init__(self, settings: Settings, retriever: HybridRetriever, sentences: SentenceBank,
                 rerank: topic_choice.Rerank, prompter: Prompter, llm: Callable[[], Any],
                 encode: Callable[[list[str]], np.ndarray]) -> None:
        self.settings = settings
        self.retriever = retriever
        self.sentences = sentences
        self.rerank = rerank
        self.prompter = prompter
        self.llm = llm
        self.encode = encode
        self._likeness: topic_choice.Likeness | None = None
        # The model's odds already asked, by topic and paper: a question's reading (`AnswerEngine.gather`)
        # asks what its fallback may ask again (`AnswerEngine._is_about`), as does a topic asked again.
        self._odds: dict[tuple[str, str], float | None] = {}
        self._odds_lock = threading.Lock()

    def odds(self, topic: str, passage: Passage, kept_only: bool = False) -> float | None:
        """The model's log-odds that `passage`'s paper is about `topic` ("yes" against "no"), asked
        as a question about the paper (a kept paper is not read again). None where the backend gives
        no log-probabilities, or with `kept_only` when the embedded model has not kept the paper."""
        if kept_only and self.prompter.kept(passage.paper) is False:
            return None
        key = (topic, passage.paper.id)
        with self._odds_lock:
            if key in self._odds:
                return self._odds[key]
        question = self.prompter.prompts.topic_judge.format(topic=topic)
        logprobs = self.llm().choice_logprobs(self.prompter.about(passage.paper)(question), ["yes", "no"])
        found = None if logprobs is None else logprobs["yes"] - logprobs["no"]
        with self._odds_lock:
            if len(self._odds) >= ODDS_REMEMBERED:
                self._odds.pop(next(iter(self._odds)))  # the oldest
            self._odds[key] = found
        return found

    def judge(self, topic: str, notices: list[str]) -> topic_choice.Judge | None:
        """`odds` for `topic` as `topic_choice.on_topic` asks it (papers the model has kept only), or
        None when the settings turn it off. A model that fails is asked no more for this topic."""
        if not self.settings.topic_judge:
            return None
        failed: list[LLMError] = []

        def judge(passage: Passage) -> float | None:
            if failed:
                return None
            try:
                return self.odds(topic, passage, kept_only=True)
            except LLMError as exc:
                failed.append(exc)
                notices.append(f"The model could not weigh the papers ({exc}); they were chosen without it.")
                return None

        return judge

    @staticmethod
    def topic(query: Query) -> str:
        """What a topic question asks about, in its own words without its frame ("Which papers are
        about X?" -> "X"). The model's noun phrase for it was tried and dropped: it cost 1.3 s a
        reply, and held to the question's words it chose the papers worse than the words themselves
        (recall / precision left out one topic at a time 0.813 / 0.810 against 0.844 / 0.853, the
        model's odds asked alike; the evaluation README, "The topic in the question's own words").
        A phrase in other words had chosen papers off the topic: "Contextual Learning Papers" for
        in-context learning."""
        fallback = read_question(query.english, original=query.text)
        return fallback.topic if fallback.kind == "topic" and fallback.topic else query.english.rstrip(" ?.!")

    def stated(self, query: Query, topic: str, notices: list[str]) -> str:
        """The topic as the reply states it: the question's own words (`topic`). For a question in
        Chinese, whose `topic` comes from the model's English rewrite, the model's short phrase for
        it, in the question's words; where that phrase is not mostly made of the question's own words
        and characters (a translation, a term of its own, an example of the prompt copied), `topic`
        when every word of it is the user's, else the question as typed."""
        if query.language != "zh":
            return topic
        prompt = self.prompter.prompts.topic_zh.format(question=query.text)
        try:
            llm = self.llm()  # starting the model may fail too: the list is still shown
            phrase = llm.chat([{"role": "user", "content": prompt}], max_tokens=32, **llm.line_format(TOPIC_ZH_CHARS))
        except LLMError as exc:
            notices.append(f"The model could not state the topic in Chinese ({exc}); it is quoted as asked.")
            phrase = ""
        phrase = _bare(phrase)
        if phrase and _share_of_own_words(phrase, query.text) >= TOPIC_ZH_OWN_SHARE:
            return phrase
        if _share_of_own_words(topic, query.text) == 1.0:
            return _bare(topic)
        return query.text.rstrip("？?。！! ")

    def choose(self, topic: str, source: str | None = None, notices: list[str] | None = None) -> TopicChoice:
        """The papers on `topic`, and the rest most alike to them as possibly related."""
        vector = self.encode([topic])[0]
        candidates = self.retriever.retrieve(topic, k=self.settings.topic_candidates, source=source,
                                             embedding=vector.tolist())
        fitted = topic_choice.fitted()
        threshold = fitted["threshold"] if self.settings.topic_threshold is None else self.settings.topic_threshold
        floor = fitted["related_floor"] if self.settings.related_threshold is None else self.settings.related_threshold
        members, scored = topic_choice.on_topic(topic, vector, candidates, self.sentences, self.rerank, threshold,
                                                self.judge(topic, notices if notices is not None else []))
        present = topic_choice.says_topic(m.sentence for m in scored)
        if not present:  # no paper says the topic clearly: none is on it, nor related to it, however scored
            return TopicChoice(topic, [], [], present)
        listed = {m.passage.paper.id for m in members}
        related = self.likeness().order([m for m in scored if m.passage.paper.id not in listed and m.score >= floor],
                                        members, topic)
        return TopicChoice(topic, members, related[:RELATED_MAX], present)

    def likeness(self) -> topic_choice.Likeness:
        """The collection's abstracts as TF-IDF vectors, built on first use (30 ms for 57 papers)."""
        if self._likeness is None:
            self._likeness = topic_choice.Likeness(list(self.retriever.papers.values()))
        return self._likeness

    def citation(self, number: int, member: topic_choice.TopicMember) -> Citation:
        s = self.sentences.get(member.passage.paper)
        return make_citation(number, member.passage.paper, s.raw, [member.sentence.index], member.sentence.score)

    def reply(self, query: Query, source: str | None, notices: list[str]) -> Reply | None:
        """Every paper on the topic, each cited with the sentence that puts it there, then the possibly
        related ones (not cited: shown apart). None when no paper is on the topic. What went wrong on
        the way is added to `notices`."""
        topic = self.topic(query)
        choice = self.choose(topic, source, notices)
        if not choice.present or not choice.members:
            return None
        lines, citations = [], []
        for number, member in enumerate(choice.members, start=1):
            lines.append(f"- {member.passage.paper.shown} [{number}]: {member.sentence.clean}")
            citations.append(self.citation(number, member))
        related = [self.citation(0, m) for m in choice.related]
        n = len(choice.members)
        if query.language == "zh":
            lead = f"本论文集中有 {n} 篇论文关于“{self.stated(query, topic, notices)}”："
            tail = f"\n可能相关：{'；'.join(c.paper.shown for c in related)}。" if related else ""
        else:
            papers = "One paper in the collection" if n == 1 else f"{n} papers in the collection"
            # The question's own words are quoted: they need not read as a noun phrase ("prove a regret bound").
            lead = f"{papers} {'matches' if n == 1 else 'match'} “{topic}”:"
            tail = f"\nPossibly related: {'; '.join(c.paper.shown for c in related)}." if related else ""
        return Reply(lead + "\n" + "\n".join(lines) + tail, "answered", citations, related=related,
                     listed=[m.passage for m in choice.members] + [m.passage for m in choice.related],
                     confidence=round(max(m.score for m in choice.members), 4))
