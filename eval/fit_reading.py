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

The same odds decide a which-paper question whose draft failed (`Fitted.which_paper_odds`): the paper
read first is the answer when the model's log-odds that it is about the question reach the threshold
of the grid that tells most often, on the project's which-paper questions (unanswerable ones
included), whether that paper is a gold one (the middle of the best run of the grid).

    .venv/bin/python eval/fit_reading.py             # about 20 minutes with the embedded model, papers kept (Intel Xeon)
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
from assistant.decide import ONE_PAPER_KINDS, READ_CANDIDATES, first_paper_leads, reading_order  # noqa: E402
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
        if q["history"]:
            continue
        query = engine.read(q["question"], None)
        if query.kind.kind not in ONE_PAPER_KINDS:
            continue
        gathered = engine.gather(query, COLLECTED, None, {})
        if gathered.named or len(gathered.passages) < 2:
            continue
        head = gathered.passages[:COLLECTED]
        if not q["gold"] and query.kind.kind != "which_paper":
            continue  # an unanswerable question counts only for the which-paper threshold
        rows.append({"id": q["id"], "type": q["type"], "kind": query.kind.kind,
                     "gold": [paper_key(g["source"], g["ordinal"]) for g in q["gold"]],
                     "papers": [{"id": p.paper.id, "score": p.score, "odds": engine.topics.odds(query.english, p)} for p in head]})
        print(f"\r{path.name}: {len(rows)}", end="", flush=True)
    print()
    return rows


ODDS_GRID = tuple(round(x, 1) for x in np.arange(-0.5, 2.01, 0.1))


def first_read(row: dict[str, Any], weight: float, candidates: int = READ_CANDIDATES) -> dict[str, Any]:
    """The paper the product reads first (retrieval's first unless the model is asked)."""
    papers = row["papers"][:candidates]
    if not asked(row):
        return papers[0]
    return papers[reading_order([p["score"] for p in papers], [p["odds"] for p in papers], weight)[0]]


def which_paper_told(rows: list[dict[str, Any]], weight: float, threshold: float) -> dict[str, Any]:
    """For which-paper questions: how often the odds of the paper read first, at `threshold`, tell
    whether it is a gold paper; and the rescues the threshold would make, right and wrong."""
    rows = [r for r in rows if r["kind"] == "which_paper"]
    firsts = [first_read(r, weight) for r in rows]
    said = np.array([f["odds"] >= threshold for f in firsts], dtype=bool)
    right = np.array([f["id"] in r["gold"] for f, r in zip(firsts, rows)], dtype=bool)
    return {"n": len(rows), "told": round(float((said == right).mean()), 3) if rows else 0.0,
            "gold_first_taken": int((said & right).sum()), "gold_first": int(right.sum()),
            "wrong_taken": int((said & ~right).sum()), "wrong": int((~right).sum())}


def asked(row: dict[str, Any]) -> bool:
    """Whether the product asks the model at all (as `AnswerEngine.gather` decides)."""
    return not first_paper_leads([p["score"] for p in row["papers"]], LONE_PAPER_MARGIN)  # rows hold 2 papers or more


def first_is_gold(rows: list[dict[str, Any]], weight: float, candidates: int = READ_CANDIDATES) -> np.ndarray:
    """Per question, whether the paper the product reads first is a gold one."""
    return np.array([first_read(r, weight, candidates)["id"] in r["gold"] for r in rows])


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
    answerable = {name: [r for r in rows if r["gold"]] for name, rows in data.items()}
    own = answerable["own"]
    hits = {w: float(first_is_gold(own, w).mean()) for w in GRID}
    weight = min(w for w in GRID if hits[w] == max(hits.values()))
    report = {name: figures(rows, weight) for name, rows in answerable.items()}
    told = {t: which_paper_told(data["own"], weight, t)["told"] for t in ODDS_GRID}
    best = [t for t in ODDS_GRID if told[t] == max(told.values())]
    threshold = best[len(best) // 2]
    which = {name: which_paper_told(rows, weight, threshold) for name, rows in data.items()}
    out = {"weight": weight, "candidates": READ_CANDIDATES, "which_paper_odds": threshold, "which_paper": which,
           "fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "grid_on_own": {str(w): round(h, 3) for w, h in hits.items()}, "figures": report}
    (DATA / "reading.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for name, f in report.items():
        print(f"{name}: {f['n']} questions, a gold paper first {f['retrieval']} -> {f['read']}")
    for name, f in which.items():
        print(f"{name}: {f['n']} which-paper questions; at log-odds {threshold}, {f['gold_first_taken']} of "
              f"{f['gold_first']} with a gold paper first taken, {f['wrong_taken']} of {f['wrong']} others")
    print(f"weight {weight}, which-paper odds {threshold}; wrote {DATA / 'reading.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
