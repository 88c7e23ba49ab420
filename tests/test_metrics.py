"""Evaluation metrics on hand-made cases: retrieval ranks, citations, facts found in an answer,
refusal rates, percentiles."""

from __future__ import annotations

import pytest

from assistant import evaluation as ev
from assistant.evaluation import (
    citation_scores,
    fact_found,
    fact_recall,
    hit_at,
    percentile,
    recall_at,
    reciprocal_rank,
    refusal_rates,
)

A, B, C, D, E, F = (ev.paper_key("file.txt", i) for i in range(1, 7))


# -- retrieval metrics -----------------------------------------------------------------------


def test_hit_at_k() -> None:
    ranked = [A, B, C, D, E, F]
    assert hit_at(ranked, [A], 1) == 1.0
    assert hit_at(ranked, [B], 1) == 0.0
    assert hit_at(ranked, [E], 5) == 1.0
    assert hit_at(ranked, [F], 5) == 0.0
    assert hit_at(ranked, ["elsewhere#1"], 5) == 0.0
    assert hit_at(ranked, [], 5) is None  # unanswerable: not applicable


def test_reciprocal_rank_uses_the_first_gold_paper() -> None:
    ranked = [A, B, C, D, E]
    assert reciprocal_rank(ranked, [A]) == 1.0
    assert reciprocal_rank(ranked, [C]) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, [D, B]) == 0.5  # B at rank 2 comes first
    assert reciprocal_rank(ranked, [F]) == 0.0
    assert reciprocal_rank(ranked, []) is None


def test_recall_at_5_for_multi_paper_questions() -> None:
    ranked = [A, B, C, D, E, F]
    assert recall_at(ranked, [A, C], 5) == 1.0
    assert recall_at(ranked, [A, F], 5) == 0.5  # F is sixth
    assert recall_at(ranked, [B, E, F, "x#1"], 5) == 0.5
    assert recall_at(ranked, [F], 5) == 0.0
    assert recall_at(ranked, [], 5) is None


# -- answer metrics --------------------------------------------------------------------------


def test_citation_precision_and_recall() -> None:
    assert citation_scores([A], [A]) == {"gold_cited": 1.0, "citation_precision": 1.0, "citation_recall": 1.0}
    assert citation_scores([A, B], [A]) == {"gold_cited": 1.0, "citation_precision": 0.5, "citation_recall": 1.0}
    assert citation_scores([A, B, C], [A, D]) == {
        "gold_cited": 1.0, "citation_precision": pytest.approx(1 / 3), "citation_recall": 0.5}
    assert citation_scores([B], [A]) == {"gold_cited": 0.0, "citation_precision": 0.0, "citation_recall": 0.0}
    # Nothing cited: precision is not defined, recall and cited-gold are zero.
    assert citation_scores([], [A]) == {"gold_cited": 0.0, "citation_precision": None, "citation_recall": 0.0}
    assert citation_scores([A, A], [A, B])["citation_recall"] == 0.5  # a paper cited twice counts once
    assert citation_scores([A], []) == {"gold_cited": None, "citation_precision": None, "citation_recall": None}


@pytest.mark.parametrize(
    ("fact", "text", "found"),
    [
        ("2.81", "a speedup of 2.81 times", True),
        ("2.81", "a speedup of 12.81 times", False),
        ("2.81", "a speedup of 2.815 times", False),
        ("2.81", "up to 2.81.", True),
        ("2.81", "between 1.25x and 2.81x", True),
        ("2.81", "ranges 1.25–2.81", True),
        ("1.25×", "a 1.25x speedup", True),
        ("1.25x", "a 1.25× speedup", True),
        ("1.25×", "a $1.25\\times$ speedup", True),
        ("1.25×", "a 1.25 × speedup", True),
        ("1.25×–2.81×", "throughput improves by 1.25x-2.81x [1]", True),
        ("1.25×–2.81×", "throughput improves by 1.25× — 2.81× [1].", True),
        ("1.25×–2.81×", "throughput improves by 1.25×", False),
        ("82.5%", "peak memory falls by **82.5%** [1]", True),
        ("82.5%", "peak memory falls by 82.5 % [1]", True),
        ("82.5%", "peak memory falls by 182.5%", False),
        ("50%", "it saves 50.5% of the cost", False),
        ("0.709", "an AUROC of 0.7091", False),
        ("0.709", "an AUROC of 10.709", False),
        ("nearly 800 students", "Nearly  800 students took part", True),
        ("1000 samples", "1,000 samples", True),
        ("T^{3/4}", "regret of $T^{3/4}$", True),
        ("132M parameter", "a 132M parameter model", True),
        ("Gumbel-Softmax", "via a gumbel–softmax relaxation", True),
        ("Gumbel-Softmax", "via a softmax", False),
        ("University of California, Irvine", "at the university of california, irvine", True),
        ("keystone neurons", "*keystone* neurons", True),
        ("seven", "7 LLM judges", True),
        ("ten models", "it evaluates 10 models", True),
        ("ten models", "it evaluates 1 models", False),
        ("polynomial-inequality proving", "Polynomial inequality proving", True),
        ("distribution shifts", "robust to distribution shift", True),
        ("distribution shifts", "robust to distribution drift", False),
    ],
)
def test_number_aware_fact_matching(fact: str, text: str, found: bool) -> None:
    assert fact_found(fact, text) is found


def test_fact_recall_is_the_share_of_facts_stated() -> None:
    assert fact_recall(["0.709", "0.676"], "It reaches 0.709 AUROC [1].") == 0.5
    assert fact_recall(["0.709", "0.676"], "0.709 versus 0.676 [1]") == 1.0
    assert fact_recall([], "anything") is None


def test_refusal_and_false_refusal_rates() -> None:
    refused = [True, False, True, True, False]
    answerable = [False, False, True, False, True]
    on_unanswerable, on_answerable = refusal_rates(refused, answerable)
    assert on_unanswerable == pytest.approx(2 / 3)
    assert on_answerable == 0.5
    assert refusal_rates([True], [True]) == (None, 1.0)
    assert refusal_rates([], []) == (None, None)


def test_percentiles() -> None:
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([0, 10], 95) == pytest.approx(9.5)
    assert percentile([None, 4.0], 95) == 4.0
    assert percentile([None], 50) is None
