"""Index: chunk papers, embed what changed, and write it to the store.

Indexing is incremental: a paper whose text (or chunking/embedding settings) is unchanged
keeps its vectors; a changed paper is re-embedded; a removed paper is deleted. Chunk ids
are stable and writes are upserts, so indexing twice changes nothing. `rebuild=True`
writes a new generation that replaces the old one only once complete.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llama_index.core.base.embeddings.base import BaseEmbedding

from .chunk import chunk_papers, paper_hash
from .config import Settings
from .embed import embedding_identity
from .store import Store
from .types import Paper

Progress = Callable[[int, int], None]  # (chunks embedded so far, chunks to embed)


@dataclass(frozen=True)
class IndexReport:
    papers: int
    chunks: int
    embedded_papers: int
    embedded_chunks: int
    deleted_chunks: int
    seconds: float
    collection: str


def corpus_fingerprint(papers: list[Paper], settings: Settings) -> str:
    """Identifies the indexed corpus: changes when any paper or chunking/embedding setting
    changes. Computed from the papers alone, so checking it at start-up chunks nothing."""
    pairs = sorted((paper.id, paper_hash(paper, settings)) for paper in papers)
    return hashlib.sha1(repr(pairs).encode()).hexdigest()[:16]


def build_index(
    papers: list[Paper],
    corpus: list[Path],
    settings: Settings,
    store: Store,
    embedder: Callable[[], BaseEmbedding],
    rebuild: bool = False,
    progress: Progress | None = None,
) -> IndexReport:
    """Bring the store in line with `papers`, embedding only what is new or changed.

    `embedder` gives the embedding model; it is called only if something must be embedded,
    so an index that is already up to date costs neither loading the model nor chunking.
    """
    started = time.perf_counter()
    model, dim = embedding_identity(settings)
    collection = None if rebuild else store.active()
    fingerprint = corpus_fingerprint(papers, settings)
    paths = [str(p) for p in corpus]
    if collection is not None:
        store.check_embedding(collection, model)
        info = store.info()
        if info is not None and info.fingerprint == fingerprint:
            # Recorded only when a build completes: every paper is already indexed as is.
            if info.corpus != paths:
                store.mark_complete(collection, fingerprint, paths)  # the same papers, from moved files
            return IndexReport(len(papers), info.chunks, 0, 0, 0, time.perf_counter() - started, info.collection)
    fresh = collection is None
    if fresh:
        if dim is None:  # remote embedders: learn the dimension from one real vector
            dim = len(embedder().get_text_embedding("dimension probe"))
        collection = store.new_generation(model, dim)

    stored = store.paper_hashes(collection)
    wanted = {paper.id: paper_hash(paper, settings) for paper in papers}
    changed = [paper for paper in papers if stored.get(paper.id, ("", []))[0] != wanted[paper.id]]
    todo = chunk_papers(changed, settings)
    keep_ids = {n.node_id for n in todo}
    stale = [
        chunk_id
        for paper_id, (digest, ids) in stored.items()
        for chunk_id in ids
        if paper_id not in wanted or (digest != wanted[paper_id] and chunk_id not in keep_ids)
    ]

    # Embed in batches sorted by length (less padding), writing each batch as it completes
    # so a crash loses at most one batch of work.
    todo.sort(key=lambda n: len(n.text))
    batch = settings.embed_batch_size
    if progress:
        progress(0, len(todo))
    if todo:
        model_instance = embedder()
        for start in range(0, len(todo), batch):
            part = todo[start : start + batch]
            store.upsert(collection, part, model_instance.get_text_embedding_batch([n.text for n in part]))
            if progress:
                progress(min(start + batch, len(todo)), len(todo))
    store.delete(collection, stale)
    store.mark_complete(collection, fingerprint, paths)
    if fresh:
        store.activate(collection)
    unchanged_chunks = sum(len(ids) for paper_id, (digest, ids) in stored.items() if wanted.get(paper_id) == digest)
    return IndexReport(
        papers=len(papers),
        chunks=unchanged_chunks + len(todo),
        embedded_papers=len(changed),
        embedded_chunks=len(todo),
        deleted_chunks=len(stale),
        seconds=time.perf_counter() - started,
        collection=collection.name,
    )
