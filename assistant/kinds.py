"""Kinds: what kind of question a user asks, read by a classifier learned from labelled examples.

A question asks for a fact of a paper, which paper does something, every paper on a topic, a
comparison of papers, a yes or no, a summary of a paper, or something outside the collection
(general knowledge, how-to, chit-chat). The kind decides the shape of the reply, not whether the
abstracts answer it (that is the judge's).

A logistic regression over the question's word and word-pair TF-IDF and its MiniLM embedding,
fitted by the evaluation's `fit_kinds.py` on its `kinds.jsonl` (invented questions of every kind) and the
project's evaluation questions; its parameters and its figures on the held-out sets are in
`assistant/data/kinds.npz` and `kinds.json`. Written here rather than pickled: the arrays load
with numpy alone and stay readable across scikit-learn versions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

KINDS = ("fact", "which_paper", "topic", "comparison", "yes_no", "summary", "out_of_scope")
DATA = Path(str(resources.files("assistant"))) / "data"
TOKEN_PATTERN = r"(?u)\b\w[\w'-]*\b"

Encode = Callable[[list[str]], np.ndarray]


def vectorizer(vocabulary: dict[str, int] | None = None, idf: np.ndarray | None = None):  # -> TfidfVectorizer
    """The TF-IDF of the classifier (word and word-pair counts, sublinear); fitted when given its arrays."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    made = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True, token_pattern=TOKEN_PATTERN,
                           vocabulary=vocabulary)
    if idf is not None:
        made.idf_ = idf
    return made


@dataclass(frozen=True)
class KindReading:
    """The kind a question asks for, and how likely each kind is (0-1, summing to 1)."""

    kind: str
    probabilities: dict[str, float]

    def p(self, kind: str) -> float:
        return self.probabilities.get(kind, 0.0)


class KindReader:
    """Reads the kind of English questions with the fitted classifier (see the module docstring)."""

    def __init__(self, encode: Encode, folder: Path = DATA) -> None:
        self.encode = encode
        with np.load(folder / "kinds.npz", allow_pickle=False) as data:
            terms = [str(t) for t in data["terms"]]
            self._tfidf = vectorizer({t: i for i, t in enumerate(terms)}, data["idf"])
            self._coef, self._intercept = data["coef"], data["intercept"]
            self.classes = tuple(str(c) for c in data["classes"])
        self.figures = json.loads((folder / "kinds.json").read_text(encoding="utf-8"))

    def read(self, question: str, vector: np.ndarray | None = None) -> KindReading:
        """The kind of `question` (English); `vector` is its MiniLM embedding when already at hand."""
        if vector is None:
            vector = self.encode([question])[0]
        words = self._tfidf.transform([question]).toarray()[0]
        features = np.concatenate([words, np.asarray(vector, dtype=np.float64)])
        logits = self._coef @ features + self._intercept
        odds = np.exp(logits - logits.max())
        probabilities = odds / odds.sum()
        best = int(np.argmax(probabilities))
        return KindReading(self.classes[best], {c: round(float(p), 4) for c, p in zip(self.classes, probabilities)})
