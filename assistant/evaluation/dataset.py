"""The evaluation set: where it lives, its question types, and reading and selecting questions.

The only place that opens eval/questions.jsonl (written by hand from the abstracts; see
eval/README.md). The set must never reach prompts, retrieval or any other code path.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ..config import PROJECT_ROOT
from ..load import paper_id

# The set, its baseline and its reports live in the checkout, next to eval/README.md; an installed
# assistant is pointed at them with --questions / --baseline / --out.
QUESTIONS_PATH = PROJECT_ROOT / "eval" / "questions.jsonl"
BASELINE_PATH = PROJECT_ROOT / "eval" / "baseline.json"
REPORTS_DIR = PROJECT_ROOT / "eval" / "reports"

TYPES = ("fact", "method", "paraphrase", "which_paper", "multi_paper", "topic", "comparison", "unanswerable",
         "near_miss", "follow_up", "chinese", "yes_no", "summary", "false_premise", "injection", "out_of_scope")
# No gold papers: the right outcome is a refusal (out of scope: a short "this collection does not cover it").
UNANSWERABLE = ("unanswerable", "near_miss", "out_of_scope")


class GoldPaper(BaseModel):
    """A gold paper of a question, named by its corpus file and 1-based position there."""

    source: Any
    ordinal: Any


class Question(BaseModel):
    """One line of the evaluation set; other keys (`about`, `premise`, ...) are read as given."""

    id: Any
    question: Any
    type: Literal[TYPES]
    gold: list[GoldPaper]
    facts: Any
    history: Any


def _wrong_fields(record: dict[str, Any]) -> set[str]:
    """The fields of a question line that do not fit `Question`."""
    try:
        Question.model_validate(record)
    except ValidationError as exc:
        return {str(error["loc"][0]) for error in exc.errors()}
    return set()


def paper_key(source: str, ordinal: int) -> str:
    """The `Paper.id` of a question's gold paper (the set names papers by corpus file and position)."""
    return paper_id(source, ordinal)


def read_jsonl(path: Path, required: set[str]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSON-lines set that has the required keys."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {number}: invalid JSON ({exc.msg})") from exc
        missing = required - set(record)
        if missing:
            raise ValueError(f"{path}, line {number}: missing keys {sorted(missing)}")
        records.append((number, record))
    return records


def load_questions(path: Path | str = QUESTIONS_PATH) -> list[dict[str, Any]]:
    """Read and validate the evaluation set (one JSON object per line)."""
    path = Path(path)
    questions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, q in read_jsonl(path, set(Question.model_fields)):
        wrong = _wrong_fields(q)
        if "type" in wrong:
            raise ValueError(f"{path}, line {number}: unknown type {q['type']!r} (one of {', '.join(TYPES)})")
        if q["id"] in seen:
            raise ValueError(f"{path}, line {number}: duplicate id {q['id']}")
        if "gold" in wrong:
            raise ValueError(f"{path}, line {number}: gold must be a list of {{source, ordinal}}")
        if (q["type"] in UNANSWERABLE) != (not q["gold"]):
            raise ValueError(f"{path}, line {number}: exactly the {', '.join(UNANSWERABLE)} questions have no gold papers")
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
