"""Fit the rule that decides which candidates of a topic question are on the topic.

For every topic and multi-paper question of the evaluation set that reads as a topic question, it
retrieves the candidates the assistant would weigh, computes `topic_choice.TOPIC_FEATURES` for each, and
fits a logistic regression (gold paper or not). It prints the leave-one-question-out precision and
recall of the listed papers per question type (what the rule would score on questions it was not
fitted on) for a few thresholds, and the weights to copy into `topic_choice.TOPIC_WEIGHTS` / `TOPIC_BIAS`.

    python eval/fit_topic.py --index-dir /tmp/store [--held-out more_topics.jsonl]

`--held-out` scores the rule fitted on the whole set on other questions, never used for fitting.

`--judge` also asks the model (`AnswerEngine.topic_odds`) about every candidate the cross-encoder
reads (about 10 a question, ~1 s each; answers are kept in `--odds-file` for the next run) and fits
the second rule, over `topic_choice.TOPIC_JUDGED_FEATURES`, on the candidates the first rule finds at
least `topic_choice.TOPIC_JUDGE_FLOOR` likely: its leave-one-out figures and `TOPIC_JUDGED_WEIGHTS`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from assistant import slots, topic_choice
from assistant.api import Assistant
from assistant.config import Settings

HERE = Path(__file__).resolve().parent
THRESHOLDS = (0.2, 0.3, 0.4, 0.5)


def load(path: Path) -> list[dict]:
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [q for q in questions if q["type"] in ("topic", "multi_paper")]


def features(assistant: Assistant, questions: list[dict], k: int, odds: dict[str, float] | None = None) -> list[dict]:
    """Per question: its type, gold count, and each candidate's features with whether it is gold;
    with `odds` (filled in as it goes), the model's log-odds for every candidate read (else NaN)."""
    engine = assistant.engine
    out = []
    for q in questions:
        intent = slots.read_question(q["question"])
        if intent.kind != "topic":
            print(f"  {q['id']}: read as {intent.kind}, not a topic question; skipped")
            continue
        gold = {f"{g['source']}#{g['ordinal']}" for g in q["gold"]}
        query_vector = engine._encode([q["question"]])[0]
        topic_vector = engine._encode([intent.topic])[0] if intent.topic else query_vector
        candidates = assistant.retriever.retrieve(q["question"], k=k, embedding=query_vector.tolist())
        rows = topic_choice.topic_features(intent.topic, topic_vector, candidates, engine.sentences, engine.rerank)
        judged = []
        for passage, _, f in rows:
            key = f"{intent.topic}\t{passage.paper.id}"
            if odds is not None and f[0] >= topic_choice.TOPIC_RELEVANCE_FLOOR and key not in odds:
                odds[key] = engine.topic_odds(intent.topic, passage)
            judged.append(odds.get(key, np.nan) if odds is not None else np.nan)
        out.append({
            "id": q["id"], "type": q["type"], "gold": len(gold),
            "x": np.array([f for _, _, f in rows]), "odds": np.array(judged, dtype=float),
            "y": np.array([f"{p.paper.source}#{p.paper.ordinal}" in gold for p, _, _ in rows]),
        })
    return out


def fit(data: list[dict], c: float) -> LogisticRegression:
    return LogisticRegression(C=c, max_iter=5000).fit(np.vstack([d["x"] for d in data]), np.concatenate([d["y"] for d in data]))


def judged(data: list[dict], base: LogisticRegression) -> list[dict]:
    """Per question, the candidates the model is asked about under the rule `base`, with their
    `TOPIC_JUDGED_FEATURES` (`x`), gold flags (`y`) and their place among all candidates (`at`)."""
    out = []
    for d in data:
        at = np.flatnonzero((base.predict_proba(d["x"])[:, 1] >= topic_choice.TOPIC_JUDGE_FLOOR) & ~np.isnan(d["odds"]))
        x = np.array(topic_choice.judged_features(list(d["x"][at]), list(d["odds"][at]))) if len(at) else np.zeros((0, len(topic_choice.TOPIC_JUDGED_FEATURES)))
        out.append({"x": x, "y": d["y"][at], "at": at})
    return out


def two_stage_left_out(data: list[dict], c: float) -> tuple[list[np.ndarray], float]:
    """Each question's probabilities from both rules fitted on the others (the candidates not asked
    about keep the first rule's), and the mean number of candidates asked about."""
    left, asked = [], []
    for i, d in enumerate(data):
        others = data[:i] + data[i + 1:]
        base = fit(others, c)
        second = fit([j for j in judged(others, base) if len(j["y"])], c)
        p = base.predict_proba(d["x"])[:, 1]
        mine = judged([d], base)[0]
        if len(mine["at"]):
            p[mine["at"]] = second.predict_proba(mine["x"])[:, 1]
        left.append(p)
        asked.append(len(mine["at"]))
    return left, float(np.mean(asked))


def precision_recall(listed: np.ndarray, d: dict) -> tuple[float, float]:
    """Precision and recall of the candidates `listed` (a mask) against the question's gold papers."""
    hits = int((listed & d["y"]).sum())
    return (hits / listed.sum() if listed.sum() else 0.0), hits / d["gold"]


def previous_rule(d: dict) -> np.ndarray:
    """The rule this one replaced: relevance >= 0.86 and within 0.51 of the best candidate's."""
    return (d["x"][:, 0] >= 0.86) & (d["x"][:, 1] >= -0.51)


def report(label: str, data: list[dict], listed: list[np.ndarray], kind: str | None = None) -> str:
    """Mean precision and recall per question type (or all as `kind`)."""
    scores: dict[str, list[tuple[float, float]]] = {}
    for d, mask in zip(data, listed):
        scores.setdefault(kind or d["type"], []).append(precision_recall(mask, d))
    parts = [f"{k} P {np.mean([p for p, _ in v]):.3f} R {np.mean([r for _, r in v]):.3f} (n={len(v)})"
             for k, v in sorted(scores.items())]
    return f"{label}: " + " | ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index-dir", required=True, help="index built from the collection")
    parser.add_argument("--questions", type=Path, default=HERE / "questions.jsonl")
    parser.add_argument("--held-out", type=Path, help="more topic questions to score, not to fit on")
    parser.add_argument("--candidates", type=int, default=12, help="candidates weighed per question")
    parser.add_argument("-C", type=float, default=0.3, help="inverse regularisation strength")
    parser.add_argument("--judge", action="store_true", help="also fit the rule over the model's odds (needs the model)")
    parser.add_argument("--odds-file", type=Path, default=Path("topic_odds.json"), help="the model's odds, kept between runs")
    args = parser.parse_args()

    assistant = Assistant.from_settings(Settings(index_dir=args.index_dir))
    odds = None
    if args.judge:
        odds = json.loads(args.odds_file.read_text(encoding="utf-8")) if args.odds_file.exists() else {}
    try:
        data = features(assistant, load(args.questions), args.candidates, odds)
    finally:
        if odds is not None:
            args.odds_file.write_text(json.dumps(odds, indent=0), encoding="utf-8")
    held = features(assistant, load(args.held_out), args.candidates) if args.held_out else []
    print(f"{len(data)} questions, {sum(len(d['y']) for d in data)} candidates, {sum(d['y'].sum() for d in data)} gold")
    print(report("previous rule (relevance only)", data, [previous_rule(d) for d in data]))
    if held:
        print(report("previous rule, held out", held, [previous_rule(d) for d in held], "held_out"))
    # Each question's probabilities from a rule fitted on the others; the rule fitted on all of them.
    left_out = [fit(data[:i] + data[i + 1:], args.C).predict_proba(d["x"])[:, 1] for i, d in enumerate(data)]
    model = fit(data, args.C)
    held_probabilities = [model.predict_proba(d["x"])[:, 1] for d in held]
    for threshold in THRESHOLDS:
        print(report(f"leave one out, threshold {threshold}", data, [p >= threshold for p in left_out]))
        if held:
            print(report(f"held out,      threshold {threshold}", held, [p >= threshold for p in held_probabilities], "held_out"))
    print("TOPIC_WEIGHTS =", tuple(round(float(w), 4) for w in model.coef_[0]))
    print("TOPIC_BIAS =", round(float(model.intercept_[0]), 4))
    if args.judge:
        left_out, asked = two_stage_left_out(data, args.C)
        print(f"with the model's odds ({asked:.1f} candidates asked about per question):")
        for threshold in THRESHOLDS:
            print(report(f"leave one out, threshold {threshold}", data, [p >= threshold for p in left_out]))
        second = fit([j for j in judged(data, model) if len(j["y"])], args.C)
        print("TOPIC_JUDGED_WEIGHTS =", tuple(round(float(w), 4) for w in second.coef_[0]))
        print("TOPIC_JUDGED_BIAS =", round(float(second.intercept_[0]), 4))
    assistant.close()


if __name__ == "__main__":
    main()
