"""Fit how much the model's reading orders the first papers of a question that names none, and write
assistant/data/reading.json (`Fitted.reading_weight`, used by `AnswerEngine.gather`).

For every question of eval/questions.jsonl that names no paper, is not a follow-up and whose kind
reads one paper (`decide.ONE_PAPER_KINDS`), the first five papers retrieval finds and, for each,
the model's log-odds that the paper is about the question (`TopicLister.odds`, every paper kept).
Of the first `READ_CANDIDATES`, a paper is put first by its retrieval score + w x its log-odds
(unless the first leads the second by `lone_paper_margin`: then nothing is asked, "asked" below);
w is the smallest weight of the grid at which a gold paper comes first most often on the project's
set ("read_all_collected": the same with all five ordered). The same figures on
eval/heldout.jsonl and the outside set (never fitted on) go beside the weight.

    .venv/bin/python eval/fit_reading.py             # about 8 minutes with the embedded model, papers kept
    .venv/bin/python eval/fit_reading.py --reuse     # refit on the odds of the last run (no model calls)
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import assistant  # noqa: E402,F401  (offline environment first)
from assistant import api  # noqa: E402
from assistant.answer import READ_CANDIDATES, reading_order  # noqa: E402
from assistant.decide import ONE_PAPER_KINDS, first_paper_leads  # noqa: E402
from assistant.evaluation.dataset import load_questions, paper_key  # noqa: E402
from assistant.config import Settings  # noqa: E402
from assistant.kinds import DATA  # noqa: E402

SETS = {"own": ROOT / "eval" / "questions.jsonl", "heldout": ROOT / "eval" / "heldout.jsonl",
        "external": ROOT.parent / "shared" / "eval" / "external_questions.jsonl"}
CACHE = ROOT / "eval" / "reports" / "reading-odds.json"
GRID = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
LONE_PAPER_MARGIN = Settings().lone_paper_margin
COLLECTED = 5  # papers read per question: the first READ_CANDIDATES are ordered; all five show what more would gain


def collect(a: Any, path: Path) -> list[dict[str, Any]]:
    """The first papers (retrieval's order) and the model's odds for each question the reading orders."""
    engine, rows = a.engine, []
    for q in load_questions(path):
        if q["history"] or not q["gold"]:
            continue
        query = engine.read(q["question"], None)
        if query.kind.kind not in ONE_PAPER_KINDS:
            continue
        gathered = engine.gather(query, COLLECTED, None, {})
        if gathered.named or len(gathered.passages) < 2:
            continue
        head = gathered.passages[:COLLECTED]
        rows.append({"id": q["id"], "type": q["type"], "gold": [paper_key(g["source"], g["ordinal"]) for g in q["gold"]],
                     "papers": [{"id": p.paper.id, "score": p.score, "odds": engine.topics.odds(query.english, p)} for p in head]})
        print(f"\r{path.name}: {len(rows)}", end="", flush=True)
    print()
    return rows


def asked(row: dict[str, Any]) -> bool:
    """Whether the product asks the model at all (as `AnswerEngine.gather` decides)."""
    return not first_paper_leads([p["score"] for p in row["papers"]], LONE_PAPER_MARGIN)  # rows hold 2 papers or more


def first_is_gold(rows: list[dict[str, Any]], weight: float, candidates: int = READ_CANDIDATES) -> np.ndarray:
    """Per question, whether the paper the product reads first is a gold one."""
    def first(row: dict[str, Any]) -> str:
        papers = row["papers"][:candidates]
        if not asked(row):
            return papers[0]["id"]
        return papers[reading_order([p["score"] for p in papers], [p["odds"] for p in papers], weight)[0]]["id"]

    return np.array([first(r) in r["gold"] for r in rows])


def figures(rows: list[dict[str, Any]], weight: float) -> dict[str, Any]:
    """A gold paper first: by retrieval alone, and ordered with the model's reading; for all and per type."""
    out: dict[str, Any] = {"n": len(rows), "retrieval": round(float(first_is_gold(rows, 0.0).mean()), 3),
                           "read": round(float(first_is_gold(rows, weight).mean()), 3),
                           "asked": round(float(np.mean([asked(r) for r in rows])), 3) if rows else 0.0,
                           "read_all_collected": round(float(first_is_gold(rows, weight, len(rows[0]["papers"]) if rows else 0).mean()), 3),
                           "per_type": {}}
    for t in sorted({r["type"] for r in rows}):
        typed = [r for r in rows if r["type"] == t]
        out["per_type"][t] = {"n": len(typed), "retrieval": round(float(first_is_gold(typed, 0.0).mean()), 3),
                              "read": round(float(first_is_gold(typed, weight).mean()), 3)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", action="store_true", help="fit on the odds of the last run (no model calls)")
    args = parser.parse_args()
    if args.reuse:
        data = json.loads(CACHE.read_text())
    else:
        # Retrieval's own order is what is weighed: the reading itself is off while collecting.
        with api.Assistant.from_settings(paper_judge=False) as a:
            data = {name: collect(a, path) for name, path in SETS.items() if path.is_file()}
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(data))
    own = data["own"]
    hits = {w: float(first_is_gold(own, w).mean()) for w in GRID}
    weight = min(w for w in GRID if hits[w] == max(hits.values()))
    report = {name: figures(rows, weight) for name, rows in data.items()}
    out = {"weight": weight, "candidates": READ_CANDIDATES,
           "fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "grid_on_own": {str(w): round(h, 3) for w, h in hits.items()}, "figures": report}
    (DATA / "reading.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for name, f in report.items():
        print(f"{name}: {f['n']} questions, a gold paper first {f['retrieval']} -> {f['read']}")
    print(f"weight {weight}; wrote {DATA / 'reading.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
