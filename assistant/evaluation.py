"""Evaluation harness: measures retrieval, answers, citations, refusals and latency on eval/questions.jsonl.

The only module of the assistant that reads the evaluation set (written by hand from the abstracts; see
eval/README.md). It drives the system through its public API alone — `Assistant.retrieve`
and `Assistant.ask` and the `Passage` / `Answer` values they return — so what it measures
is what a user gets. The set must never reach prompts, retrieval or any other code path.

Pieces, usable on their own:
  * pure metric functions (hit@k, MRR, recall@k, citation precision/recall, number-aware
    fact matching, rates, percentiles), unit-tested on hand-made cases;
  * `run_eval` (per-question results), `summarize` (figures per question type plus "all"),
    `write_report` (results.jsonl, summary.json, summary.md and PNG plots);
  * `check` (the regression gate against eval/baseline.json) and the `eval` subcommand
    (`add_cli`, registered by `assistant.cli`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .config import PROJECT_ROOT, Settings
from .text import clean_markup

QUESTIONS_PATH = PROJECT_ROOT / "eval" / "questions.jsonl"
BASELINE_PATH = PROJECT_ROOT / "eval" / "baseline.json"
REPORTS_DIR = PROJECT_ROOT / "eval" / "reports"

TYPES = ("fact", "method", "paraphrase", "which_paper", "multi_paper", "topic", "comparison", "unanswerable",
         "near_miss", "follow_up", "chinese")
UNANSWERABLE = ("unanswerable", "near_miss")  # no gold papers: the right outcome is a refusal
TOP_K = 5  # hit@5 / recall@5 cut-off; also the number of papers retrieved in retrieval-only runs

RETRIEVAL_METRICS = ("hit@1", "hit@5", "mrr", "recall@5")
ANSWER_METRICS = (
    "gold_cited", "citation_precision", "citation_recall", "fact_recall",
    "refusal_rate", "false_refusal_rate", "supported_share", "near_miss_named",
)
# The regression gate looks only at metrics where higher is better. A rise in false refusals
# shows up there too, as a drop in gold_cited / fact_recall.
GATED_METRICS = ("hit@1", "hit@5", "mrr", "recall@5", "gold_cited", "citation_precision",
                 "citation_recall", "fact_recall", "refusal_rate", "supported_share", "near_miss_named")
LATENCY_STAGES = ("retrieve", "first_token", "total")
DEFAULT_TOLERANCE = {"retrieval-only": (0.02, 0.10), "full": (0.10, None)}  # ("all" row, each type row)

Progress = Callable[[int, int], None]


# -- the evaluation set ----------------------------------------------------------------------


def paper_key(source: str, ordinal: int) -> str:
    """How results name a paper: corpus file and 1-based position, e.g. `001_x.txt#6`."""
    return f"{source}#{ordinal}"


def load_questions(path: Path | str = QUESTIONS_PATH) -> list[dict[str, Any]]:
    """Read and validate the evaluation set (one JSON object per line)."""
    path = Path(path)
    questions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {number}: invalid JSON ({exc.msg})") from exc
        missing = {"id", "question", "type", "gold", "facts", "history"} - set(q)
        if missing:
            raise ValueError(f"{path}, line {number}: missing keys {sorted(missing)}")
        if q["type"] not in TYPES:
            raise ValueError(f"{path}, line {number}: unknown type {q['type']!r} (one of {', '.join(TYPES)})")
        if q["id"] in seen:
            raise ValueError(f"{path}, line {number}: duplicate id {q['id']}")
        if not all(isinstance(g, dict) and {"source", "ordinal"} <= set(g) for g in q["gold"]):
            raise ValueError(f"{path}, line {number}: gold must be a list of {{source, ordinal}}")
        if (q["type"] in UNANSWERABLE) != (not q["gold"]):
            raise ValueError(f"{path}, line {number}: exactly the unanswerable and near_miss questions have no gold papers")
        if q["type"] == "near_miss" and not q.get("about"):
            raise ValueError(f"{path}, line {number}: a near_miss question names the paper it is 'about'")
        seen.add(q["id"])
        questions.append(q)
    return questions


def select_questions(
    questions: list[dict[str, Any]], ids: Collection[str] | None = None, types: Collection[str] | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The questions a run covers: by id, then by type, then the first `limit` (file order kept)."""
    if ids:
        unknown = set(ids) - {q["id"] for q in questions}
        if unknown:
            raise ValueError(f"unknown question ids: {', '.join(sorted(unknown))}")
        questions = [q for q in questions if q["id"] in set(ids)]
    if types:
        unknown = set(types) - set(TYPES)
        if unknown:
            raise ValueError(f"unknown question types: {', '.join(sorted(unknown))} (known: {', '.join(TYPES)})")
        questions = [q for q in questions if q["type"] in set(types)]
    return questions[:limit] if limit else questions


# -- metrics: pure functions ------------------------------------------------------------------


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


_MARKER = re.compile(r"\[\d+(?:\s*[,;]\s*\d+)*\]")
_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2015\u2212]")


def normalise(text: str) -> str:
    """Text for fact matching: markup stripped, lowercase, ×→x, dashes→-, spaces collapsed."""
    out = clean_markup(_MARKER.sub(" ", text))  # LaTeX/Markdown; also turns \times into ×
    out = _DASHES.sub("-", out.lower()).replace("×", "x")
    out = re.sub(r"\s+", " ", out)
    out = re.sub(r"(?<=\d) (?=x\b|%)", "", out)  # "1.25 x" → "1.25x", "50 %" → "50%"
    out = re.sub(r"(?<=[\dx%]) ?- ?(?=\d)", "-", out)  # "1.25x - 2.81x" → "1.25x-2.81x"
    out = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", out)  # 1,000 → 1000
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
    """Citation passages that are not a verbatim, contiguous passage of their abstract at their place."""
    bad = 0
    for c in citations:
        abstract = abstracts.get(paper_key(c["source"], c["ordinal"]), "")
        spans = c.get("spans") or []
        if not spans:
            bad += c.get("quote", "") not in abstract
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
        float(bool(answer["refused"]) and bool(set(about) & set(answer["cited"]))) if about else None
    )
    return scores


# -- running ---------------------------------------------------------------------------------


def retrieval_query(question: dict[str, Any]) -> str:
    """What a retrieval-only run searches for.

    Full runs search for what the assistant itself searches for (the LLM rewrites follow-ups
    and non-English questions). Without the LLM, a follow-up is searched for together with
    its conversation — the text the rewriter would read; other questions as typed.
    """
    if not question["history"]:
        return question["question"]
    return " ".join([*(str(t.get("content", "")) for t in question["history"]), question["question"]])


def _retrieved(passages: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"paper": paper_key(p.paper.source, p.paper.ordinal), "title": p.paper.title, "score": round(float(p.score), 4)}
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
    from .errors import AssistantError

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
                citations = [
                    {"marker": c.marker, "source": c.paper.source, "ordinal": c.paper.ordinal,
                     "title": c.paper.title, "quote": c.quote,
                     "spans": [{"start": s.start, "end": s.end, "text": s.text} for s in c.spans]}
                    for c in answer.citations
                ]
                abstracts = {paper_key(c.paper.source, c.paper.ordinal): c.paper.abstract for c in answer.citations}
                result.update(
                    search_query=answer.search_query, retrieved=_retrieved(answer.passages), answer=answer.text,
                    refused=answer.refused, llm_failed=answer.retrieval_only, status=answer.status,
                    intent=answer.intent, confidence=answer.confidence, citations=citations,
                    flagged=list(answer.flagged), notices=list(answer.notices), timings=_round(timings),
                    bad_quotes=quote_problems(citations, abstracts), sentinel=has_sentinel(answer.text),
                )
                result["scores"] = score_question(question, [r["paper"] for r in result["retrieved"]], {
                    "text": answer.text, "refused": answer.refused, "failed": answer.retrieval_only,
                    "cited": [paper_key(c["source"], c["ordinal"]) for c in citations],
                    "supported_share": answer.timings.get("supported_share"),
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


# -- summarising -----------------------------------------------------------------------------


def _row(results: Sequence[dict[str, Any]], full: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"n": len(results)}
    for metric in RETRIEVAL_METRICS:
        row[metric] = mean(r["scores"].get(metric) for r in results)
    if full:
        for metric in ("gold_cited", "citation_precision", "citation_recall", "fact_recall", "supported_share",
                       "near_miss_named"):
            row[metric] = mean(r["scores"].get(metric) for r in results)
        row["bad_quotes"] = sum(int(r.get("bad_quotes", 0)) for r in results)
        row["sentinel"] = sum(bool(r.get("sentinel")) for r in results)
        row["refusal_rate"], row["false_refusal_rate"] = refusal_rates(
            [bool(r.get("refused")) for r in results], [bool(r["gold"]) for r in results]
        )
        row["llm_failed"] = sum(bool(r.get("llm_failed")) for r in results)
    row["errors"] = sum("error" in r for r in results)
    for stage in LATENCY_STAGES:
        values = [r["timings"].get(stage) for r in results]
        row[f"{stage}_p50"], row[f"{stage}_p95"] = percentile(values, 50), percentile(values, 95)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}


def summarize(
    results: Sequence[dict[str, Any]], settings: Settings | None = None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Figures per question type and for "all"; metrics that do not apply to a row are None."""
    full = any("answer" in r for r in results)
    present = [t for t in TYPES if any(r["type"] == t for r in results)]
    rows = {t: _row([r for r in results if r["type"] == t], full) for t in present}
    rows["all"] = _row(results, full)
    summary: dict[str, Any] = {
        "mode": "full" if full else "retrieval-only",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "questions": len(results),
        "ids": [r["id"] for r in results],
        "rows": rows,
    }
    if settings is not None:
        summary["settings"] = settings_snapshot(settings)
    if meta:
        summary.update(meta)
    return summary


def settings_snapshot(settings: Settings) -> dict[str, Any]:
    """The settings that shape the figures (never API keys)."""
    names = ("embedding", "fusion", "dense_weight", "k", "candidates", "min_relevance", "chunk_size", "chunk_overlap",
             "llm_backend", "llm_model", "llm_base_url", "context_papers", "sentences_per_paper", "support_threshold",
             "extractive_threshold", "temperature", "max_answer_tokens")
    return {name: (str(v) if isinstance(v := getattr(settings, name), Path) else v) for name in names}


_LABELS = {
    "n": "n", "hit@1": "hit@1", "hit@5": "hit@5", "mrr": "MRR", "recall@5": "recall@5",
    "gold_cited": "cited gold", "citation_precision": "cite prec", "citation_recall": "cite rec",
    "fact_recall": "facts", "refusal_rate": "refusal", "false_refusal_rate": "false ref",
    "supported_share": "supported", "near_miss_named": "near-miss named", "bad_quotes": "bad quotes",
    "sentinel": "sentinel", "retrieve_p50": "retr p50 s", "retrieve_p95": "retr p95 s",
    "first_token_p50": "1st tok p50 s", "first_token_p95": "1st tok p95 s", "total_p50": "total p50 s",
    "total_p95": "total p95 s",
}


def _cell(value: Any, seconds: bool = False) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.2f}" if seconds and value >= 1 else f"{value:.3f}"


def format_table(summary: dict[str, Any]) -> str:
    """Markdown tables of the summary: retrieval, then (full runs) answers and latency."""
    full = summary["mode"] == "full"
    groups = [["n", *RETRIEVAL_METRICS, "retrieve_p50", "retrieve_p95"]]
    if full:
        groups.append(["n", "gold_cited", "citation_precision", "citation_recall", "fact_recall", "refusal_rate",
                       "false_refusal_rate", "supported_share", "near_miss_named", "bad_quotes", "sentinel"])
        groups.append(["n", "first_token_p50", "first_token_p95", "total_p50", "total_p95"])
    tables = []
    for columns in groups:
        lines = ["| type | " + " | ".join(_LABELS[c] for c in columns) + " |",
                 "|---|" + "---:|" * len(columns)]
        for name, row in summary["rows"].items():
            cells = [_cell(row.get(c), seconds=c.endswith(("_p50", "_p95"))) for c in columns]
            lines.append(f"| {'**all**' if name == 'all' else name} | " + " | ".join(cells) + " |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


# -- the report ------------------------------------------------------------------------------


def _misses(results: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for r in results:
        s = r["scores"]
        problems = []
        if "error" in r:
            problems.append(r["error"])
        if s.get("hit@5") == 0.0:
            problems.append("no gold paper in the top 5")
        elif s.get("recall@5") is not None and s["recall@5"] < 1:
            problems.append(f"recall@5 {s['recall@5']:.2f}")
        if "answer" in r:
            if r["gold"] and r.get("refused"):
                problems.append("refused an answerable question")
            if not r["gold"] and not r.get("refused"):
                problems.append("answered an unanswerable question")
            if r["gold"] and not r.get("refused") and s.get("gold_cited") == 0.0:
                problems.append("cited no gold paper")
            if s.get("fact_recall") is not None and s["fact_recall"] < 1 and not r.get("refused"):
                missing = [f for f in r["facts"] if not fact_found(f, r["answer"])]
                problems.append("facts missing: " + "; ".join(missing))
        if problems:
            lines.append(f"- **{r['id']}** ({r['type']}) {r['question'][:90]} — " + "; ".join(problems))
    return lines


def coverage_curve(results: Sequence[dict[str, Any]]) -> list[dict[str, float]]:
    """Answered-precision against coverage as the answer threshold on `confidence` rises.

    At threshold t a question counts as answered when the assistant answered it and its
    confidence is at least t. Precision: answered questions that are answerable and cite a gold
    paper, over all answered. Coverage: answerable questions answered with a gold citation, over
    all answerable questions. Full runs only; an empty list otherwise.
    """
    rows = [r for r in results if "answer" in r and "error" not in r]
    if not rows:
        return []
    answerable = [r for r in rows if r["gold"]]
    points = []
    for t in sorted({0.0, *(round(float(r.get("confidence", 0.0)), 2) for r in rows)}):
        answered = [r for r in rows if not r.get("refused") and not r.get("llm_failed") and r.get("confidence", 0) >= t]
        right = [r for r in answered if r["gold"] and r["scores"].get("gold_cited")]
        points.append({
            "threshold": t,
            "answered": len(answered),
            "precision": round(len(right) / len(answered), 4) if answered else 1.0,
            "coverage": round(len(right) / len(answerable), 4) if answerable else 0.0,
        })
    return points


def _plots(results: Sequence[dict[str, Any]], summary: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    full = summary["mode"] == "full"
    rows = summary["rows"]
    names = list(rows)
    metrics = ["hit@5", "mrr", "recall@5"] + (["gold_cited", "fact_recall", "refusal_rate"] if full else [])
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(names)), 4.2))
    width = 0.8 / len(metrics)
    for i, metric in enumerate(metrics):
        values = [rows[n].get(metric) for n in names]
        xs = [j + (i - (len(metrics) - 1) / 2) * width for j in range(len(names))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=_LABELS[metric])
    ax.set_xticks(range(len(names)), [f"{n}\n(n={rows[n]['n']})" for n in names], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score")
    ax.set_title(f"Per question type ({summary['mode']}, {summary['questions']} questions)")
    ax.legend(fontsize=8, ncol=len(metrics), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = folder / "per_type.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    stages = [s for s in LATENCY_STAGES if any(r["timings"].get(s) is not None for r in results)]
    if not full:
        stages = [s for s in stages if s != "total"]  # the same as retrieve without an LLM
    fig, ax = plt.subplots(figsize=(6.5, 4))
    data = [[r["timings"][s] for r in results if r["timings"].get(s) is not None] for s in stages]
    if data:
        ax.boxplot(data, tick_labels=stages, showfliers=True)
    ax.set_ylabel("seconds")
    if data and min(min(d) for d in data) > 0 and max(max(d) for d in data) / min(min(d) for d in data) > 50:
        ax.set_yscale("log")
    ax.set_title(f"Latency per question ({summary['mode']})")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = folder / "latency.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    curve = coverage_curve(results)
    if curve:
        fig, ax = plt.subplots(figsize=(5.5, 4.2))
        ax.plot([p["coverage"] for p in curve], [p["precision"] for p in curve], marker=".")
        for p in curve[:: max(1, len(curve) // 8)]:
            ax.annotate(f"{p['threshold']:.2f}", (p["coverage"], p["precision"]), fontsize=7)
        ax.set_xlabel("coverage (answerable questions answered with a gold citation)")
        ax.set_ylabel("answered precision")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_title("Precision against coverage over the answer threshold")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = folder / "coverage.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def _curve_table(results: Sequence[dict[str, Any]]) -> list[str]:
    curve = coverage_curve(results)
    if not curve:
        return []
    lines = ["## Precision against coverage over the answer threshold", "",
             "| threshold | answered | precision | coverage |", "|---:|---:|---:|---:|"]
    step = max(1, len(curve) // 15)
    for p in curve[::step] + ([curve[-1]] if (len(curve) - 1) % step else []):
        lines.append(f"| {p['threshold']:.2f} | {p['answered']} | {p['precision']:.3f} | {p['coverage']:.3f} |")
    return [*lines, ""]


def write_report(results: Sequence[dict[str, Any]], summary: dict[str, Any], out_dir: Path | str = REPORTS_DIR) -> Path:
    """Write <out_dir>/<timestamp>/ with results.jsonl, summary.json, summary.md, per_type.png, latency.png."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    folder = Path(out_dir) / stamp
    suffix = 1
    while folder.exists():
        suffix += 1
        folder = Path(out_dir) / f"{stamp}-{suffix}"
    folder.mkdir(parents=True)
    with open(folder / "results.jsonl", "w", encoding="utf-8") as handle:
        for result in results:
            handle.write(json.dumps(result, ensure_ascii=False) + "\n")
    (folder / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    settings = summary.get("settings", {})
    header = [
        f"# Evaluation: {summary['mode']}, {summary['questions']} questions",
        "",
        f"Run {summary['created']}"
        + (f", wall time {summary['wall_seconds']:.0f} s" if "wall_seconds" in summary else "")
        + (f", LLM: {summary['llm']}" if summary.get("llm") else "") + ".",
    ]
    if settings:
        header.append("Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None) + ".")
    misses = _misses(results)
    body = [
        *header, "", format_table(summary), "",
        "Metrics: hit@k / MRR / recall@5 over the ranked papers (k=5); cited gold = an answer cites a gold paper; "
        "facts = share of the question's facts stated in the answer (number-aware); refusal = refusals on "
        "unanswerable questions; false ref = refusals on answerable ones; supported = share of answer sentences "
        "the verifier found supported (refusals n/a). Latencies in seconds. – = not applicable.",
        "", "![per type](per_type.png) ![latency](latency.png)"
        + (" ![coverage](coverage.png)" if summary["mode"] == "full" else ""), "",
        *_curve_table(results),
        f"## Questions with problems ({len(misses)})", "", *(misses or ["None."]), "",
    ]
    (folder / "summary.md").write_text("\n".join(body), encoding="utf-8")
    _plots(results, summary, folder)
    return folder


# -- the regression gate ---------------------------------------------------------------------


def check(summary: dict[str, Any], baseline: dict[str, Any]) -> list[str]:
    """Metrics that fell more than the tolerance below the baseline, as readable lines.

    The baseline holds one section per mode ("retrieval-only", "full"), each a summary of a
    run plus "tolerance" (absolute, for the "all" row) and "type_tolerance" (for each type
    row; null = type rows are not gated, as for a small slice). The run must cover the same
    questions as the section; otherwise ValueError. Latencies are never gated.
    """
    section = baseline.get(summary["mode"])
    if not section:
        raise ValueError(f"the baseline has no '{summary['mode']}' section; write one with --write-baseline")
    if sorted(section["ids"]) != sorted(summary["ids"]):
        raise ValueError(
            f"this run covers other questions than the '{summary['mode']}' baseline "
            f"({len(summary['ids'])} vs {len(section['ids'])}); run the baseline's questions to compare"
        )
    regressions = []
    overall = summary["rows"].get("all", {})
    for count in ("bad_quotes", "sentinel"):  # must be zero, whatever the baseline says
        if overall.get(count):
            regressions.append(f"all {count}: {overall[count]} (must be 0)")
    for name, base_row in section["rows"].items():
        tolerance = section.get("tolerance", 0.0) if name == "all" else section.get("type_tolerance")
        now_row = summary["rows"].get(name)
        if tolerance is None or now_row is None:
            continue
        for metric in GATED_METRICS:
            before, now = base_row.get(metric), now_row.get(metric)
            if before is None:
                continue
            if now is None or now < before - tolerance - 1e-9:
                shown = "n/a" if now is None else f"{now:.3f}"
                regressions.append(f"{name} {metric}: baseline {before:.3f}, now {shown} (tolerance {tolerance:.2f})")
    return regressions


def comparison_table(summary: dict[str, Any], baseline: dict[str, Any]) -> str:
    """Baseline vs now for the gated metrics of the "all" row."""
    section = baseline.get(summary["mode"]) or {}
    before, now = section.get("rows", {}).get("all", {}), summary["rows"]["all"]
    lines = [f"{'metric':20} {'baseline':>9} {'now':>9} {'change':>8}"]
    for metric in GATED_METRICS:
        if before.get(metric) is None and now.get(metric) is None:
            continue
        b, n = before.get(metric), now.get(metric)
        change = f"{n - b:+.3f}" if b is not None and n is not None else ""
        lines.append(f"{metric:20} {_cell(b):>9} {_cell(n):>9} {change:>8}")
    return "\n".join(lines)


def baseline_section(summary: dict[str, Any], previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """A baseline section from a summary, keeping the tolerances of the section it replaces."""
    tolerance, type_tolerance = DEFAULT_TOLERANCE[summary["mode"]]
    previous = previous or {}
    keep = ("mode", "created", "questions", "ids", "settings", "llm", "wall_seconds", "rows")
    section = {k: summary[k] for k in keep if k in summary}
    section["tolerance"] = previous.get("tolerance", tolerance)
    section["type_tolerance"] = previous.get("type_tolerance", type_tolerance)
    return section


# -- command line ----------------------------------------------------------------------------


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def cmd_eval(args: argparse.Namespace) -> int:
    """`assistant eval`: run, report, print the table, and optionally gate or refresh the baseline."""
    from tqdm import tqdm

    from .api import Assistant
    from .cli import _progress_bar, _settings

    baseline_path = Path(args.baseline)
    mode = "retrieval-only" if args.retrieval_only else "full"
    baseline = json.loads(baseline_path.read_text(encoding="utf-8")) if baseline_path.is_file() else None
    ids, types = _split(args.ids), _split(args.types)
    if args.check and not (ids or types or args.limit):
        if not baseline or mode not in baseline:
            print(f"error: {baseline_path} has no '{mode}' baseline to check against", file=sys.stderr)
            return 2
        ids = list(baseline[mode]["ids"])  # gate on exactly the baseline's questions
    try:
        questions = select_questions(load_questions(args.questions), ids, types, args.limit)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not questions:
        print("error: no questions selected", file=sys.stderr)
        return 2

    settings = _settings(args)
    started = time.perf_counter()
    assistant = Assistant.from_settings(settings, notify=lambda m: print(m, file=sys.stderr), progress=_progress_bar())
    try:
        if not args.retrieval_only:
            print("Starting the language model…", file=sys.stderr)
        bar = tqdm(total=len(questions), unit="q", desc=f"Evaluating ({mode})", file=sys.stderr)

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        results = run_eval(assistant, questions, retrieval_only=args.retrieval_only, progress=progress)
        bar.close()
        meta: dict[str, Any] = {"wall_seconds": round(time.perf_counter() - started, 1)}
        if not args.retrieval_only:
            meta["llm"] = getattr(assistant.llm, "name", settings.llm_model)
            if "llm_start" in assistant.timings:
                meta["llm_start_seconds"] = round(assistant.timings["llm_start"], 1)
    finally:
        assistant.close()

    summary = summarize(results, settings, meta)
    folder = write_report(results, summary, args.out)
    print(format_table(summary))
    print(f"\n{len(questions)} questions in {summary['wall_seconds']:.0f} s; report: {folder}", file=sys.stderr)

    status = 0
    if args.check:
        if not baseline:
            print(f"error: no baseline at {baseline_path}", file=sys.stderr)
            return 2
        try:
            regressions = check(summary, baseline)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"\nBaseline ({baseline_path}) vs now, all questions:\n" + comparison_table(summary, baseline))
        if regressions:
            print(f"\nREGRESSION: {len(regressions)} metric(s) fell beyond tolerance:")
            for line in regressions:
                print(f"  - {line}")
            status = 1
        else:
            print("\nNo metric fell beyond tolerance.")
    if args.write_baseline:
        updated = dict(baseline or {})
        updated.setdefault("note", "Figures measured by `assistant eval`; see eval/README.md. Refresh deliberately "
                                   "with --write-baseline.")
        updated[mode] = baseline_section(summary, (baseline or {}).get(mode))
        baseline_path.write_text(json.dumps(updated, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"Wrote the '{mode}' baseline to {baseline_path}", file=sys.stderr)
    return status


def add_cli(subparsers: Any, common_parent: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register `eval` on the `assistant` command line."""
    p = subparsers.add_parser(
        "eval", parents=[common_parent], help="measure retrieval and answer quality on eval/questions.jsonl",
        description="Run the evaluation set through the assistant and write eval/reports/<timestamp>/ "
        "(results.jsonl, summary.json, summary.md, plots). The LLM backend comes from ASSISTANT_LLM_* "
        "variables (see eval/README.md).",
    )
    p.add_argument("--retrieval-only", action="store_true", help="rank papers only, no LLM (runs in seconds)")
    p.add_argument("--limit", type=int, help="only the first N selected questions")
    p.add_argument("--types", help=f"comma-separated question types ({','.join(TYPES)})")
    p.add_argument("--ids", help="comma-separated question ids, e.g. q001,q028")
    p.add_argument("--check", action="store_true", help="exit 1 when a metric fell below the baseline beyond tolerance "
                   "(without --ids/--types/--limit: runs the baseline's questions)")
    p.add_argument("--baseline", type=Path, default=BASELINE_PATH, help="baseline file (default eval/baseline.json)")
    p.add_argument("--write-baseline", action="store_true",
                   help="store this run's figures as the baseline for its mode")
    p.add_argument("--out", type=Path, default=REPORTS_DIR, help="reports folder (default eval/reports)")
    p.add_argument("--questions", type=Path, default=QUESTIONS_PATH,
                   help="evaluation set (default eval/questions.jsonl)")
    p.set_defaults(run=cmd_eval)
    return p
