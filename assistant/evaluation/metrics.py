"""Pure metric functions: hit@k, MRR, recall@k, citation precision/recall, number-aware fact
matching, refusal rates, percentiles, quote and sentinel checks, and the score of one question.

Unit-tested on hand-made cases; nothing here runs the assistant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from ..text import NUMBER_WORDS, clean_markup, without_markers
from .dataset import paper_key

TOP_K = 5  # hit@5 / recall@5 cut-off; also the number of papers retrieved in retrieval-only runs
RETRIEVAL_METRICS = ("hit@1", "hit@5", "mrr", "recall@5")

ANSWER_METRICS = (
    "gold_cited", "citation_precision", "citation_recall", "fact_recall",
    "refusal_rate", "false_refusal_rate", "supported_share", "near_miss_named",
    "contradiction", "premise_accepted", "language_match", "recall_with_related", "vacuous",
)
LATENCY_STAGES = ("retrieve", "first_token", "total")


def gold_rank(retrieved: Sequence[str], gold: Collection[str]) -> int | None:
    """1-based rank of the first gold paper in the ranked list, or None."""
    for rank, key in enumerate(retrieved, start=1):
        if key in gold:
            return rank
    return None


def hit_at(retrieved: Sequence[str], gold: Collection[str], k: int) -> float | None:
    """1.0 when a gold paper is among the first k, else 0.0; None without gold papers."""
    if not gold:
        return None
    rank = gold_rank(retrieved, gold)
    return float(rank is not None and rank <= k)


def reciprocal_rank(retrieved: Sequence[str], gold: Collection[str]) -> float | None:
    """1 / rank of the first gold paper (0.0 when none was retrieved); None without gold."""
    if not gold:
        return None
    rank = gold_rank(retrieved, gold)
    return 1.0 / rank if rank else 0.0


def recall_at(retrieved: Sequence[str], gold: Collection[str], k: int) -> float | None:
    """Share of the gold papers among the first k; None without gold."""
    if not gold:
        return None
    return len(set(retrieved[:k]) & set(gold)) / len(set(gold))


def citation_scores(cited: Collection[str], gold: Collection[str]) -> dict[str, float | None]:
    """gold_cited (any cited paper is gold), precision (cited that are gold / cited), recall (gold cited / gold).

    Precision is None when nothing is cited; all three are None without gold papers.
    """
    cited, gold = set(cited), set(gold)
    if not gold:
        return {"gold_cited": None, "citation_precision": None, "citation_recall": None}
    hits = len(cited & gold)
    return {
        "gold_cited": float(hits > 0),
        "citation_precision": hits / len(cited) if cited else None,
        "citation_recall": hits / len(gold),
    }


_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2015\u2212]")


_NUMBER_WORD = re.compile(r"\b(%s)\b" % "|".join(NUMBER_WORDS))


def normalise(text: str) -> str:
    """Text for fact matching: markup stripped, lowercase, ×→x, dashes→-, spaces collapsed; and so
    that a fact is found however its words are written, numbers one to twenty as digits ("seven" →
    "7"), a hyphen between words as a space ("polynomial-inequality" → "polynomial inequality"), and
    a word's closing "s" dropped ("distribution shifts" → "distribution shift")."""
    out = clean_markup(without_markers(text))  # LaTeX/Markdown; also turns \times into ×
    out = _DASHES.sub("-", out.lower()).replace("×", "x")
    out = re.sub(r"\s+", " ", out)
    out = re.sub(r"(?<=\d) (?=x\b|%)", "", out)  # "1.25 x" → "1.25x", "50 %" → "50%"
    out = re.sub(r"(?<=[\dx%]) ?- ?(?=\d)", "-", out)  # "1.25x - 2.81x" → "1.25x-2.81x"
    out = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", out)  # 1,000 → 1000
    out = _NUMBER_WORD.sub(lambda m: str(NUMBER_WORDS.index(m.group(1))), out)
    out = re.sub(r"(?<=[a-z])-(?=[a-z])", " ", out)
    out = re.sub(r"\b([a-z]{3,})s\b", r"\1", out)
    return out.strip()


def fact_found(fact: str, text: str) -> bool:
    """Whether `fact` is stated in `text`, after normalising both.

    A fact containing a number must match on number boundaries: "2.81" is not found in
    "12.81" nor in "2.815" (but is in "2.81×" or "2.81."). Other facts are substrings.
    """
    needle, haystack = normalise(fact), normalise(text)
    if not needle:
        return False
    if not any(c.isdigit() for c in needle):
        return needle in haystack
    before = r"(?<!\d)(?<!\d[.,])" if needle[0].isdigit() else ""
    after = r"(?!\d)(?![.,]\d)" if needle[-1].isdigit() else ""
    return re.search(before + re.escape(needle) + after, haystack) is not None


def fact_recall(facts: Sequence[str], text: str) -> float | None:
    """Share of the facts stated in the text; None when the question lists no facts."""
    if not facts:
        return None
    return sum(fact_found(f, text) for f in facts) / len(facts)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None when there are none."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def refusal_rates(refused: Sequence[bool], answerable: Sequence[bool]) -> tuple[float | None, float | None]:
    """(refusal rate on unanswerable questions, false-refusal rate on answerable ones)."""
    on_unanswerable = [r for r, a in zip(refused, answerable) if not a]
    on_answerable = [r for r, a in zip(refused, answerable) if a]
    return mean(map(float, on_unanswerable)), mean(map(float, on_answerable))


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0-100, linear interpolation) of the values that are not None."""
    kept = sorted(float(v) for v in values if v is not None)
    if not kept:
        return None
    position = (len(kept) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return kept[low] + (kept[high] - kept[low]) * (position - low)


def quote_problems(citations: Sequence[dict[str, Any]], abstracts: dict[str, str]) -> int:
    """Citation passages that are not a verbatim, contiguous passage of their abstract at their place.

    `citations` are in `Answer.to_json()` form; `abstracts` maps paper ids to abstracts as written.
    """
    bad = 0
    for c in citations:
        abstract = abstracts.get(c["paper"]["id"], "")
        spans = c.get("spans") or []
        if not spans:  # the quote reads as displayed (markup cleaned)
            bad += c.get("quote", "") not in clean_markup(abstract)
        bad += sum(abstract[s["start"]: s["end"]] != s["text"] or not s["text"] for s in spans)
    return bad


def has_sentinel(text: str) -> bool:
    """Whether an answer shows a fragment of the refusal sentinel ("... [1]. Not_IN_SOURCES")."""
    return re.search(r"not[_ ]in[_ ]sources", text, re.IGNORECASE) is not None


def score_question(
    question: dict[str, Any], retrieved: Sequence[str], answer: dict[str, Any] | None = None
) -> dict[str, float | bool | None]:
    """All per-question scores. `answer` (full runs) has text, refused, cited, supported_share, failed.

    A refused, failed or errored answer states no facts and cites nothing; supported_share is
    n/a for refusals (the verifier did not run). For near-miss questions `near_miss_named` says
    whether the refusal cites the paper the question is about (the honest "it does not give X").
    """
    gold = [paper_key(g["source"], g["ordinal"]) for g in question["gold"]]
    scores: dict[str, float | bool | None] = {
        "gold_rank": gold_rank(retrieved, gold),
        "hit@1": hit_at(retrieved, gold, 1),
        "hit@5": hit_at(retrieved, gold, 5),
        "mrr": reciprocal_rank(retrieved, gold),
        "recall@5": recall_at(retrieved, gold, 5),
    }
    if answer is None:
        return scores
    silent = answer["refused"] or answer.get("failed", False)
    scores.update(citation_scores([] if silent else answer["cited"], gold))
    scores["fact_recall"] = fact_recall(question["facts"], "" if silent else answer["text"])
    scores["refused"] = bool(answer["refused"])
    scores["supported_share"] = None if answer["refused"] else answer.get("supported_share")
    about = [paper_key(g["source"], g["ordinal"]) for g in question.get("about", [])]
    scores["near_miss_named"] = (
        float(bool(answer["refused"]) and bool(set(about) & set(answer["cited"]))) if about and not gold else None
    )
    # A near miss answered as if the abstract gave the detail, citing the paper it is about: what is
    # said can only restate what the abstract does give ("fine-tuned from a large language model").
    scores["vacuous"] = float(not silent and bool(set(about) & set(answer["cited"]))) if about and not gold else None
    scores["recall_with_related"] = (
        len(set(gold) & set([] if silent else [*answer["cited"], *answer.get("related", [])])) / len(set(gold))
        if gold and question["type"] in ("topic", "multi_paper") else None
    )
    scores["contradiction"] = contradiction(question, answer)
    scores["premise_accepted"] = (
        float(not answer["refused"] and not answer.get("failed", False) and not scores["fact_recall"])
        if question["type"] == "false_premise" else None
    )
    scores["language_match"] = language_match(question["question"], answer["text"], answer.get("quotes", []))
    return scores


def contradiction(question: dict[str, Any], answer: dict[str, Any]) -> float | None:
    """1.0 when a refusal ("the abstract does not give X") quotes a sentence that states the answer: a
    fact of an answerable question is in one of its quotes. None where it cannot be told (no facts)."""
    if not question["gold"] or not question["facts"]:
        return None
    if not answer["refused"]:
        return 0.0
    quoted = " ".join(answer.get("quotes", []))
    return float(any(fact_found(f, quoted) for f in question["facts"]))


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def language_match(question: str, text: str, quotes: Sequence[str] = ()) -> float | None:
    """For a question in Chinese: 1.0 when the reply, leaving its verbatim quotes aside, is written in
    Chinese too (it has Chinese characters of its own). None for other questions."""
    if not _CJK.search(question):
        return None
    own = text
    for quote in quotes:
        own = own.replace(quote, " ")
    own = re.sub(r"[\u201c\"][^\u201d\"]*[\u201d\"]", " ", own)  # quoted passages are the abstract's words
    return float(bool(_CJK.search(own)))
