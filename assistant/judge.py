"""Judge: the judgements that decide what a user reads, made by models and combined by fitted rules.

- Does the evidence answer the question? A logistic rule over the model's own log-odds of declining
  (the first token of its reply to the very prompt it answers from: the prompt is read once, so the
  judgement costs one token), the kind of question (`kinds`), how close the best sentence is, whether
  the question names the paper, and what the word rules of `slots` and `wording` found. Fitted by
  the evaluation's `fit_decision.py` on the project's questions; its weights, threshold and figures on questions
  written by others are in `assistant/data/decision.json`. A backend that gives no log-probabilities
  gets the same rule fitted without the model's odds.
- Does a claim of the answer hold? The model is asked whether the statement is true according to the
  paper's abstract (the abstract is the start of the paper's kept prompt, so only the statement is
  read); below the fitted threshold it is asked whether the abstract says the opposite or nothing.
- Does the claim a draft gives a reason for hold ("A" of "A because B": a why-question's premise)? The
  model is asked, of each of the abstract's sentences closest to it, whether the claim is true according
  to that sentence; it holds when one of them is found to say so, by the threshold `fit_premise.py` fits on
  why-questions with true and false premises (`assistant/data/premise.json`). Judged against the whole
  abstract, a restated premise in the paper's words passes whether true or not.
- Does a sentence answer the question? Asked the same way, of one sentence, before a reply quotes it
  as what the abstract says instead of an answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .evidence import Sentences
from .kinds import DATA
from .prompts import REFUSAL_SENTINEL, Prompts

# The features of the answer rule, in the order of its weights.
DECISION_FEATURES = ("model declines", "rules: answer", "rules: near miss", "best sentence similarity", "paper named",
                     "p(yes_no)", "p(summary)", "p(out_of_scope)", "top dense score")
ODDS_CLIP = 10.0  # log-odds beyond this say no more
PREMISE_SENTENCES = 3  # the abstract's sentences closest to a premise that it is judged against (as fitted)
Messages = list[dict[str, str]]
Verdict = Literal["true", "false", "unknown"]


@dataclass(frozen=True)
class Rule:
    """A fitted logistic rule: p = sigmoid(weights . features + bias); `threshold` on p."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float

    def probability(self, values: dict[str, float]) -> float:
        x = np.array([values[name] for name in self.features], dtype=float)
        return float(1.0 / (1.0 + math.exp(-(float(x @ np.array(self.weights)) + self.bias))))


@dataclass(frozen=True)
class Fitted:
    """What the evaluation's `fit_decision.py` wrote: the answer rule with and without the model's odds, and the
    thresholds of the claim and sentence judgements (log-odds of "yes")."""

    with_model: Rule
    without_model: Rule
    claim_threshold: float
    sentence_threshold: float
    sentence_rescue_threshold: float
    figures: dict[str, Any]
    # How much the model's log-odds that a paper is about the question add to its retrieval score when the
    # first papers of a question that names none are ordered (`AnswerEngine.gather`): written by the
    # evaluation's fit_reading.py to assistant/data/reading.json. 0 orders by retrieval alone.
    reading_weight: float = 0.0
    # The model's least log-odds that the paper read first is about a which-paper question for that paper
    # to be the answer when the draft failed (`AnswerEngine._unanswered`); fitted by the same script.
    # None: no such rescue.
    which_paper_odds: float | None = None
    # The least log-odds that a claim the draft gives a reason for is true according to one of the
    # abstract's sentences closest to it (`Judge.premise_odds`): written by the evaluation's fit_premise.py
    # to assistant/data/premise.json.
    premise_threshold: float = 0.0

    @classmethod
    def load(cls, path: Path = DATA / "decision.json", reading: Path = DATA / "reading.json",
             premise: Path = DATA / "premise.json") -> Fitted:
        """The fitted rules and thresholds (written by the evaluation's fit_decision.py, fit_reading.py and
        fit_premise.py)."""
        data = json.loads(path.read_text(encoding="utf-8"))
        read = json.loads(reading.read_text(encoding="utf-8"))
        premise_threshold = float(json.loads(premise.read_text(encoding="utf-8"))["threshold"])

        def rule(part: dict[str, Any]) -> Rule:
            return Rule(tuple(part["features"]), tuple(part["weights"]), float(part["bias"]), float(part["threshold"]))

        return cls(rule(data["with_model"]), rule(data["without_model"]), float(data["claim_threshold"]),
                   float(data["sentence_threshold"]), float(data["sentence_rescue_threshold"]), data.get("figures", {}),
                   float(read["weight"]), read.get("which_paper_odds"), premise_threshold)


def log_odds(logprob: float) -> float:
    """log(p / (1 - p)) of a log-probability, clipped."""
    p = min(math.exp(logprob), 1 - 1e-9)
    return float(np.clip(math.log(p) - math.log1p(-p), -ODDS_CLIP, ODDS_CLIP))


@dataclass(frozen=True)
class ClaimCheck:
    """The model's verdict on a statement against one abstract: `odds` of "true" against "false"
    (None where the backend gives no log-probabilities), `holds` by the fitted threshold, and for a
    statement that does not hold whether the abstract says otherwise ("false") or nothing ("unknown")."""

    odds: float | None
    holds: bool
    verdict: Verdict


class Judge:
    """The model's judgements on prompts the answer engine builds (`messages(question, context)`)."""

    def __init__(self, llm: Callable[[], Any], prompts: Prompts, fitted: Fitted) -> None:
        self._llm = llm
        self.prompts = prompts
        self.fitted = fitted

    def _yes_odds(self, messages: Messages, choices: tuple[str, str] = ("yes", "no")) -> float | None:
        found = self._llm().choice_logprobs(messages, list(choices))
        if found is None:
            return None
        return float(np.clip(found[choices[0]] - found[choices[1]], -ODDS_CLIP, ODDS_CLIP))

    def decline_odds(self, messages: Messages) -> float | None:
        """The model's log-odds of opening its reply to `messages` with the refusal sentinel."""
        first_word = REFUSAL_SENTINEL.split("_")[0]
        found = self._llm().choice_logprobs(messages, [first_word])
        return None if found is None else log_odds(found[first_word])

    def answers(self, features: dict[str, float | None]) -> tuple[float, bool]:
        """How likely the evidence answers the question (0-1), and whether to answer, by the fitted rule
        (without the model's odds where there are none)."""
        rule = self.fitted.without_model if features.get("model declines") is None else self.fitted.with_model
        p = rule.probability({k: float(v or 0.0) for k, v in features.items()})
        return p, p >= rule.threshold

    def claim(self, statement: str, with_abstract: Callable[[str], Messages]) -> ClaimCheck:
        """Whether `statement` is true according to the abstract that `with_abstract(question)` opens
        its prompt with (a question about that paper: its kept state is used)."""
        odds = self._yes_odds(with_abstract(self.prompts.judge_claim.format(statement=statement)))
        if odds is None:
            return ClaimCheck(None, True, "true")
        if odds >= self.fitted.claim_threshold:
            return ClaimCheck(odds, True, "true")
        found = self._llm().choice_logprobs(
            with_abstract(self.prompts.judge_claim_kind.format(statement=statement)), ["false", "unknown"])
        verdict: Verdict = "false" if found and found["false"] > found["unknown"] else "unknown"
        return ClaimCheck(odds, False, verdict)

    def _premise_each(self, statement: str, sentences: Sentences, vector: np.ndarray,
                      with_abstract: Callable[[str], Messages]) -> Iterator[float | None]:
        """The model's log-odds that `statement` (embedded as `vector`) is true according to each of the
        abstract's sentences closest to it, closest first (None: no log-probabilities)."""
        for i in np.argsort(-(sentences.vectors @ vector))[:PREMISE_SENTENCES]:
            yield self._yes_odds(with_abstract(self.prompts.judge_premise.format(sentence=sentences.clean[i],
                                                                                statement=statement)))

    def premise_odds(self, statement: str, sentences: Sentences, vector: np.ndarray,
                     with_abstract: Callable[[str], Messages]) -> float | None:
        """The model's highest log-odds that `statement` is true according to one of the abstract's sentences
        closest to it (None: no log-probabilities)."""
        found = list(self._premise_each(statement, sentences, vector, with_abstract))
        return None if not found or None in found else max(found)

    def premise_holds(self, statement: str, sentences: Sentences, vector: np.ndarray,
                      with_abstract: Callable[[str], Messages]) -> bool:
        """Whether a claim the draft gives a reason for is stated by the abstract: one of its closest
        sentences reaches the fitted threshold (`premise_odds` >= it, asked only until one does: a true
        premise is most often stated by the closest sentence, and each asking costs a model call); taken to
        hold where the backend gives no log-probabilities."""
        judged = False
        for odds in self._premise_each(statement, sentences, vector, with_abstract):
            if odds is None or odds >= self.fitted.premise_threshold:
                return True
            judged = True
        return not judged

    def sentence_odds(self, question: str, sentence: str, with_abstract: Callable[[str], Messages]) -> float | None:
        """The model's log-odds that `sentence` of the abstract answers `question` (None: no log-probabilities)."""
        return self._yes_odds(with_abstract(self.prompts.judge_sentence.format(question=question, sentence=sentence)))

    def sentence_answers(self, question: str, sentence: str, with_abstract: Callable[[str], Messages],
                         likely: bool = False) -> bool | None:
        """Whether `sentence` of the abstract answers `question` (None where the backend cannot tell).
        `likely`: the answer rule found the question answerable (a draft then failed), so a sentence
        is taken to answer more readily (`sentence_rescue_threshold`)."""
        odds = self.sentence_odds(question, sentence, with_abstract)
        if odds is None:
            return None
        return odds >= (self.fitted.sentence_rescue_threshold if likely else self.fitted.sentence_threshold)
