"""Evaluation: measures retrieval, answers, citations, refusals and latency on eval/questions.jsonl.

It drives the system through its public API alone, so what it measures is what a user gets
(see eval/README.md). Pieces, usable on their own:
  * `dataset` — the set's location, question types, loading and selection;
  * `metrics` — pure metric functions, unit-tested on hand-made cases;
  * `harness` — `run_eval`, one result per question;
  * `report` — `summarize`, `format_table`, `coverage_curve`, `write_report`;
  * `gate` — `check` against eval/baseline.json and `baseline_section`.
The `assistant eval` subcommand lives in `assistant.cli.evaluate`.
"""

from .dataset import BASELINE_PATH, QUESTIONS_PATH, REPORTS_DIR, TYPES, UNANSWERABLE, load_questions, paper_key, select_questions
from .gate import baseline_section, check, comparison_table
from .harness import retrieval_query, run_eval
from .metrics import (
    citation_scores,
    fact_found,
    fact_recall,
    gold_rank,
    has_sentinel,
    hit_at,
    percentile,
    quote_problems,
    recall_at,
    reciprocal_rank,
    refusal_rates,
    score_question,
)
from .report import coverage_curve, format_table, summarize, write_report

__all__ = [
    "BASELINE_PATH", "QUESTIONS_PATH", "REPORTS_DIR", "TYPES", "UNANSWERABLE", "baseline_section", "check",
    "citation_scores", "comparison_table", "coverage_curve", "fact_found", "fact_recall", "format_table", "gold_rank",
    "has_sentinel", "hit_at", "load_questions", "paper_key", "percentile", "quote_problems", "recall_at",
    "reciprocal_rank", "refusal_rates", "retrieval_query", "run_eval", "score_question", "select_questions",
    "summarize", "write_report",
]
