"""Prompts: templates kept as files in `prompts/`, loaded once and checked for their variables.

The refusal sentinel lives here, shared by the system prompt (which tells the model to
reply with it) and the answer stage (which recognises it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llama_index.core.prompts import PromptTemplate

from .config import PROMPTS_DIR
from .errors import AssistantError

REFUSAL_SENTINEL = "NOT_IN_SOURCES"

# file name -> the variables the template must use, exactly
EXPECTED = {
    "system.txt": {"refusal"},
    "answer.txt": {"sources", "question"},
    "condense.txt": {"history", "question"},
    "refusal.txt": {"closest"},
    "system_quote_first.txt": set(),
    "answer_quote_first.txt": {"sentences", "question"},
    "table_system.txt": set(),
    "table_cell.txt": {"title", "sentences", "question"},
    "topic_judge.txt": {"topic"},
    "topic_zh.txt": {"question"},
    "judge_claim.txt": {"statement"},
    "judge_claim_kind.txt": {"statement"},
    "judge_sentence.txt": {"question", "sentence"},
    "judge_premise.txt": {"sentence", "statement"},
    "refusal_zh.txt": {"closest"},
    "near_miss.txt": {"title", "marker", "quote"},
    "near_miss_zh.txt": {"title", "marker", "quote"},
    "correction.txt": {"title", "marker", "quote"},
    "correction_zh.txt": {"title", "marker", "quote"},
    "out_of_scope.txt": {"count"},
    "out_of_scope_zh.txt": {"count"},
    "label.txt": set(),
}


@dataclass(frozen=True)
class Prompts:
    system: PromptTemplate
    answer: PromptTemplate
    condense: PromptTemplate
    refusal: PromptTemplate
    system_quote_first: PromptTemplate
    answer_quote_first: PromptTemplate
    table_system: PromptTemplate
    table_cell: PromptTemplate
    topic_judge: PromptTemplate
    topic_zh: PromptTemplate
    judge_claim: PromptTemplate
    judge_claim_kind: PromptTemplate
    judge_sentence: PromptTemplate
    judge_premise: PromptTemplate
    refusal_zh: PromptTemplate
    near_miss: PromptTemplate
    near_miss_zh: PromptTemplate
    correction: PromptTemplate
    correction_zh: PromptTemplate
    out_of_scope: PromptTemplate
    out_of_scope_zh: PromptTemplate
    label: PromptTemplate


def load_prompts(folder: Path = PROMPTS_DIR) -> Prompts:
    """Read every template and check it uses exactly the variables the code fills in."""
    templates = {}
    for name, expected in EXPECTED.items():
        path = folder / name
        if not path.is_file():
            raise AssistantError(f"Prompt file {path} is missing; restore it from the repository.")
        template = PromptTemplate(path.read_text(encoding="utf-8").strip())
        found = set(template.template_vars)
        if found != expected:
            raise AssistantError(
                f"Prompt file {path} uses variables {sorted(found)} but must use exactly {sorted(expected)}."
            )
        templates[name.removesuffix(".txt")] = template
    return Prompts(**templates)
