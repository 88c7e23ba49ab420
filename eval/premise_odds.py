"""Measure whether the model can tell a question's false premise from a near miss (an experiment: not used).

A near miss quotes the sentence of the paper's abstract that comes closest to the question. When that
sentence shows the question assumes something false ("why is X so much slower?" where the abstract
says X is faster), a correction would serve better than "does not answer". This script reads the
model's log-odds that a sentence "shows that the question rests on a false assumption" (`PROMPT`) for
the two closest sentences of the paper each question is about (as the near miss picks them): every
question of eval/questions.jsonl, and the false premises and the questions whose right reply is no
answer of the held-out and outside sets. A sentence of a false-premise question that holds one of its
facts (the abstract's correction) should be flagged; a sentence of any other question should not.
It prints, per threshold, the false premises caught and the other questions flagged. The figures
(eval/README.md, "What was tried") are why the answer stage does not use this judgement.

    .venv/bin/python eval/premise_odds.py            # about 15 minutes with the embedded model, papers kept
    .venv/bin/python eval/premise_odds.py --reuse    # the figures of the last run (no model calls)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import assistant  # noqa: E402,F401  (offline environment first)
from assistant.api import Assistant  # noqa: E402
from assistant.evaluation.metrics import fact_found  # noqa: E402
from fit_decision import reaching_judge  # noqa: E402  (questions that reach the judge, as fit_decision reads them)

SETS = {"own": ROOT / "eval" / "questions.jsonl", "heldout": ROOT / "eval" / "heldout.jsonl",
        "external": ROOT.parent / "shared" / "eval" / "external_questions.jsonl"}
CACHE = ROOT / "eval" / "reports" / "premise-odds.json"
THRESHOLDS = (-0.1, 0.0, 0.1, 0.2, 0.4, 0.8)
PROMPT = ('Question: {question}\nSentence: "{sentence}"\n'
          "Does this sentence of source [1] show that the question rests on a false assumption? Answer yes or no.")
NOT_ANSWERED = ("false_premise", "near_miss", "unanswerable", "out_of_scope")


def collect(a: Assistant, path: Path, types: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """For every question that reaches the near miss's choice of sentence: the premise odds of the two
    closest sentences of the paper it is about, and whether each is a correction of a false premise."""
    engine = a.engine
    rows = []
    for q, query, decision in reaching_judge(a, path, types):
        source = decision.subject if decision.named else decision.sources[0]
        ask = engine.prompter.about(source.paper)
        for e in decision.best_sentences(source, 2):
            odds = engine.judge._yes_odds(ask(PROMPT.format(question=query.prompt, sentence=e.clean)))
            premise = q["type"] == "false_premise"
            rows.append({"id": q["id"], "type": q["type"], "odds": odds,
                         "corrects": premise and any(fact_found(f, e.clean) for f in q["facts"])})
        print(f"\r{path.name}: {len(rows)} sentences", end="", flush=True)
    print()
    return rows


def flagged(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Per question type: the share of questions with a sentence flagged (for false premises, with a
    correcting sentence flagged)."""
    per: dict[str, dict[str, bool]] = {}
    for r in rows:
        hit = r["odds"] is not None and r["odds"] >= threshold and (r["type"] != "false_premise" or r["corrects"])
        per.setdefault(r["type"], {})
        per[r["type"]][r["id"]] = per[r["type"]].get(r["id"], False) or hit
    return {t: {"n": len(v), "flagged": round(sum(v.values()) / len(v), 3)} for t, v in sorted(per.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", action="store_true", help="print the figures of the last run again (no model calls)")
    args = parser.parse_args()
    if args.reuse:
        data = json.loads(CACHE.read_text(encoding="utf-8"))
    else:
        with Assistant.from_settings() as a:
            data = {name: collect(a, path, None if name == "own" else NOT_ANSWERED) for name, path in SETS.items()
                    if path.is_file()}
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(data), encoding="utf-8")
    for threshold in THRESHOLDS:
        print(f"threshold {threshold:+.1f}")
        for name, rows in data.items():
            print(f"  {name}: " + "; ".join(f"{t} {f['flagged']} of {f['n']}" for t, f in flagged(rows, threshold).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
