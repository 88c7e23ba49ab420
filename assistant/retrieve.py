"""Retrieve: hybrid search (Chroma dense + BM25 keyword), fused per paper.

The dense side asks llama-index's Chroma vector store; the keyword side is the bm25s index
that llama-index's `BM25Retriever` builds over the stored chunks and saves, keyed by the
index's fingerprint. Both are queried below their retriever wrappers, which would turn every
hit into a node before our fusion needs only its paper (see `_dense` and `_keyword`). Fusion is
ours: we fuse at the paper level (best chunk per paper on each side) and keep each side's
raw score, which the answer stage needs for its relevance check and which
`QueryFusionRetriever` does not expose. A stored chunk whose paper the corpus does not know
(an index out of step with its files) is skipped, and reported once, never an error.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters, VectorStoreQuery
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.retrievers.bm25 import BM25Retriever

from .config import Settings
from .embed import embedding_identity
from .errors import QuestionError
from .store import IndexInfo, Store
from .types import Paper, Passage

_RRF_K = 60  # the constant of the original reciprocal-rank-fusion paper


@dataclass
class _Side:
    score: float
    rank: int
    text: str | None  # None: a keyword hit whose text is read from the saved corpus when shown
    chunk: int = -1  # the keyword hit's row in the BM25 corpus


def bm25_folder(settings: Settings) -> Path:
    """Where the keyword index is kept: beside the embedded store, or in the cache folder for
    a Chroma server's collection (one slot per collection name; another server's collection
    of the same name only replaces it, as the saved index is checked against the collection)."""
    if settings.chroma_host:
        return Path(settings.cache_dir).expanduser() / "bm25" / re.sub(r"[^\w.-]", "_", settings.collection)
    return settings.index_dir / "bm25"


def build_bm25(nodes: list[TextNode], settings: Settings) -> BM25Retriever:
    """A keyword index over `nodes` (English stemming and stop words)."""
    return BM25Retriever.from_defaults(
        nodes=nodes, stemmer=Stemmer.Stemmer("english"), language="english",
        similarity_top_k=min(len(nodes), settings.candidates * 3),
    )


def _open_saved_bm25(folder: Path, chunks: int) -> BM25Retriever | None:
    """A saved keyword index, memory-mapped (its texts and postings stay on disk), or None."""
    if not folder.is_dir():
        return None
    try:
        bm25 = BM25Retriever.from_persist_dir(str(folder), mmap=True, show_progress=False)
    except Exception:  # unreadable or written by another version: the caller builds it again
        return None
    return bm25 if int(bm25.bm25.scores.get("num_docs", -1)) == chunks else None


def load_bm25(settings: Settings, store: Store, info: IndexInfo | None = None) -> BM25Retriever:
    """The keyword index of the active collection, built once and then loaded from disk.

    It is saved under the collection's name and corpus fingerprint, so a start-up with an
    unchanged index maps one folder instead of reading every chunk from Chroma, and any
    change to the index (a rebuild, an update) gets a fresh one. `info` is the active index's
    record when the caller has read and checked it.
    """
    info = info or store.require(embedding_identity(settings)[0])
    folder = bm25_folder(settings)
    saved = folder / f"{info.collection}-{info.fingerprint}"
    bm25 = _open_saved_bm25(saved, info.chunks)
    if bm25 is not None:
        return bm25
    bm25 = build_bm25(store.nodes(), settings)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=folder, prefix=".partial-"))
        bm25.persist(str(partial), show_progress=False)
        shutil.rmtree(saved, ignore_errors=True)
        partial.rename(saved)
        for other in folder.iterdir():  # keyword indexes of earlier generations or corpora
            if other != saved:
                shutil.rmtree(other, ignore_errors=True)
    except OSError:
        return bm25  # a read-only folder only costs building it again at the next start-up
    # The same index, mapped from disk: its texts need not stay in memory.
    return _open_saved_bm25(saved, info.chunks) or bm25


class HybridRetriever:
    """Dense + BM25 retrieval over the active index, one ranked entry per paper."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        embedder: BaseEmbedding,
        papers: dict[str, Paper],
        notify: Callable[[str], None] | None = None,
        info: IndexInfo | None = None,
    ) -> None:
        """`info`: the active index's record, when the caller has read and checked it."""
        self.settings = settings
        self.papers = papers
        self.embedder = embedder
        self.notify = notify or (lambda message: None)
        self.unknown: set[str] = set()  # paper ids of stored chunks the corpus does not have
        self.vector_store = store.vector_store()
        self.sources = sorted({paper.source for paper in papers.values()})
        # bm25s logs a warning per query for tokens absent from the corpus; that is expected.
        logging.getLogger("bm25s").setLevel(logging.ERROR)
        self.bm25 = load_bm25(settings, store, info)
        self._rows = np.arange(int(self.bm25.bm25.scores["num_docs"]))
        self._row_meta: dict[int, tuple[str, str]] = {}  # corpus row -> (paper id, source), read once
        self._source_masks: dict[str, np.ndarray] = {}

    def _dense(self, query: QueryBundle, source: str | None, n: int) -> list[NodeWithScore]:
        """The `n` closest chunks. Asked of the Chroma vector store directly: a llama-index
        `VectorIndexRetriever` would only wrap the same nodes (and instrument the call) before
        our own per-paper fusion."""
        filters = MetadataFilters(filters=[ExactMatchFilter(key="source", value=source)]) if source else None
        found = self.vector_store.query(
            VectorStoreQuery(query_embedding=query.embedding, similarity_top_k=n, filters=filters)
        )
        return [NodeWithScore(node=node, score=score) for node, score in zip(found.nodes or [], found.similarities or [])]

    def _keyword(self, query: QueryBundle, source: str | None) -> list[tuple[int, float]]:
        """(corpus row, BM25 score) of the best chunks, best first.

        The query goes to the retriever's own bm25s index with its own tokenizer settings, but
        not through `BM25Retriever.retrieve`: that parses every hit into a node from the saved
        corpus (about 20 us each, 60 hits: most of the keyword side's time), while fusion needs
        only each hit's paper and the text of the few papers shown. bm25s is handed row numbers
        as its corpus, so it returns rows, and a source's chunks are chosen by its weight mask.
        """
        bm25 = self.bm25
        tokens = bm25s.tokenize(query.query_str, stemmer=bm25.stemmer, token_pattern=bm25.token_pattern, show_progress=False)
        rows, scores = bm25.bm25.retrieve(
            tokens, corpus=self._rows, k=bm25.similarity_top_k, show_progress=False,  # at most the chunks: see BM25Retriever
            weight_mask=self._source_mask(source) if source else None,
        )
        return [(int(row), float(score)) for row, score in zip(rows[0], scores[0])]

    def _meta(self, row: int) -> tuple[str, str]:
        if row not in self._row_meta:
            chunk = self.bm25.corpus[row]
            self._row_meta[row] = (str(chunk.get("paper_id")), str(chunk.get("source")))
        return self._row_meta[row]

    def _source_mask(self, source: str) -> np.ndarray:
        if source not in self._source_masks:
            self._source_masks[source] = np.array([self._meta(row)[1] == source for row in range(len(self._rows))], dtype=float)
        return self._source_masks[source]

    def _chunk_text(self, row: int) -> str:
        return metadata_dict_to_node(self.bm25.corpus[row]).get_content()

    def _report_unknown(self, paper_id: str) -> None:
        """Note a stored chunk of a paper the corpus does not have; say so once per process."""
        if not self.unknown:
            self.notify(
                f"The index holds passages of papers that its corpus files do not have (such as {paper_id}), "
                "left by an interrupted or older update; they are skipped. "
                "Run `assistant index --rebuild` to rebuild the index from the corpus."
            )
        self.unknown.add(paper_id)

    def _best_dense_per_paper(self, hits: list[NodeWithScore]) -> dict[str, _Side]:
        best: dict[str, _Side] = {}
        for hit in hits:
            paper_id = str(hit.node.metadata.get("paper_id"))
            if paper_id not in self.papers:
                self._report_unknown(paper_id)
                continue
            # The Chroma integration reports exp(-distance); with cosine distance that is exp(cos - 1).
            score = 1.0 + math.log(max(hit.score or 0.0, 1e-12))
            if paper_id not in best or score > best[paper_id].score:
                best[paper_id] = _Side(score, 0, hit.node.get_content())
        return self._ranked(best)

    def _best_keyword_per_paper(self, hits: list[tuple[int, float]], source: str | None) -> dict[str, _Side]:
        best: dict[str, _Side] = {}
        for row, score in hits:
            paper_id, paper_source = self._meta(row)
            if source is not None and paper_source != source:
                continue  # a masked chunk (score 0) fills the list when the source has too few
            if paper_id not in self.papers:
                self._report_unknown(paper_id)
                continue
            if paper_id not in best or score > best[paper_id].score:
                best[paper_id] = _Side(score, 0, None, row)
        return self._ranked(best)

    @staticmethod
    def _ranked(best: dict[str, _Side]) -> dict[str, _Side]:
        for rank, paper_id in enumerate(sorted(best, key=lambda p: -best[p].score), start=1):
            best[paper_id].rank = rank
        return best

    def retrieve(
        self,
        question: str,
        k: int | None = None,
        source: str | None = None,
        fusion: str | None = None,
        embedding: list[float] | None = None,
        timings: dict[str, float] | None = None,
    ) -> list[Passage]:
        """The `k` best papers for `question`, best first (optionally only from corpus file `source`).

        `embedding` is the question's vector when the caller already has it (it is not recomputed).
        `timings`, if given, receives the seconds of each part: query_embedding, dense, keyword, fuse.
        """
        spent = timings if timings is not None else {}
        mark = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal mark
            now = time.perf_counter()
            spent[stage] = now - mark
            mark = now

        question = question.strip()
        if not question:
            raise QuestionError("The question is empty. Type a question about the papers.")
        if source is not None and source not in self.sources:
            raise QuestionError(f"Unknown source file '{source}'. Indexed files: {', '.join(self.sources)}.")
        k = k or self.settings.k
        fusion = fusion or self.settings.fusion
        query = QueryBundle(query_str=question, embedding=embedding or self.embedder.get_query_embedding(question))
        lap("query_embedding")
        n = max(self.settings.candidates, k * 3)
        dense = self._best_dense_per_paper(self._dense(query, source, n)) if fusion != "bm25" else {}
        lap("dense")
        keyword = self._best_keyword_per_paper(self._keyword(query, source), source) if fusion != "dense" else {}
        lap("keyword")
        scores = self._fuse(dense, keyword, fusion)
        ranked = sorted(scores, key=lambda p: -scores[p])[:k]
        passages = []
        for paper_id in ranked:
            side = dense.get(paper_id) or keyword[paper_id]
            passages.append(
                Passage(
                    paper=self.papers[paper_id],
                    text=side.text if side.text is not None else self._chunk_text(side.chunk),
                    score=round(scores[paper_id], 4),
                    dense_score=round(dense[paper_id].score, 4) if paper_id in dense else 0.0,
                    keyword_score=round(keyword[paper_id].score, 4) if paper_id in keyword else 0.0,
                )
            )
        lap("fuse")
        return passages

    def _fuse(self, dense: dict[str, _Side], keyword: dict[str, _Side], fusion: str) -> dict[str, float]:
        if fusion == "dense":
            return {p: s.score for p, s in dense.items()}
        if fusion == "bm25":
            return {p: s.score for p, s in keyword.items()}
        if fusion == "rrf":
            papers = set(dense) | set(keyword)
            return {
                p: sum(1.0 / (_RRF_K + side[p].rank) for side in (dense, keyword) if p in side) for p in papers
            }
        # Score-aware fusion: dense cosine kept on its own scale (it is comparable across
        # queries), BM25 scaled by the query's best BM25 score; weighted toward dense.
        w = self.settings.dense_weight
        top = max((s.score for s in keyword.values()), default=0.0) or 1.0
        papers = set(dense) | set(keyword)
        floor = min((s.score for s in dense.values()), default=0.0)
        return {
            p: w * (dense[p].score if p in dense else floor) + (1 - w) * (keyword[p].score / top if p in keyword else 0.0)
            for p in papers
        }
