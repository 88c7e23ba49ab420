"""Runs questions through the public API (`Assistant.retrieve`, `Assistant.ask`) and records
one result per question, so what is measured is what a user gets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..followups import conversation_query
from ..text import has_cjk
from .dataset import paper_key
from .metrics import TOP_K, has_sentinel, quote_problems, score_question

Progress = Callable[[int, int], None]


def retrieval_query(question: dict[str, Any]) -> str:
    """What a retrieval-only run searches for.

    An English follow-up is searched for as the assistant searches for it (with the last exchange
    when it leans on it). A Chinese one, which the assistant has the LLM rewrite, is searched for
    together with its conversation; other questions as typed.
    """
    if not question["history"]:
        return question["question"]
    if not has_cjk(question["question"]):
        return conversation_query(question["question"], question["history"])
    return " ".join([*(str(t.get("content", "")) for t in question["history"]), question["question"]])


def _retrieved(passages: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"paper": p.paper.id, "title": p.paper.title, "score": round(float(p.score), 4)}
        for p in passages
    ]


def _round(timings: dict[str, Any]) -> dict[str, float]:
    return {k: round(float(v), 4) for k, v in timings.items() if isinstance(v, (int, float))}


def _base_result(question: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": question["id"], "type": question["type"], "question": question["question"],
        "history": question["history"], "gold": [paper_key(g["source"], g["ordinal"]) for g in question["gold"]],
        "facts": question["facts"],
    }


def run_eval(
    assistant: Any, questions: Sequence[dict[str, Any]], retrieval_only: bool = False, progress: Progress | None = None
) -> list[dict[str, Any]]:
    """Run each question through the assistant; one result dict per question (see eval/README.md).

    Retrieval-only runs call `assistant.retrieve` (k=5, no LLM). Full runs call
    `assistant.ask(question, history)`, start the LLM before the first question so its load
    time is not counted as latency, and score the passages the answer was built from.
    An `AssistantError` on one question is recorded in its result and the run goes on.
    """
    from ..errors import AssistantError

    if not retrieval_only:
        _ = assistant.llm  # start / connect the model up front
    results: list[dict[str, Any]] = []
    for done, question in enumerate(questions, start=1):
        result = _base_result(question)
        started = time.perf_counter()
        try:
            if retrieval_only:
                query = retrieval_query(question)
                passages = assistant.retrieve(query, k=TOP_K)
                elapsed = time.perf_counter() - started
                result.update(search_query=query, retrieved=_retrieved(passages), timings=_round(
                    {"retrieve": elapsed, "total": elapsed}))
                result["scores"] = score_question(question, [r["paper"] for r in result["retrieved"]])
            else:
                answer = assistant.ask(question["question"], history=question["history"] or None)
                timings = dict(answer.timings)
                timings["wall"] = time.perf_counter() - started
                data = answer.to_json()
                abstracts = {c.paper.id: c.paper.abstract for c in answer.citations}
                result.update(
                    search_query=answer.search_query, retrieved=_retrieved(answer.passages), answer=answer.text,
                    refused=answer.refused, llm_failed=answer.llm_failed, status=answer.status,
                    intent=answer.intent, confidence=answer.confidence, citations=data["citations"],
                    flagged=data["flagged"], notices=data["notices"], timings=_round(timings),
                    bad_quotes=quote_problems(data["citations"], abstracts), sentinel=has_sentinel(answer.text),
                )
                result["scores"] = score_question(question, [r["paper"] for r in result["retrieved"]], {
                    "text": answer.text, "refused": answer.refused, "failed": answer.retrieval_only,
                    "cited": [c["paper"]["id"] for c in data["citations"]],
                    "supported_share": answer.supported_share, "quotes": [c["quote"] for c in data["citations"]],
                    "related": [c["paper"]["id"] for c in data["related"]],
                })
        except AssistantError as exc:
            elapsed = time.perf_counter() - started
            result.update(error=f"{type(exc).__name__}: {exc}", retrieved=[], timings=_round({"total": elapsed}))
            failed = None if retrieval_only else {"text": "", "refused": False, "failed": True, "cited": []}
            result["scores"] = score_question(question, [], failed)
            if not retrieval_only:
                result.update(answer="", refused=False, llm_failed=True, citations=[], flagged=[], notices=[],
                              bad_quotes=0, sentinel=False)
        results.append(result)
        if progress:
            progress(done, len(questions))
    return results
