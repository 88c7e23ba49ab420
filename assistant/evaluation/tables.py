"""The table evaluation: topics with their gold papers, and column questions with gold cells.

eval/tables.jsonl (written by hand from the abstracts) holds, per topic, its complete set of
gold papers and column questions whose gold cell for each gold paper is a list of facts (any one
of which the cell's answer must state) or null ("not stated in the abstract"). Two measurements:
  * rows: the papers `Assistant.topic_rows` chooses for the topic, against its gold papers
    (recall and precision; the model weighs the likely candidates, as for a topic question), and the
    recall of the rows and the "possibly related" papers together;
  * cells: `Assistant.table` over the gold papers (so that a missed row does not hide its cells):
    a stated gold cell is right when the cell is stated and its answer holds a gold fact; a null
    one when the cell says "not stated"; every stated cell's quote must be verbatim and contiguous.
A yes/no column's gold cell also gives its `answer` ("yes" or "no"), and its facts are the words of
the abstract that say so: a cell answering "yes" or "no" is right when that is the gold answer and
its answer or its quote holds a gold fact (the quote is what shows the reader why).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import PROJECT_ROOT
from .dataset import paper_key, read_jsonl
from .metrics import fact_found, mean, percentile, quote_problems

TABLES_PATH = PROJECT_ROOT / "eval" / "tables.jsonl"


def load_tables(path: Path | str = TABLES_PATH) -> list[dict[str, Any]]:
    """Read and validate the table set."""
    path = Path(path)
    items = []
    for number, item in read_jsonl(path, {"id", "topic", "gold", "columns"}):
        gold = {paper_key(g["source"], g["ordinal"]) for g in item["gold"]}
        for column in item["columns"]:
            cells = {paper_key(c["source"], c["ordinal"]) for c in column["cells"]}
            if cells != gold:
                raise ValueError(f"{path}, line {number}: the column {column['question']!r} must have one cell "
                                 "per gold paper")
            for cell in column["cells"]:
                if cell.get("answer") not in (None, "yes", "no") or (cell.get("answer") and not cell["facts"]):
                    raise ValueError(f"{path}, line {number}: in the column {column['question']!r}, an answer "
                                     "must be \"yes\" or \"no\" and come with the facts that say so")
        items.append(item)
    return items


def score_rows(chosen: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """Recall and precision of the chosen papers against the gold ones (ids)."""
    hits = len(set(chosen) & set(gold))
    return {"recall": hits / len(gold) if gold else 1.0, "precision": hits / len(chosen) if chosen else 0.0}


_POLARITY = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


def score_cell(cell: dict[str, Any], facts: list[str] | None, answer: str | None = None) -> bool:
    """Whether a cell (in `Cell.to_json` form) is right: states a gold fact, or says "not stated" when
    the abstract does not say. With a gold yes/no `answer`, a cell that answers yes or no must give
    that answer, and its quote may hold the fact."""
    if facts is None:
        return cell["status"] == "not_stated"
    if cell["status"] != "stated":
        return False
    said = cell["text"]
    polarity = _POLARITY.match(said)
    if answer and polarity:
        if polarity.group(1).lower() != answer:
            return False
        said += " " + (cell["citation"]["quote"] if cell["citation"] else "")
    return any(fact_found(f, said) for f in facts)


def run_tables(assistant: Any, items: Sequence[dict[str, Any]], cells: bool = True,
               progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """One result per topic: its rows scored, and (with `cells`) its table over the gold papers scored."""
    results = []
    abstracts = {p.id: p.abstract for p in assistant.papers}
    for done, item in enumerate(items, start=1):
        gold = [paper_key(g["source"], g["ordinal"]) for g in item["gold"]]
        rows, related = assistant.topic_rows(item["topic"])
        chosen = [row.paper.id for row in rows]
        also = [row.paper.id for row in related]
        result: dict[str, Any] = {"id": item["id"], "topic": item["topic"], "gold": gold, "chosen": chosen,
                                  "related": also, **score_rows(chosen, gold),
                                  "recall_with_related": score_rows(chosen + also, gold)["recall"], "cells": []}
        if cells and item["columns"]:
            started = time.perf_counter()
            result["cells"], table = score_table(assistant, item, abstracts)
            result["seconds"] = round(time.perf_counter() - started, 2)
            result["first_cell"] = round(table.timings.get("first_cell", 0.0), 2)
        results.append(result)
        if progress:
            progress(done, len(items))
    return results


def score_table(assistant: Any, item: dict[str, Any], abstracts: dict[str, str]) -> tuple[list[dict[str, Any]], Any]:
    """`item`'s table over its gold papers (`Assistant.table`) and each of its cells scored (`score_cell`),
    with the gold facts and yes/no answer it was scored against; `abstracts` (paper id -> abstract)
    check the quotes."""
    gold = [paper_key(g["source"], g["ordinal"]) for g in item["gold"]]
    table = assistant.table([c["question"] for c in item["columns"]], papers=gold)
    cells = []
    for c, column in enumerate(item["columns"]):
        facts = {paper_key(x["source"], x["ordinal"]): x["facts"] for x in column["cells"]}
        answers = {paper_key(x["source"], x["ordinal"]): x.get("answer") for x in column["cells"]}
        for r, paper_id in enumerate(gold):
            cell = table.cells[r][c].to_json()
            citations = [cell["citation"]] if cell["citation"] else []
            cells.append({
                "paper": paper_id, "question": column["question"], "gold": facts[paper_id],
                "answer": answers[paper_id], "status": cell["status"], "text": cell["text"], "note": cell["note"],
                "quote": cell["citation"]["quote"] if cell["citation"] else "",
                "correct": score_cell(cell, facts[paper_id], answers[paper_id]),
                "quote_problems": quote_problems(citations, abstracts),
            })
    return cells, table


def summarize_tables(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The set's figures: row recall/precision (mean over topics), cell accuracy, "not stated"
    correctness, quotes, and the time to fill a table."""
    cells = [c for r in results for c in r["cells"]]
    stated = [c for c in cells if c["gold"] is not None]
    unstated = [c for c in cells if c["gold"] is None]
    filled = [c for c in cells if c["status"] == "stated"]
    timed = [r for r in results if "seconds" in r]
    return {
        "topics": len(results),
        "row_recall": mean(r["recall"] for r in results),
        "row_precision": mean(r["precision"] for r in results),
        "row_recall_with_related": mean(r.get("recall_with_related") for r in results),
        "cells": len(cells),
        "cell_accuracy": mean(float(c["correct"]) for c in cells),
        "stated_correct": mean(float(c["correct"]) for c in stated),
        "not_stated_correct": mean(float(c["correct"]) for c in unstated),
        "filled_cells": len(filled),
        "filled_with_verbatim_quote": mean(float(c["quote"] != "" and c["quote_problems"] == 0) for c in filled),
        "seconds_per_cell_p50": percentile((r["seconds"] / max(1, len(r["cells"])) for r in timed), 50),
        "first_cell_p50": percentile((r["first_cell"] for r in timed), 50),
    }


def format_tables_summary(summary: dict[str, Any]) -> str:
    lines = ["| figure | value |", "|---|---|"]
    for key, value in summary.items():
        lines.append(f"| {key} | {value:.3f} |" if isinstance(value, float) else f"| {key} | {value} |")
    return "\n".join(lines)


def write_tables_report(results: Sequence[dict[str, Any]], summary: dict[str, Any], out_dir: Path | str) -> Path:
    """A report folder: tables.jsonl (one result per topic) and tables_summary.json / .md."""
    folder = Path(out_dir) / time.strftime("tables-%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tables.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results), encoding="utf-8")
    (folder / "tables_summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    misses = [f"- {r['id']} {r['topic']}: missing {sorted(set(r['gold']) - set(r['chosen']))}, "
              f"extra {sorted(set(r['chosen']) - set(r['gold']))}" for r in results if set(r["gold"]) != set(r["chosen"])]
    wrong = [f"- {c['paper']} | {c['question']} | gold {c['gold']} | got {c['status']}: {c['text']} ({c['note']})"
             for r in results for c in r["cells"] if not c["correct"]]
    (folder / "tables_summary.md").write_text(
        "# Table evaluation\n\n" + format_tables_summary(summary) + "\n\n## Rows that differ from the gold\n\n"
        + ("\n".join(misses) or "none") + "\n\n## Wrong cells\n\n" + ("\n".join(wrong) or "none") + "\n", encoding="utf-8")
    return folder
