"""Topics of the collection: grouping the papers from the stored vectors, at the real and the
synthetic size, and at 10,000 papers."""

from __future__ import annotations

import time

import numpy as np
from assistant.topics import cluster, group_papers, label_groups, paper_matrix

from .measure import r, say
from .state import Run


def topics_section(run: Run) -> None:
    """Grouping the collection into topics, from the stored vectors, at the real and the synthetic size
    (and at 10,000 papers: jittered copies of the synthetic vectors when the synthetic index is smaller)."""
    assert run.a_real is not None and run.a_syn is not None
    tp = run.rep.section("topics", "Topics of the collection (k-means + class-based TF-IDF labels)")
    for label, a in (("real", run.a_real), ("synthetic", run.a_syn)):
        mark = time.perf_counter()
        vectors = a.store.paper_vectors()
        read_s = time.perf_counter() - mark
        mark = time.perf_counter()
        groups = group_papers(a.papers, vectors)
        tp[label] = {"papers": len(a.papers), "groups": len(groups), "read_vectors_s": r(read_s, 3),
                     "group_s": r(time.perf_counter() - mark, 3)}
        say(f"  {len(a.papers)} papers: {len(groups)} topics in {tp[label]['group_s']} s "
            f"(+ {read_s:.2f} s reading the stored vectors); largest: {groups[0].label!r}")
    if len(run.a_syn.papers) < 10_000:
        kept, matrix = paper_matrix(run.a_syn.papers, run.a_syn.store.paper_vectors())
        rng = np.random.default_rng(run.args.seed)
        reps = -(-10_000 // len(kept))
        big = np.repeat(matrix, reps, axis=0)[:10_000] + rng.normal(0, 0.02, (10_000, matrix.shape[1])).astype(np.float32)
        big /= np.linalg.norm(big, axis=1, keepdims=True)
        texts = ([p.text for p in kept] * reps)[:10_000]
        mark = time.perf_counter()
        labels = cluster(big, run.args.seed)
        label_groups(texts, labels)
        tp["10000_jittered"] = {"papers": 10_000, "groups": len(set(labels.tolist())), "group_s": r(time.perf_counter() - mark, 3)}
        say(f"  10,000 papers (jittered copies of the synthetic vectors): {tp['10000_jittered']['groups']} topics in "
            f"{tp['10000_jittered']['group_s']} s")
