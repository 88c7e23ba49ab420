"""Fit the judge's rules (`assistant/judge.py`) and write assistant/data/decision.json.

1. The answer rule: for every question of eval/questions.jsonl that reaches the judge (not a topic
   list), the features the engine computes (`AnswerEngine.gather`, `plan`, `prompt`, the model's odds
   of declining) and whether the question is answerable; a logistic regression with the model's odds
   and one without them (for backends that give no log-probabilities). With the model's odds, the
   highest threshold at which at most 3.5% of this set's answerable questions are refused before the
   model drafts: the draft's claims are then checked against the abstracts by the model, which catches
   most drafts of questions they do not answer (a permissive rule before the draft, a strict check
   after it). Without them nothing checks the draft by meaning, so the rule alone decides, at the
   threshold that maximises answered-right plus refused-right (Youden's J).
2. The claim threshold: the model's odds that each statement of eval/claims.jsonl (written from the
   abstracts: true, contradicted and unsupported claims) is true; the highest threshold that keeps 95%
   of the true ones.
3. The sentence thresholds: the odds that each of the two closest sentences of the paper a question is
   about answers it; a sentence holding a fact of an answerable question answers, one of a near miss
   does not. Where the answer rule refused, a sentence is taken to answer only past Youden's J; where
   it answered and the draft then failed (the model declined, or its claims did not hold), past the
   threshold that finds 95% of the answering sentences (the rule's verdict is the prior).
Then the same features on eval/heldout.jsonl and the outside set (never fitted on), and the figures
of all three, per question type, go beside the weights.

    .venv/bin/python eval/fit_decision.py            # about 20 minutes with the embedded model, papers kept
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Collection, Iterator
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import assistant  # noqa: E402,F401  (offline environment first)
from assistant import api  # noqa: E402
from assistant.evaluation.dataset import load_questions, paper_key, read_jsonl  # noqa: E402
from assistant.evaluation.metrics import fact_found  # noqa: E402
from assistant.judge import DECISION_FEATURES, Fitted, Rule  # noqa: E402
from assistant.kinds import DATA  # noqa: E402

SETS = {"own": ROOT / "eval" / "questions.jsonl", "heldout": ROOT / "eval" / "heldout.jsonl",
        "external": ROOT.parent / "shared" / "eval" / "external_questions.jsonl"}
CLAIMS = ROOT / "eval" / "claims.jsonl"
CACHE = ROOT / "eval" / "reports" / "decision-features"
KEEP_TRUE = 0.95
MAX_REFUSED_BEFORE_DRAFT = 0.035
C = 1.0


def neutral() -> Fitted:
    """A rule that answers everything: features are collected before anything is fitted."""
    rule = Rule(DECISION_FEATURES, tuple(0.0 for _ in DECISION_FEATURES), 0.0, 0.0)
    # The papers are ordered as the product orders them (the fitted reading weight), so the features are its.
    return Fitted(rule, Rule(DECISION_FEATURES[1:], tuple(0.0 for _ in DECISION_FEATURES[1:]), 0.0, 0.0), 0.0, 0.0, 0.0, {},
                  Fitted.load().reading_weight)


def reaching_judge(a: Any, path: Path, types: Collection[str] | None = None) -> Iterator[tuple[dict[str, Any], Any, Any]]:
    """Each question of `path` (of `types`, if given) that reaches the judge (not a topic list): the
    question, its `Query` and its `Decision`, read, retrieved and planned as the engine does."""
    engine = a.engine
    for q in load_questions(path):
        if types is not None and q["type"] not in types:
            continue
        query = engine.read(q["question"], q["history"] or None)
        gathered = engine.gather(query, a.settings.k, None, {})
        if not gathered.relevant or (query.kind.kind == "topic" and not gathered.named):
            continue
        yield q, query, engine.plan(query, gathered)


def collect(a: Any, path: Path, sentences: bool) -> list[dict[str, Any]]:
    """Features (and, with `sentences`, sentence judgements) for every question that reaches the judge."""
    engine = a.engine
    rows = []
    for q, query, decision in reaching_judge(a, path):
        messages, _, _ = engine.prompt(query, decision)
        features = decision.features(query.kind, engine.judge.decline_odds(messages))
        gold = [paper_key(g["source"], g["ordinal"]) for g in q["gold"]]
        row = {"id": q["id"], "type": q["type"], "answerable": bool(gold), "features": features}
        if sentences:
            source = decision.subject if decision.named else decision.sources[0]
            ask = engine.prompter.about(source.paper)
            row["sentences"] = []
            for e in decision.best_sentences(source, 2):
                odds = engine.judge._yes_odds(ask(engine.prompts.judge_sentence.format(question=query.prompt, sentence=e.clean)))
                label = (any(fact_found(f, e.clean) for f in q["facts"]) if gold and source.paper.id in gold and q["facts"]
                         else (False if q["type"] == "near_miss" else None))
                row["sentences"].append({"odds": odds, "answers": label})
        rows.append(row)
        print(f"\r{path.name}: {len(rows)}", end="", flush=True)
    print()
    return rows


def claim_odds(a: Any) -> list[dict[str, Any]]:
    engine = a.engine
    by_place = {(p.source, p.ordinal): p for p in a.papers}
    out = []
    for _, c in read_jsonl(CLAIMS, {"source", "ordinal", "label", "claim"}):
        ask = engine.prompter.about(by_place[(c["source"], c["ordinal"])])
        out.append({"label": c["label"], "odds": engine.judge._yes_odds(ask(engine.prompts.judge_claim.format(statement=c["claim"])))})
    return out


def matrix(rows: list[dict[str, Any]], names: tuple[str, ...]) -> np.ndarray:
    return np.array([[float(r["features"][n] or 0.0) for n in names] for r in rows])


def youden(p: np.ndarray, y: np.ndarray) -> float:
    best, threshold = -1.0, 0.5
    for t in np.unique(np.round(p, 3)):
        j = np.mean(p[y] >= t) - np.mean(p[~y] >= t)
        if j > best:
            best, threshold = j, float(t)
    return threshold


def fit_rule(rows: list[dict[str, Any]], names: tuple[str, ...], permissive: bool) -> Rule:
    """With `permissive` (a backend whose drafts are checked afterwards), the highest threshold that
    refuses at most MAX_REFUSED_BEFORE_DRAFT of the answerable questions; without, Youden's J."""
    from sklearn.linear_model import LogisticRegression

    y = np.array([r["answerable"] for r in rows])
    model = LogisticRegression(C=C, max_iter=5000).fit(matrix(rows, names), y)
    p = model.predict_proba(matrix(rows, names))[:, 1]
    if permissive:
        answerable = np.sort(p[y])
        threshold = float(answerable[int(np.floor(MAX_REFUSED_BEFORE_DRAFT * len(answerable)))]) - 1e-4
    else:
        threshold = youden(p, y)
    return Rule(names, tuple(round(float(w), 4) for w in model.coef_[0]), round(float(model.intercept_[0]), 4),
                round(threshold, 4))


def figures(rows: list[dict[str, Any]], rule: Rule) -> dict[str, Any]:
    """Answered / refused by the rule alone (before any draft), per question type and for all."""
    from sklearn.metrics import roc_auc_score

    p = np.array([rule.probability({n: float(r["features"][n] or 0.0) for n in rule.features}) for r in rows])
    y = np.array([r["answerable"] for r in rows])
    out: dict[str, Any] = {"n": len(rows), "auc": round(float(roc_auc_score(y, p)), 3) if 0 < y.sum() < len(y) else None,
                           "answerable_refused": round(float(np.mean(p[y] < rule.threshold)), 3),
                           "unanswerable_refused": round(float(np.mean(p[~y] < rule.threshold)), 3), "per_type": {}}
    for t in sorted({r["type"] for r in rows}):
        mask = np.array([r["type"] == t for r in rows])
        out["per_type"][t] = {"n": int(mask.sum()), "refused": round(float(np.mean(p[mask] < rule.threshold)), 3)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", action="store_true", help="fit on the features of the last run (no model calls)")
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    if args.reuse:
        data = {name: json.loads((CACHE / f"{name}.json").read_text()) for name in [*SETS, "claims"]}
    else:
        with api.Assistant.from_settings(fitted=neutral()) as a:
            data = {name: collect(a, path, sentences=name == "own") for name, path in SETS.items() if path.is_file()}
            data["claims"] = claim_odds(a)
        for name, rows in data.items():
            (CACHE / f"{name}.json").write_text(json.dumps(rows))
    with_model = fit_rule(data["own"], DECISION_FEATURES, permissive=True)
    without_model = fit_rule(data["own"], DECISION_FEATURES[1:], permissive=False)

    claims = [c for c in data["claims"] if c["odds"] is not None]
    true_odds = np.array([c["odds"] for c in claims if c["label"] == "supported"])
    claim_threshold = round(float(np.quantile(true_odds, 1 - KEEP_TRUE)), 3)
    claim_figures = {label: round(float(np.mean([c["odds"] < claim_threshold for c in claims if c["label"] == label])), 3)
                     for label in ("supported", "contradicted", "unsupported")}

    judged = [s for r in data["own"] for s in r.get("sentences", []) if s["answers"] is not None and s["odds"] is not None]
    s_odds = np.array([s["odds"] for s in judged])
    s_y = np.array([s["answers"] for s in judged])
    sentence_threshold = round(youden(s_odds, s_y), 3)
    rescue_threshold = round(float(np.quantile(s_odds[s_y], 1 - KEEP_TRUE)), 3)

    report = {
        "fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "answer_rule": {name: figures(rows, with_model) for name, rows in data.items() if name != "claims"},
        "answer_rule_without_model": {name: figures(rows, without_model) for name, rows in data.items() if name != "claims"},
        "claims": {"n": len(claims), "share_judged_not_true": claim_figures},
        "sentences": {"n": len(judged), "answering": int(s_y.sum()),
                      "answering_found": round(float(np.mean(s_odds[s_y] >= sentence_threshold)), 3),
                      "not_answering_found": round(float(np.mean(s_odds[~s_y] < sentence_threshold)), 3),
                      "rescue": {"answering_found": round(float(np.mean(s_odds[s_y] >= rescue_threshold)), 3),
                                 "not_answering_found": round(float(np.mean(s_odds[~s_y] < rescue_threshold)), 3)}},
    }
    out = {
        "with_model": {"features": list(with_model.features), "weights": list(with_model.weights),
                       "bias": with_model.bias, "threshold": with_model.threshold},
        "without_model": {"features": list(without_model.features), "weights": list(without_model.weights),
                          "bias": without_model.bias, "threshold": without_model.threshold},
        "claim_threshold": claim_threshold,
        "sentence_threshold": sentence_threshold,
        "sentence_rescue_threshold": rescue_threshold,
        "figures": report,
    }
    (DATA / "decision.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name in ("own", "heldout", "external"):
        if name in report["answer_rule"]:
            f = report["answer_rule"][name]
            print(f"{name}: AUC {f['auc']}, answerable refused {f['answerable_refused']}, "
                  f"unanswerable refused {f['unanswerable_refused']} (rule alone, before any draft)")
    print(f"claims: threshold {claim_threshold}; judged not true: {claim_figures}")
    print(f"sentences: threshold {sentence_threshold}; {report['sentences']}")
    print(f"wrote {DATA / 'decision.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
