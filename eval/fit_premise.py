"""Fit when a claim a draft gives a reason for ("A" of "A because B") counts as stated by the abstract, and
write assistant/data/premise.json (`Fitted.premise_threshold`, used by `Judge.premise_holds`).

A why-question carries a premise ("Why did ReWA hurt test accuracy so much on ImageNet?"); the model's
draft restates it and gives a reason ("ReWA hurt test accuracy … because it led to … while preserving
test accuracy"). eval/premises.jsonl holds such restated premises, taken from the drafts the embedded
model wrote for why-questions whose premise is true or false according to the abstract: the project's
and held-out false premises and eval/why_questions.jsonl, 110 questions another author wrote from the
abstracts alone in two batches ("fit": 60, "check": 50, written without seeing the first). For each, the
model's highest log-odds that the claim is true according to one of the abstract's three sentences
closest to it (`Judge.premise_odds`, the answer stage's own call). The threshold is fitted on the "fit"
rows only: the one that most outnumbers false premises caught over true premises broken, a true premise
counting twice (a correct answer replaced by "the abstract does not support that" misleads as much as a
false premise explained, and a why-question is more often asked in earnest); the "check" rows are
reported beside it, never fitted on.

    .venv/bin/python eval/fit_premise.py             # about 2 minutes with the embedded model, papers kept
    .venv/bin/python eval/fit_premise.py --reuse     # refit on the odds of the last run (no model calls)
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import assistant  # noqa: E402,F401  (offline environment first)
from assistant import api  # noqa: E402
from assistant.judge import PREMISE_SENTENCES  # noqa: E402
from assistant.kinds import DATA  # noqa: E402
from assistant.load import paper_id  # noqa: E402

PREMISES = ROOT / "eval" / "premises.jsonl"
CACHE = ROOT / "eval" / "reports" / "premise-support.json"
BROKEN_COST = 2.0  # a true premise corrected counts this many false premises explained


def collect(a: api.Assistant) -> list[dict[str, Any]]:
    """Every premise of eval/premises.jsonl with the judge's odds that the abstract states it."""
    engine = a.engine
    rows = [json.loads(line) for line in PREMISES.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, row in enumerate(rows, 1):
        paper = a.by_id[paper_id(row["source"], row["ordinal"])]
        row["odds"] = engine.judge.premise_odds(row["claim"], engine.sentences.get(paper),
                                                engine.encode([row["claim"]])[0], engine.prompter.about(paper))
        print(f"\r{i} of {len(rows)} premises", end="", flush=True)
    print()
    return rows


def figures(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Of the true premises, how many the threshold breaks; of the false ones, how many it catches."""
    true = [r["odds"] for r in rows if r["premise"] == "true"]
    false = [r["odds"] for r in rows if r["premise"] == "false"]
    return {"true": len(true), "true_broken": sum(o < threshold for o in true),
            "false": len(false), "false_caught": sum(o < threshold for o in false)}


def fit(rows: list[dict[str, Any]]) -> float:
    """The threshold (midway between two observed odds) with the most false premises caught less
    `BROKEN_COST` x true premises broken, on `rows`; the lowest of equals."""
    odds = sorted({r["odds"] for r in rows})
    candidates = [odds[0] - 0.01] + [round((x + y) / 2, 3) for x, y in zip(odds, odds[1:])]

    def gain(t: float) -> float:
        f = figures(rows, t)
        return f["false_caught"] - BROKEN_COST * f["true_broken"]

    return max(candidates, key=lambda t: (gain(t), -t))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", action="store_true", help="refit on the odds of the last run (no model calls)")
    args = parser.parse_args()
    if args.reuse:
        rows = json.loads(CACHE.read_text())
    else:
        with api.Assistant.from_settings() as a:
            rows = collect(a)
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(rows, indent=1))
    threshold = fit([r for r in rows if r["set"] == "fit"])
    report = {name: figures([r for r in rows if r["set"] == name], threshold) for name in ("fit", "check")}
    out = {"threshold": threshold, "sentences": PREMISE_SENTENCES, "broken_cost": BROKEN_COST,
           "fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"), "figures": report}
    (DATA / "premise.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for name, f in report.items():
        print(f"{name}: true premises broken {f['true_broken']} of {f['true']}, "
              f"false premises caught {f['false_caught']} of {f['false']}")
    print(f"threshold {threshold}; wrote {DATA / 'premise.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
