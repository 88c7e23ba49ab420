"""The benchmark's inputs: the bundled corpus, a synthetic corpus recombined from its sentences,
and the questions it asks (from eval/questions.jsonl)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from assistant.config import BUNDLED_CORPUS
from assistant.load import load_papers
from assistant.text import split_sentences

from . import ROOT

QUESTIONS_FILE = ROOT / "eval" / "questions.jsonl"
DEV_TYPES = ("fact", "method", "paraphrase", "which_paper", "multi_paper", "topic", "comparison", "unanswerable",
             "near_miss", "follow_up", "chinese")


def real_corpus() -> list[Path]:
    paths = sorted(BUNDLED_CORPUS.glob("*.txt"))
    if not paths:
        raise SystemExit(f"No bundled corpus files in {BUNDLED_CORPUS}.")
    return paths


def make_synthetic(real_paths: list[Path], n: int, seed: int, target: Path) -> dict[str, Any]:
    """Write `n` abstracts recombined from the real abstracts' sentences (deterministic for a seed).

    Each synthetic abstract takes the length (in characters) of a randomly drawn real abstract,
    opens with a real opening sentence and continues with randomly drawn real sentences.
    """
    papers = load_papers(real_paths)
    openers: list[str] = []
    body: list[str] = []
    lengths: list[int] = []
    for paper in papers:
        sentences = split_sentences(paper.abstract)
        if not sentences:
            continue
        openers.append(sentences[0])
        body.extend(sentences[1:] or sentences)
        lengths.append(len(paper.abstract))
    rng = random.Random(seed)
    total_chars = 0
    with open(target, "w", encoding="utf-8") as out:
        for i in range(n):
            goal = rng.choice(lengths)
            parts = [rng.choice(openers)]
            size = len(parts[0])
            while size < goal:
                sentence = rng.choice(body)
                parts.append(sentence)
                size += len(sentence) + 1
            abstract = " ".join(parts)
            words = parts[0].split()[:7]
            title = f"S{i + 1:05d} " + " ".join(words).strip(",.;:")
            out.write(json.dumps({"title": title, "abstract": abstract}, ensure_ascii=False) + "\n")
            total_chars += len(abstract)
    return {
        "abstracts": n,
        "seed": seed,
        "mean_chars": round(total_chars / max(n, 1)),
        "real_mean_chars": round(sum(lengths) / max(len(lengths), 1)),
        "file_mib": round(target.stat().st_size / 2**20, 2),
    }


def _question_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_questions(count: int) -> list[dict[str, Any]]:
    """`count` varied single-turn questions, evenly spread over eval/questions.jsonl (all types)."""
    single = [q for q in _question_rows() if not q.get("history")]
    if len(single) <= count:
        return single
    step = len(single) / count
    return [single[int(i * step)] for i in range(count)]


def dev_questions(per_type: int) -> list[dict[str, Any]]:
    """`per_type` questions of every type, spread over each type's questions in eval/questions.jsonl
    (the same ones in every run, so runs compare)."""
    rows = _question_rows()
    picked: list[dict[str, Any]] = []
    for kind in DEV_TYPES:
        of_kind = [q for q in rows if q["type"] == kind]
        step = max(len(of_kind) // per_type, 1)
        picked += of_kind[::step][:per_type]
    return picked
