"""Fit when a yes/no table cell's answer stands without the cross-encoder's sentence; write assistant/data/cells.json.

A yes/no cell is stated where the cross-encoder finds a shown sentence that says yes or no to the
column (`table.YES_NO_EVIDENCE`), or where the model is sure of its answer: its log-odds of opening its
reply to the cell's prompt with that "yes" or "no" rather than with "not" (of "not stated";
`TableBuilder.sure_of`) reach `sure_odds`. This script fills every table of eval/tables.jsonl over its
gold papers (the model asked once for each cell's answer and odds, both kept in memory), then again at
each threshold of a grid, scoring the cells as `assistant eval --tables` does. It keeps the threshold
with the most right cells (stated right plus "not stated" right); of equals, the one with the most
"not stated" right, then the lowest. The held-out table sets (tables_heldout.jsonl, tables_check.jsonl)
are scored at that threshold and without the rule, never fitted on.

    .venv/bin/python eval/fit_cells.py      # about 10 minutes with the embedded model, papers kept
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import assistant  # noqa: E402,F401  (offline environment first)
from assistant.api import Assistant  # noqa: E402
from assistant.evaluation.tables import load_tables, score_table  # noqa: E402
from assistant.kinds import DATA  # noqa: E402

FIT = ROOT / "eval" / "tables.jsonl"
HELD_OUT = (ROOT / "eval" / "tables_heldout.jsonl", ROOT / "eval" / "tables_check.jsonl")
GRID = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, math.inf)


def remember(a: Assistant) -> None:
    """Ask the model once for each cell's answer and odds: later passes over the grid reuse them."""
    builder = a.tables
    answers: dict[tuple[Any, ...], str] = {}
    odds: dict[tuple[Any, ...], float | None] = {}
    ask, sure_of = builder._ask, builder.sure_of

    def kept_ask(paper: Any, question: str, sentences: Any, shown: list[int]) -> str:
        key = (paper.id, question, tuple(shown))
        if key not in answers:
            answers[key] = ask(paper, question, sentences, shown)
        return answers[key]

    def kept_sure_of(paper: Any, sentences: Any, shown: list[int], question: str, answer: str) -> float | None:
        key = (paper.id, question, tuple(shown), answer)
        if key not in odds:
            odds[key] = sure_of(paper, sentences, shown, question, answer)
        return odds[key]

    builder._ask = kept_ask  # type: ignore[method-assign]
    builder.sure_of = kept_sure_of  # type: ignore[method-assign]


def score(a: Assistant, path: Path) -> dict[str, Any]:
    """Every table of `path` over its gold papers, its cells scored: right / all, stated and not stated."""
    counts = {"stated": [0, 0], "yes_no": [0, 0], "not_stated": [0, 0]}
    abstracts = {p.id: p.abstract for p in a.papers}
    for item in load_tables(path):
        for cell in score_table(a, item, abstracts)[0]:
            kinds = ["not_stated"] if cell["gold"] is None else ["stated"] + (["yes_no"] if cell["answer"] else [])
            for kind in kinds:
                counts[kind][0] += int(cell["correct"])
                counts[kind][1] += 1
    return {kind: {"right": r, "n": n} for kind, (r, n) in counts.items()}


def right(figures: dict[str, Any]) -> int:
    return figures["stated"]["right"] + figures["not_stated"]["right"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DATA / "cells.json", help="where to write the fitted threshold")
    args = parser.parse_args()
    with Assistant.from_settings() as a:
        remember(a)
        grid: dict[float, dict[str, Any]] = {}
        for threshold in GRID:
            a.tables.sure_odds = threshold
            grid[threshold] = score(a, FIT)
            print(f"sure_odds {threshold}: {grid[threshold]}", flush=True)
        best = max((t for t in GRID if t != math.inf),
                   key=lambda t: (right(grid[t]), grid[t]["not_stated"]["right"], -t))
        held_out = {}
        for path in HELD_OUT:
            held_out[path.name] = {}
            for threshold in (best, math.inf):
                a.tables.sure_odds = threshold
                held_out[path.name]["fitted" if threshold == best else "without"] = score(a, path)
            print(f"{path.name}: {held_out[path.name]}", flush=True)
    data = {
        "sure_odds": best,
        "figures": {
            "fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "fitted_on": {FIT.name: {("without" if t == math.inf else str(t)): f for t, f in grid.items()}},
            "held_out": held_out,
        },
    }
    args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"sure_odds = {best}; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
