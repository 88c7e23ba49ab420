"""Fit the rules that choose a topic's papers (`assistant/topic_choice.py`) and write assistant/data/topics.json.

The topics: every topic question of eval/questions.jsonl (and multi-paper question read as one), with
the topic as the assistant reads it (`TopicLister.topic`, the question's own words), and every topic of
eval/tables.jsonl as given. For each, the candidates the assistant weighs (`TopicLister.choose`: up to
`topic_candidates` papers near the topic), their `topic_choice.TOPIC_FEATURES` and, for those a rule
over the features finds likely enough to ask about (as at run time), the model's odds that the paper is
about the topic (kept in --odds-file between runs). Two logistic regressions (gold paper or not): the
first rule over the features, the second over them and the model's odds for the candidates the first
finds likely enough to ask about (`topic_choice.judged_by_model`). The
listing threshold is the one whose leave-one-topic-out recall and precision are highest together (the
lower of the two), the "possibly related" floor the highest at which the listed and related papers
together reach 0.95 recall (else the best recall any floor reaches). The outside set's topic
questions and the held-out table topics (eval/tables_heldout.jsonl) are scored, never fitted on.

    .venv/bin/python eval/fit_topic.py            # about 10 minutes with the embedded model, papers kept
                                                  # (4 with the odds kept from an earlier run)
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import assistant  # noqa: E402,F401  (offline environment first)
from assistant import topic_choice  # noqa: E402
from assistant.api import Assistant  # noqa: E402
from assistant.evaluation.dataset import paper_key, read_jsonl  # noqa: E402
from assistant.kinds import DATA  # noqa: E402

HERE = Path(__file__).resolve().parent
OUTSIDE = ROOT.parent / "shared" / "eval" / "external_questions.jsonl"
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.1, 0.75, 0.05))
RELATED_FLOORS = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1)  # 0: always the next 5
C = 0.3


def topics(a: Assistant, path: Path, tables: bool = False) -> list[dict[str, Any]]:
    """(id, kind, topic, gold ids) for the topics of a question or table set."""
    out = []
    for _, item in read_jsonl(path, {"id", "gold", "topic"} if tables else {"id", "gold", "type", "question"}):
        gold = {paper_key(g["source"], g["ordinal"]) for g in item["gold"]}
        if tables:
            out.append({"id": item["id"], "kind": "table", "topic": item["topic"], "gold": gold})
            continue
        if item["type"] not in ("topic", "multi_paper"):
            continue
        query = a.engine.read(item["question"], item["history"] or None)
        if query.kind.kind != "topic":
            continue
        out.append({"id": item["id"], "kind": item.get("kind", item["type"]), "gold": gold,
                    "topic": a.engine.topics.topic(query)})
    return out


def features(a: Assistant, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each topic's candidates (as `TopicLister.choose` retrieves them) and their features."""
    engine = a.engine
    for item in items:
        vector = engine.encode([item["topic"]])[0]
        candidates = a.retriever.retrieve(item["topic"], k=a.settings.topic_candidates, embedding=vector.tolist())
        rows = topic_choice.topic_features(item["topic"], vector, candidates, engine.sentences, engine.topics.rerank)
        item.update(x=np.array([f for _, _, f in rows]), ids=[p.paper.id for p, _, _ in rows],
                    passages=[p for p, _, _ in rows], y=np.array([p.paper.id in item["gold"] for p, _, _ in rows]))
    return items


def ask_odds(a: Assistant, items: list[dict[str, Any]], first: LogisticRegression, odds: dict[str, float],
             path: Path) -> None:
    """The model's odds for the candidates the first rule finds at least half `TOPIC_JUDGE_FLOOR` likely
    (as at run time, with room for the rule of a left-out fold), kept in `path` after each topic."""
    for n, item in enumerate(items, start=1):
        p = first.predict_proba(item["x"])[:, 1]
        asked = []
        for passage, prob in zip(item["passages"], p):
            key = f"{item['topic']}\t{passage.paper.id}"
            if prob >= topic_choice.TOPIC_JUDGE_FLOOR / 2 and key not in odds:
                odds[key] = a.engine.topics.odds(item["topic"], passage)
            asked.append(odds.get(key, np.nan))
        item["odds"] = np.array([np.nan if o is None else o for o in asked], dtype=float)
        path.write_text(json.dumps(odds, indent=0), encoding="utf-8")
        print(f"\r{n}/{len(items)} topics weighed", end="", flush=True)
    print()


def fit(items: list[dict[str, Any]], x: str = "x", y: str = "y") -> LogisticRegression:
    return LogisticRegression(C=C, max_iter=5000).fit(np.vstack([i[x] for i in items]), np.concatenate([i[y] for i in items]))


def judged_at(item: dict[str, Any], p: np.ndarray) -> np.ndarray:
    """The candidates the model is asked about at run time (`topic_choice.judged_by_model` of the first
    rule's probabilities `p`) and has odds for."""
    return np.flatnonzero(np.vectorize(topic_choice.judged_by_model)(p) & ~np.isnan(item["odds"]))


def probabilities(item: dict[str, Any], first: LogisticRegression, second: LogisticRegression | None) -> np.ndarray:
    """The candidates' probabilities: the first rule's, the second's where the model was asked."""
    p = first.predict_proba(item["x"])[:, 1]
    if second is None:
        return p
    at = judged_at(item, p)
    if len(at):
        judged = topic_choice.judged_features(list(item["x"][at]), list(item["odds"][at]))
        p[at] = second.predict_proba(np.array(judged))[:, 1]
    return p


def second_rule(items: list[dict[str, Any]], first: LogisticRegression) -> LogisticRegression:
    rows = []
    for item in items:
        at = judged_at(item, first.predict_proba(item["x"])[:, 1])
        if len(at):
            rows.append({"x": np.array(topic_choice.judged_features(list(item["x"][at]), list(item["odds"][at]))),
                         "y": item["y"][at]})
    return fit(rows)


def scores(items: list[dict[str, Any]], probs: list[np.ndarray], threshold: float, floor: float) -> dict[str, Any]:
    """Mean recall and precision of the listed papers, and recall with the possibly related ones, per kind and all."""
    per: dict[str, list[tuple[float, float, float]]] = {}
    for item, p in zip(items, probs):
        order = np.argsort(-p)
        listed = p >= threshold
        related = np.zeros_like(listed)
        related[[i for i in order if not listed[i] and p[i] >= floor][:5]] = True
        hits = int((listed & item["y"]).sum())
        total = len(item["gold"])
        recall = hits / total
        precision = hits / listed.sum() if listed.sum() else 0.0
        with_related = int(((listed | related) & item["y"]).sum()) / total
        for kind in (item["kind"], "all"):
            per.setdefault(kind, []).append((recall, precision, with_related))
    return {k: {"n": len(v), "recall": round(float(np.mean([r for r, _, _ in v])), 3),
                "precision": round(float(np.mean([p for _, p, _ in v])), 3),
                "recall_with_related": round(float(np.mean([w for _, _, w in v])), 3)} for k, v in sorted(per.items())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--odds-file", type=Path, default=HERE / "reports" / "topic_odds.json",
                        help="the model's odds, kept between runs")
    args = parser.parse_args()
    odds = json.loads(args.odds_file.read_text(encoding="utf-8")) if args.odds_file.exists() else {}
    args.odds_file.parent.mkdir(parents=True, exist_ok=True)
    with Assistant.from_settings() as a:
        own = topics(a, HERE / "questions.jsonl") + topics(a, HERE / "tables.jsonl", tables=True)
        outside = topics(a, OUTSIDE) if OUTSIDE.is_file() else []
        held = topics(a, HERE / "tables_heldout.jsonl", tables=True)
        features(a, own)
        features(a, outside)
        features(a, held)
        print(f"{len(own)} topics to fit on, {len(outside)} outside and {len(held)} held-out table topics; "
              "asking the model about the likely candidates")
        ask_odds(a, own + outside + held, fit(own), odds, args.odds_file)
    # Leave one topic out: each topic's probabilities from both rules fitted on the others.
    left = []
    for i, item in enumerate(own):
        others = own[:i] + own[i + 1:]
        first = fit(others)
        left.append(probabilities(item, first, second_rule(others, first)))
    best = max(THRESHOLDS, key=lambda t: min(scores(own, left, t, 1.0)["all"]["recall"], scores(own, left, t, 1.0)["all"]["precision"]))
    # The highest floor whose listed and related papers reach 0.95 recall together, else the highest
    # that reaches the best recall any floor does (a lower one would only add noise to the list).
    reached = {f: scores(own, left, best, f)["all"]["recall_with_related"] for f in RELATED_FLOORS}
    floor = max((f for f, r in reached.items() if r >= min(0.95, max(reached.values()))))
    first = fit(own)
    second = second_rule(own, first)
    report = {"fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"), "topics": len(own),
              "candidates": int(sum(len(i["y"]) for i in own)), "leave_one_topic_out": scores(own, left, best, floor)}
    if outside:
        report["outside"] = scores(outside, [probabilities(i, first, second) for i in outside], best, floor)
    report["held_out_tables"] = scores(held, [probabilities(i, first, second) for i in held], best, floor)
    out = {
        "rule": {"features": list(topic_choice.TOPIC_FEATURES), "weights": [round(float(w), 4) for w in first.coef_[0]],
                 "bias": round(float(first.intercept_[0]), 4)},
        "judged_rule": {"features": list(topic_choice.TOPIC_JUDGED_FEATURES),
                        "weights": [round(float(w), 4) for w in second.coef_[0]], "bias": round(float(second.intercept_[0]), 4)},
        "threshold": best, "related_floor": floor, "figures": report,
    }
    (DATA / "topics.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for name in ("leave_one_topic_out", "outside", "held_out_tables"):
        for kind, f in report.get(name, {}).items():
            print(f"{name:20} {kind:10} n={f['n']:3} R {f['recall']} P {f['precision']} R with related {f['recall_with_related']}")
    print(f"threshold {best}, related floor {floor}; wrote {DATA / 'topics.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
