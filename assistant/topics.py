"""Topics: the collection grouped into topics, from the embeddings already in the store.

Each paper is the mean of its stored chunk vectors; k-means (scikit-learn) groups them, with the
number of groups chosen by the silhouette over a few sizes around sqrt(n/2). Each group is
labelled by its own distinctive terms: class-based TF-IDF over the group's abstracts (a term
frequent in the group and rare in the others), no model call. Works the same on 57 and on
10,000 abstracts (mini-batch k-means and a sampled silhouette beyond a few thousand).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .wording import STOPWORDS
from .types import Paper

# Words every abstract uses: never what sets a group apart.
GENERIC_TERMS = frozenset(
    """propose proposed method methods approach approaches model models paper results result show shows task tasks
    based existing new novel performance state art learning framework problem problems data experiments
    demonstrate achieves achieve significantly significant work improve improves improving improved furthermore
    however key challenge challenges large high low efficient effective effectively extensive various multiple
    introduce introduces present study address setting settings training across rather information structure
    while also prior often remain remains enable enables provide provides first two one three different general
    theoretical empirical empirically consistent consistently yet despite real world limited strong lead leads""".split()
)
LABEL_TERMS = 3
_LARGE = 3000  # beyond this many papers: mini-batch k-means, and the silhouette on a sample


@dataclass(frozen=True)
class TopicGroup:
    """Papers that sit close together in the embedding space, labelled by their distinctive terms."""

    label: str
    terms: tuple[str, ...]
    papers: tuple[Paper, ...]


def paper_matrix(papers: Sequence[Paper], chunk_vectors: dict[str, list[list[float]]]) -> tuple[list[Paper], np.ndarray]:
    """The papers that have stored vectors, and one unit vector each (the mean of its chunks)."""
    kept = [p for p in papers if chunk_vectors.get(p.id)]
    if not kept:
        return [], np.zeros((0, 0), dtype=np.float32)
    matrix = np.stack([np.mean(np.asarray(chunk_vectors[p.id], dtype=np.float32), axis=0) for p in kept])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-12
    return kept, matrix


def _sizes(n: int) -> list[int]:
    """Group counts to try: a few around sqrt(n/2), at least 2 and at most 40."""
    centre = math.sqrt(n / 2)
    return sorted({min(40, max(2, round(centre * f))) for f in (0.8, 1.0, 1.3, 1.6)})


def cluster(matrix: np.ndarray, seed: int = 0) -> np.ndarray:
    """A group number per row of `matrix` (unit vectors)."""
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from sklearn.metrics import silhouette_score

    n = len(matrix)
    if n < 4:
        return np.zeros(n, dtype=int)
    best: tuple[float, np.ndarray] | None = None
    for k in _sizes(n):
        if k >= n:
            continue
        if n > _LARGE:
            model = MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=3, batch_size=2048)
        else:
            model = KMeans(n_clusters=k, random_state=seed, n_init=4)
        labels = model.fit_predict(matrix)
        if len(set(labels)) < 2:
            continue
        score = silhouette_score(matrix, labels, metric="cosine", sample_size=min(n, 2000), random_state=seed)
        if best is None or score > best[0]:
            best = (float(score), labels)
    return best[1] if best is not None else np.zeros(n, dtype=int)


def label_groups(texts: Sequence[str], labels: np.ndarray, n_terms: int = LABEL_TERMS) -> dict[int, list[str]]:
    """Each group's most distinctive terms (words and two-word phrases), by class-based TF-IDF."""
    from sklearn.feature_extraction.text import CountVectorizer

    groups = sorted(set(int(g) for g in labels))
    stop = sorted(STOPWORDS | GENERIC_TERMS)
    vectorizer = CountVectorizer(ngram_range=(1, 2), stop_words=stop, min_df=2, lowercase=True,
                                 token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z0-9-]{2,}\b")
    try:
        counts = vectorizer.fit_transform(texts)
    except ValueError:  # too few words shared by two abstracts
        return {g: [] for g in groups}
    vocabulary = vectorizer.get_feature_names_out()
    per_group = np.vstack([np.asarray(counts[labels == g].sum(axis=0)).ravel() for g in groups]).astype(float)
    words_per_group = per_group.sum(axis=1).mean()
    idf = np.log1p(words_per_group / (per_group.sum(axis=0) + 1e-9))
    tf = per_group / (per_group.sum(axis=1, keepdims=True) + 1e-9)
    # A term must be used by at least two papers of the group (by its one paper, in a group of one).
    documents = np.vstack([np.asarray((counts[labels == g] > 0).sum(axis=0)).ravel() for g in groups])
    sizes = np.array([[min(2, int((labels == g).sum()))] for g in groups])
    scores = tf * idf * (documents >= sizes)
    out: dict[int, list[str]] = {}
    for row, group in enumerate(groups):
        chosen: list[str] = []
        for index in np.argsort(-scores[row]):
            if scores[row, index] <= 0 or len(chosen) == n_terms:
                break
            term = str(vocabulary[index])
            if any(term in c or c in term for c in chosen):
                continue  # "kv" beside "kv cache" says nothing new
            chosen.append(term)
        out[group] = chosen
    return out


def group_papers(papers: Sequence[Paper], chunk_vectors: dict[str, list[list[float]]], seed: int = 0) -> list[TopicGroup]:
    """The collection's topics, largest first; each paper is in exactly one."""
    kept, matrix = paper_matrix(papers, chunk_vectors)
    if not kept:
        return []
    labels = cluster(matrix, seed)
    terms = label_groups([p.text for p in kept], labels)
    groups = []
    for group in sorted(set(int(g) for g in labels)):
        members = tuple(p for p, g in zip(kept, labels) if g == group)
        words = tuple(terms.get(group, []))
        label = ", ".join(words) if words else f"group {group + 1}"
        groups.append(TopicGroup(label, words, members))
    return sorted(groups, key=lambda g: (-len(g.papers), g.label))
