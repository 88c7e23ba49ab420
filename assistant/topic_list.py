"""Topic lists: the reply to a question that asks for every paper on a topic.

The candidates are weighed by `topic_choice.on_topic` (a fitted rule over the embeddings and the
cross-encoder, and, for papers the model has kept, the model's odds that the paper is about the
topic); the reply lists each paper on the topic with the sentence of its abstract that puts it there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import slots, topic_choice
from .cite import make_citation
from .config import Settings
from .errors import LLMError
from .evidence import SentenceBank
from .prompting import Prompter
from .query import Query
from .types import Answer, Passage

# Some sentence of the candidates must say the topic clearly: on off-topic questions ("spiking
# neural networks", "watermarking") the best sentence reaches 0.39; on all but one of the
# evaluation set's topic and multi-paper questions it is 0.59 or more.
TOPIC_PRESENT = 0.45


class TopicLister:
    """Chooses and lists the papers on a topic."""

    def __init__(self, settings: Settings, sentences: SentenceBank, rerank: topic_choice.Rerank, prompter: Prompter,
                 llm: Callable[[], Any], encode: Callable[[list[str]], np.ndarray]) -> None:
        self.settings = settings
        self.sentences = sentences
        self.rerank = rerank
        self.prompter = prompter
        self.llm = llm
        self.encode = encode

    def odds(self, topic: str, passage: Passage, kept_only: bool = False) -> float | None:
        """The model's log-odds that `passage`'s paper is about `topic` ("yes" against "no"), asked
        as a question about the paper (a kept paper is not read again). None where the backend gives
        no log-probabilities, or with `kept_only` when the embedded model has not kept the paper."""
        if kept_only and self.prompter.kept(passage.paper) is False:
            return None
        question = self.prompter.prompts.topic_judge.format(topic=topic)
        logprobs = self.llm().choice_logprobs(self.prompter.about(passage.paper)(question), ["yes", "no"])
        return None if logprobs is None else logprobs["yes"] - logprobs["no"]

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

    def reply(self, answer: Answer, query: Query, candidates: list[Passage]) -> Answer | None:
        """Every candidate paper whose own best sentence supports the topic, each cited with it (None
        when no candidate is on it)."""
        read = slots.read_question(query.english, original=query.text)
        topic = read.topic if read.kind == "topic" and read.topic else query.english.rstrip(" ?.!")
        members, scored = topic_choice.on_topic(
            topic, self.encode([topic])[0], candidates, self.sentences, self.rerank, self.settings.topic_threshold,
            self.judge(topic, answer.notices),
        )
        if not scored or max(m.sentence.score for m in scored) < TOPIC_PRESENT or not members:
            return None
        lines, citations = [], []
        for number, member in enumerate(members, start=1):
            s = self.sentences.get(member.passage.paper)
            lines.append(f"- {member.passage.paper.title} [{number}]: {member.sentence.clean}")
            citations.append(make_citation(number, member.passage.paper, s.raw, [member.sentence.index], member.sentence.score))
        if query.language == "zh":
            lead = f"本论文集中有 {len(members)} 篇论文与“{query.text.rstrip('？?。')}”有关："
        else:
            count = "One paper" if len(members) == 1 else f"{len(members)} papers"
            lead = f"{count} in the collection {'is' if len(members) == 1 else 'are'} about {topic}:"
        answer.text = lead + "\n" + "\n".join(lines)
        answer.citations = citations
        answer.confidence = round(max(m.score for m in members), 4)
        listed = {m.passage.paper.id for m in members}
        answer.passages = [m.passage for m in members] + [m.passage for m in scored if m.passage.paper.id not in listed][:2]
        answer.status = "answered"
        return answer
