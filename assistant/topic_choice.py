"""Topic choice: which candidate papers are on a topic, by a rule fitted on the evaluation's topics.

Used by topic questions in the chat and by table rows chosen by topic. Each candidate's closest
sentence to the topic (and to each alternative or example the topic names) is weighed by the
embeddings, the cross-encoder and, where the backend gives them, the model's odds; a logistic
regression fitted by the evaluation's `fit_topic.py` combines them. The papers possibly related to
a topic are those of the rest most alike in their words to the papers on it (`Likeness`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from .kinds import DATA
from .evidence import ScoredSentence, SentenceBank, score_sentences, strongest
from .types import Paper, Passage
from .wording import stems

# -- topics ---------------------------------------------------------------------------------------

TOPIC_KEYWORD_WEIGHT = 0.4  # a topic's own words in a paper's chunks count beside the fused score
# What tells a candidate on the topic from one near it, each also as its distance from the best
# candidate's (a broad topic has many near papers, a narrow one a clear gap):
# - relevance: its best sentence's similarity to the topic (or to the alternative or example of it,
#   `topic_parts`, that the sentence is closest to) + its fused retrieval score + 0.4 x its keyword
#   score relative to the best candidate's;
# - the cross-encoder's logit for its closest sentence (against the part of the topic it is closest to), and for
#   its title and abstract read whole (against the topic).
TOPIC_FEATURES = ("relevance", "relevance - best", "sentence logit", "sentence logit - best",
                  "abstract logit", "abstract logit - best")
# A logistic regression over those features ("rule" in assistant/data/topics.json), fitted by the
# evaluation's fit_topic script on its topic questions and table topics (its leave-one-topic-out
# figures are beside the weights); not tuned on single questions.

# Where a backend gives log-probabilities, the model is asked "Is this paper about <topic>?" of each
# candidate the rule above finds at least TOPIC_JUDGE_FLOOR and under TOPIC_JUDGE_CEILING likely (about
# 4 per question, against 10 read by the cross-encoder; 0.4 s each), with the paper's whole abstract
# as a question about it opens its prompt (a kept paper is not read again). Its log-odds of "yes"
# against "no", also as the distance from the best candidate's, join the features of a second
# regression fitted the same way (the model's odds alone rank candidates better than any other
# feature: the evaluation README, "Constants"). At a floor of 0.05 it was asked 7 times a question,
# for lower precision (the evaluation README, "The topic in the question's own words").
TOPIC_JUDGE_FLOOR = 0.1
# A candidate the rule finds at least this likely is listed without asking: 4.0 questions to the model
# a topic instead of 4.9, ~0.4 s, for the same recall and precision (the evaluation README, "The topic
# in the question's own words").
TOPIC_JUDGE_CEILING = 0.9
TOPIC_JUDGED_FEATURES = (*TOPIC_FEATURES, "model log-odds", "model log-odds - best")
ODDS_CLIP = 10.0  # log-odds beyond this say no more: a paper is plainly on or off the topic
Judge = Callable[[Passage], float | None]

# Some sentence of the candidates must say the topic clearly (cosine similarity): between what
# off-topic questions reach and what topic questions reach (the evaluation README, "Constants").
TOPIC_PRESENT = 0.45
TOPIC_SENTENCES_READ = 3
# Below this relevance a candidate is not read for a topic: below what any gold paper of the
# evaluation's topics reaches (the evaluation README, "Constants").
TOPIC_RELEVANCE_FLOOR = 0.7
UNRELATED_LOGIT = -12.0
Rerank = Callable[[str, Sequence[str]], np.ndarray]


@functools.cache
def fitted() -> dict[str, Any]:
    """The fitted rules ("rule", "judged_rule"), the listing threshold and the related floor."""
    data = json.loads((DATA / "topics.json").read_text(encoding="utf-8"))
    assert tuple(data["rule"]["features"]) == TOPIC_FEATURES and tuple(data["judged_rule"]["features"]) == TOPIC_JUDGED_FEATURES
    return data


@dataclass(frozen=True)
class TopicMember:
    """A candidate paper weighed for a topic: its own sentence closest to the topic, and how likely
    it is on the topic (0-1)."""

    passage: Passage
    sentence: ScoredSentence
    score: float


# A topic that names alternatives or examples ("X or Y", "X / Y", "X, e.g. A, B or C", "X (A, B)")
# is about any of them: a paper on Y alone is on it. "X and Y" in a topic reads the same way (a
# reader asking for "bandits and online learning" wants papers on either): on the 14 table topics
# this took row recall from 0.702 to 0.726 at the same precision, and no topic question changed.
_TOPIC_EXAMPLES = re.compile(r",?\s*\b(?:e\.g\.?|i\.e\.?|such as|like|including|for example|for instance)\s+"
                             r"|\s+[-\u2013\u2014:]\s+|\s*\(", re.IGNORECASE)
_TOPIC_OR = re.compile(r"\s+(?:or|and)\s+|\s*/\s*", re.IGNORECASE)


def topic_parts(topic: str) -> list[str]:
    """The topic, then each alternative ("or", "and", "/"; of two content words or more) and each example it names."""
    found = _TOPIC_EXAMPLES.search(topic)
    head, examples = (topic[: found.start()], topic[found.end():]) if found else (topic, "")
    alternatives = _TOPIC_OR.split(head)
    parts = [a.strip(" ,.?!") for a in alternatives if len(alternatives) > 1 and len(stems(a)) >= 2]
    for example in re.split(rf"{_TOPIC_OR.pattern}|,\s*|\)", examples, flags=re.IGNORECASE):
        example = re.sub(r"\betc\b\.?|^\s*(?:or|and)\s+", "", example).strip(" ,.?!()")
        if stems(example):
            parts.append(example)
    return [topic, *(p for p in dict.fromkeys(parts) if p.lower() != topic.lower())]


def topic_features(
    topic: str, topic_vector: np.ndarray, candidates: Sequence[Passage], bank: SentenceBank, rerank: Rerank
) -> list[tuple[Passage, ScoredSentence, np.ndarray]]:
    """Each candidate with the sentence that best shows the topic and its `TOPIC_FEATURES`, in candidate order."""
    bank.warm([p.paper for p in candidates])
    parts = topic_parts(topic)
    vectors = [topic_vector, *bank.encode(parts[1:])] if len(parts) > 1 else [topic_vector]
    part_stems = [set(stems(part)) for part in parts]
    top_keyword = max((p.keyword_score for p in candidates), default=0.0) or 1.0
    weighed = []  # (passage, its sentences closest to the topic, relevance)
    part_of: dict[str, int] = {}  # sentence id -> the part of the topic it is closest to
    for passage in candidates:
        sentences = bank.get(passage.paper)
        # Each sentence scored against the part of the topic it is closest to.
        by_part = [score_sentences(sentences, v, st) for v, st in zip(vectors, part_stems)]
        scored = []
        for options in zip(*by_part):
            closest_part = int(np.argmax([s.score for s in options]))
            scored.append(options[closest_part])
            part_of[options[closest_part].id] = closest_part
        if scored:
            relevance = max(s.score for s in scored) + passage.score + TOPIC_KEYWORD_WEIGHT * passage.keyword_score / top_keyword
            weighed.append((passage, strongest(scored, TOPIC_SENTENCES_READ), relevance))
    if not weighed:
        return []
    # The cross-encoder reads the closest sentences, each against the part of the topic it is closest
    # to, and the whole abstract of every candidate not far from the topic on every other count (its
    # logits bottom out near -11 for unrelated text, so the others get that without being read).
    # Reading every sentence against every part instead took 1.3 times as long, for choices no better
    # (the evaluation README, "The cross-encoder reads one pair at a time").
    read = [(p, closest) for p, closest, relevance in weighed if relevance >= TOPIC_RELEVANCE_FLOOR]
    sentences_read = [s for _, closest in read for s in closest]
    read_logits = np.zeros(len(sentences_read))
    for k, part in enumerate(parts):
        at = [i for i, s in enumerate(sentences_read) if part_of[s.id] == k]
        if at:
            read_logits[at] = rerank(part, [sentences_read[i].clean for i in at])
    sentence_logits = iter(read_logits)
    abstract_logits = iter(rerank(topic, [f"{p.paper.title}. {p.paper.text}" for p, _ in read]))
    rows = []
    for passage, closest, relevance in weighed:
        if relevance < TOPIC_RELEVANCE_FLOOR:
            rows.append((passage, closest[0], np.array([relevance, UNRELATED_LOGIT, UNRELATED_LOGIT])))
            continue
        logits = [float(next(sentence_logits)) for _ in closest]
        whole = float(next(abstract_logits))
        rows.append((passage, closest[int(np.argmax(logits))], np.array([relevance, max(logits), whole])))
    best_values = np.max([values for _, _, values in rows], axis=0)
    return [(p, s, np.column_stack([v, v - best_values]).ravel()) for p, s, v in rows]


def on_topic(
    topic: str, topic_vector: np.ndarray, candidates: Sequence[Passage], bank: SentenceBank, rerank: Rerank,
    threshold: float, judge: Judge | None = None,
) -> tuple[list[TopicMember], list[TopicMember]]:
    """The candidates on `topic` (each with the sentence that shows it), and every candidate weighed, best first.

    A candidate is on the topic when the fitted rule ("rule" of `fitted`) gives it a probability of at
    least `threshold`. With `judge` (the model's log-odds that a candidate is on the topic, or None
    where it cannot tell), the candidates the rule finds at least `TOPIC_JUDGE_FLOOR` and under
    `TOPIC_JUDGE_CEILING` likely and the model can tell about are weighed again with its odds
    ("judged_rule"), where some candidate's sentence says the topic (`says_topic`). Used by topic
    questions and by the rows of a table chosen by topic.
    """
    rows = topic_features(topic, topic_vector, candidates, bank, rerank)
    scores = [_logistic(features, fitted()["rule"]["weights"], fitted()["rule"]["bias"]) for _, _, features in rows]
    judged: list[tuple[int, float]] = []
    # A topic no candidate's sentence says clearly lists no paper whatever the odds: the model is not asked.
    if judge is not None and says_topic(s for _, s, _ in rows):
        asked = [i for i, score in enumerate(scores) if judged_by_model(score)]
        judged = [(i, o) for i in asked if (o := judge(rows[i][0])) is not None]
    if judged:
        features = judged_features([rows[i][2] for i, _ in judged], [o for _, o in judged])
        for (i, _), f in zip(judged, features):
            scores[i] = _logistic(f, fitted()["judged_rule"]["weights"], fitted()["judged_rule"]["bias"])
    scored = [TopicMember(p, s, round(score, 4)) for (p, s, _), score in zip(rows, scores)]
    scored.sort(key=lambda m: -m.score)
    return [m for m in scored if m.score >= threshold], scored


def says_topic(sentences: Iterable[ScoredSentence]) -> bool:
    """Whether some candidate's sentence says the topic clearly (cosine similarity at least
    `TOPIC_PRESENT`); where none does, no paper is on the topic nor related to it, however scored."""
    return max((s.score for s in sentences), default=0.0) >= TOPIC_PRESENT


def judged_by_model(score: float) -> bool:
    """Whether a candidate the first rule gives `score` is weighed again with the model's odds."""
    return TOPIC_JUDGE_FLOOR <= score < TOPIC_JUDGE_CEILING


def judged_features(features: Sequence[np.ndarray], odds: Sequence[float]) -> list[np.ndarray]:
    """`TOPIC_JUDGED_FEATURES` of the candidates the model was asked about."""
    clipped = np.clip(np.array(odds, dtype=float), -ODDS_CLIP, ODDS_CLIP)
    return [np.concatenate([f, [o, o - clipped.max()]]) for f, o in zip(features, clipped)]


def _logistic(features: np.ndarray, weights: Sequence[float], bias: float) -> float:
    return float(1 / (1 + np.exp(-(features @ np.array(weights) + bias))))


class Likeness:
    """How alike in their words the collection's abstracts are to the papers on a topic: TF-IDF
    (scikit-learn's, over `wording.stems`, log-scaled counts), the listed papers' mean vector plus the
    topic's own, by cosine. This is relevance feedback: a paper that shares no words with its topic
    ("making transformer inference faster or cheaper" for a paper on routed attention memory) often
    shares them with the papers found on it. The first rule gives such papers under 5%, so the
    "possibly related" tier, ordered by it, missed them. Ordered by likeness, both tiers found 0.971
    of the project's table topics' papers instead of 0.863, and no topic question or held-out table
    lost one (the evaluation README, "Possibly related: papers alike to the listed ones")."""

    def __init__(self, papers: Sequence[Paper]) -> None:
        self.rows = {paper.id: row for row, paper in enumerate(papers)}
        texts = [f"{paper.title}. {paper.abstract}" for paper in papers]
        self.vectorizer = TfidfVectorizer(analyzer=stems, sublinear_tf=True, smooth_idf=False).fit(texts)
        # The plain inverse document frequency, log(n / df): scikit-learn adds 1 to it, which keeps
        # words most abstracts share ("model", "method") weighing; with it, both tiers found 0.929 of
        # the table topics' papers instead of 0.971.
        self.vectorizer.idf_ = self.vectorizer.idf_ - 1.0
        self.matrix = self.vectorizer.transform(texts)

    def order(self, others: Sequence[TopicMember], listed: Sequence[TopicMember], topic: str) -> list[TopicMember]:
        """`others`, most alike to the `listed` papers and the topic first (as given when none is listed)."""
        rows = [self.rows[m.passage.paper.id] for m in listed if m.passage.paper.id in self.rows]
        if not rows:
            return list(others)
        # TF-IDF rows are L2-normalised, so the dot product with the centroid ranks as cosine does.
        centroid = np.asarray(self.matrix[rows].mean(axis=0)).ravel() + self.vectorizer.transform([topic]).toarray().ravel()
        known = [m.passage.paper.id for m in others if m.passage.paper.id in self.rows]
        scores = self.matrix[[self.rows[i] for i in known]] @ centroid if known else np.zeros(0)
        alike = dict(zip(known, np.asarray(scores).ravel().tolist()))
        return sorted(others, key=lambda m: -alike.get(m.passage.paper.id, 0.0))
