"""Index: chunk papers, embed what changed, and write it to the store.

Indexing is incremental: a paper whose text (or chunking/embedding settings) is unchanged
keeps its vectors; a changed paper is re-embedded; a removed paper is dropped. Every change
is written to a new generation (unchanged papers' chunks are copied into it) that replaces
the active one only once complete, so a crash at any moment leaves the previous index
serving. The next run towards the same corpus resumes the unfinished generation; any other
run discards it. Identical abstracts (after markup cleaning) are indexed once, with a warning.
Chunk ids are stable, so indexing twice changes nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
    """What an index run did. `stages` are the seconds it spent in each part of the work:
    read_stored (chunk ids and hashes already in the store), chunk, copy (unchanged papers'
    vectors into the new generation), embed and write (the new chunks); the rest of `seconds`
    is opening, checking and switching generations."""

    papers: int
    chunks: int
    embedded_papers: int
    embedded_chunks: int
    deleted_chunks: int
    seconds: float
    collection: str
    warnings: tuple[str, ...] = ()  # about the corpus (repeated abstracts)
    notes: tuple[str, ...] = ()  # about the store (an interrupted update resumed or discarded)
    stages: dict[str, float] = field(default_factory=dict)


_WARNINGS_SHOWN = 10
_DISCARDED = "Discarded the unfinished index update of an interrupted run; the index in use was never changed by it."


def distinct_papers(papers: list[Paper]) -> tuple[list[Paper], list[str]]:
    """The papers to index, each abstract once (compared after markup cleaning), and a warning
    for every repeat naming both positions. The first occurrence is the one indexed, so
    retrieval has one entry per distinct paper."""
    first: dict[str, Paper] = {}
    kept: list[Paper] = []
    warnings: list[str] = []
    for paper in papers:
        original = first.setdefault(paper.text, paper)
        if original is paper:
            kept.append(paper)
        else:
            warnings.append(f"{paper.label} repeats the abstract of {original.label}; indexed once, as {original.label}.")
    if len(warnings) > _WARNINGS_SHOWN:
        warnings[_WARNINGS_SHOWN:] = [f"... and {len(warnings) - _WARNINGS_SHOWN} more repeated abstracts, each indexed once."]
    return kept, warnings


def corpus_fingerprint(papers: list[Paper], settings: Settings) -> str:
    """Identifies the indexed corpus: changes when any distinct paper or chunking/embedding
    setting changes. Computed from the papers alone, so checking it at start-up chunks nothing."""
    pairs = sorted((paper.id, paper_hash(paper, settings)) for paper in distinct_papers(papers)[0])
    return hashlib.sha1(repr(pairs).encode()).hexdigest()[:16]


def build_index(
    papers: list[Paper],
    corpus: list[Path],
    settings: Settings,
    store: Store,
    embedder: Callable[[], BaseEmbedding],
    rebuild: bool = False,
    progress: Progress | None = None,
    fingerprint: str | None = None,
) -> IndexReport:
    """Bring the store in line with `papers`, embedding only what is new or changed.

    `embedder` gives the embedding model; it is called only if something must be embedded,
    so an index that is already up to date costs neither loading the model nor chunking.
    `rebuild` embeds every paper again into a fresh generation. `fingerprint` is the papers'
    `corpus_fingerprint` when the caller has computed it.
    """
    started = time.perf_counter()
    model, dim = embedding_identity(settings)
    fingerprint = fingerprint or corpus_fingerprint(papers, settings)
    papers, warnings = distinct_papers(papers)
    paths = [str(p) for p in corpus]
    notes: list[str] = []
    with store.writing():
        active = store.active()
        if active is not None and not rebuild:
            store.check_embedding(active, model)
            info = store.info()
            # The fingerprint is recorded only when a generation is complete, and the chunk
            # count with it: if both hold, every paper is already indexed as is.
            if info is not None and info.fingerprint == fingerprint and info.recorded_chunks in (-1, info.chunks):
                if store.discard_unfinished():
                    notes.append(_DISCARDED)
                if info.corpus != paths:
                    store.mark_complete(active, fingerprint, paths)  # the same papers, from moved files
                return IndexReport(
                    len(papers), info.chunks, 0, 0, 0, time.perf_counter() - started, info.collection,
                    tuple(warnings), tuple(notes),
                )
        base = None if rebuild else active  # where the chunks of unchanged papers are copied from
        target = None if rebuild else store.unfinished(fingerprint)
        if store.discard_unfinished(keep=target):
            notes.append(_DISCARDED)
        if target is not None:
            notes.append("Resumed an interrupted index update of these files: only what it had not written was embedded.")
        else:
            if dim is None:  # remote embedders: learn the dimension from one real vector
                dim = len(embedder().get_text_embedding("dimension probe"))
            target = store.new_generation(model, dim, target=fingerprint)

        stages = dict.fromkeys(("read_stored", "chunk", "copy", "embed", "write"), 0.0)
        mark = time.perf_counter()
        wanted = {paper.id: paper_hash(paper, settings) for paper in papers}
        stored = store.paper_hashes(base) if base is not None else {}
        written = store.paper_hashes(target)  # empty unless resuming
        stages["read_stored"] = time.perf_counter() - mark
        store.delete(target, [cid for pid, (digest, ids) in written.items() if wanted.get(pid) != digest for cid in ids])
        done = {cid for pid, (digest, ids) in written.items() if wanted.get(pid) == digest for cid in ids}
        reused = [cid for pid, (digest, ids) in stored.items() if wanted.get(pid) == digest for cid in ids]
        changed = [paper for paper in papers if stored.get(paper.id, ("", []))[0] != wanted[paper.id]]
        mark = time.perf_counter()
        todo = [node for node in chunk_papers(changed, settings) if node.node_id not in done]
        stages["chunk"] = time.perf_counter() - mark
        mark = time.perf_counter()
        store.copy(base, target, [cid for cid in reused if cid not in done])
        stages["copy"] = time.perf_counter() - mark

        # Embed in batches sorted by length (less padding), writing each batch as it completes,
        # so an interrupted run that is resumed loses at most one batch of work.
        todo.sort(key=lambda n: len(n.text))
        batch = settings.embed_batch_size
        if progress:
            progress(0, len(todo))
        if todo:
            model_instance = embedder()
            for start in range(0, len(todo), batch):
                part = todo[start : start + batch]
                mark = time.perf_counter()
                vectors = model_instance.get_text_embedding_batch([n.text for n in part])
                embedded = time.perf_counter()
                store.upsert(target, part, vectors)
                stages["embed"] += embedded - mark
                stages["write"] += time.perf_counter() - embedded
                if progress:
                    progress(min(start + batch, len(todo)), len(todo))
        store.mark_complete(target, fingerprint, paths)  # the fingerprint last, then the switch
        store.activate(target)
    final = set(reused) | done | {node.node_id for node in todo}
    replaced = {cid for _, ids in stored.values() for cid in ids} - final
    return IndexReport(
        papers=len(papers),
        chunks=len(final),
        embedded_papers=len({node.metadata["paper_id"] for node in todo}),
        embedded_chunks=len(todo),
        deleted_chunks=len(replaced),
        seconds=time.perf_counter() - started,
        collection=target.name,
        warnings=tuple(warnings),
        notes=tuple(notes),
        stages=stages,
    )
