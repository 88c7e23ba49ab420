"""Opening the collection: which corpus files, the index checked against them (and brought up to
date when they changed), and `reindex` for `assistant index`.

Start-up reads the index's record once (`Store.info`), checks its embedding model once, and
fingerprints the papers once; the opened `Collection` carries what it found to the retriever.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import BUNDLED_CORPUS, Settings
from .embed import embedding_identity, make_embedder
from .errors import StoreDamagedError
from .index import IndexReport, build_index, corpus_fingerprint
from .load import load_papers
from .retrieve import load_bm25
from .manifest import recorded_corpus
from .store import IndexInfo, Store, move_aside
from .types import Paper

Notify = Callable[[str], None]


@dataclass(frozen=True)
class Collection:
    """An opened, up-to-date index and the papers it holds."""

    store: Store
    info: IndexInfo
    embedder: Any
    papers: list[Paper]


def resolve_corpus(settings: Settings, info: IndexInfo | None) -> list[Path]:
    """The corpus files: as set, else what the index (`info`) was built from, else the bundled lists."""
    if settings.corpus:
        return [Path(p) for p in settings.corpus]
    if info is not None and info.corpus and all(Path(p).is_file() for p in info.corpus):
        return [Path(p) for p in info.corpus]
    return sorted(BUNDLED_CORPUS.glob("*.txt"))


def parse_cache(settings: Settings) -> Path:
    """Where parsed corpus files are kept, keyed by their content (see `load.load_file`)."""
    return Path(settings.cache_dir).expanduser() / "papers"


def open_collection(settings: Settings, say: Notify, progress: Any = None) -> Collection:
    """Open (and if needed build or update) the index described by `settings`.

    The index builds itself on first use; when the corpus changed, only changed papers are
    re-embedded. An index built with another embedding model is an error.
    """
    store = Store(settings)
    if settings.corpus:  # the corpus files are read first: a broken one is reported before the store is asked
        corpus = resolve_corpus(settings, None)
        papers = load_papers(corpus, parse_cache(settings))
        info = store.info()
    else:
        info = store.info()
        corpus = resolve_corpus(settings, info)
        papers = load_papers(corpus, parse_cache(settings))
    embedder = functools.cache(functools.partial(make_embedder, settings))
    if info is not None and info.chunks:
        # Another embedder is an error to report as such, not an update to announce.
        store.check_embedding(store.active(), embedding_identity(settings)[0])
    fingerprint = corpus_fingerprint(papers, settings)
    if info is None or not info.chunks or info.fingerprint != fingerprint:
        say(_update_reason(info, settings))
        report = build_index(papers, corpus, settings, store, embedder, progress=progress, fingerprint=fingerprint)
        for line in (*report.warnings, *report.notes):
            say(line)
        say(f"Indexed {report.papers} papers ({report.embedded_chunks} chunks embedded) in {report.seconds:.1f} s.")
        info = store.info()
    if info is None or not info.chunks:
        info = store.require(embedding_identity(settings)[0])  # raises: the index is missing
    return Collection(store, info, embedder(), papers)


def _update_reason(info: IndexInfo | None, settings: Settings) -> str:
    """What start-up says before it updates the index: the first build, or what changed."""
    if info is None or not info.chunks:
        return "Building the index (first run)…"
    if info.chunking and info.chunking != f"{settings.chunk_size}/{settings.chunk_overlap}":
        return "Chunking settings changed: re-chunking the index…"
    return "Corpus changed: updating the index…"


def reindex(settings: Settings, paths: list[Path] | None = None, rebuild: bool = False, progress: Any = None) -> IndexReport:
    """Index `paths` (or the current corpus); used by `assistant index`.

    With `rebuild`, an embedded store too damaged to open is moved aside (kept) and a fresh
    one is built from the files it was built from, per its manifest.
    """
    try:
        return _reindex(settings, paths, rebuild, progress, Store(settings))
    except StoreDamagedError:
        if not rebuild or settings.chroma_host:
            raise
    recorded = [Path(p) for p in recorded_corpus(settings.index_dir)]
    moved = move_aside(settings)
    notes = [
        f"The store in {settings.index_dir} could not be opened; it was moved to {moved} (delete it when you no "
        "longer need it) and a fresh index was built."
    ]
    if not paths and not settings.corpus:
        if recorded and all(p.is_file() for p in recorded):
            paths = recorded
        else:
            notes.append("Its corpus files are unknown, so the bundled abstracts were indexed; "
                         "run `assistant index YOUR_FILES --rebuild` to index others.")
    report = _reindex(settings, paths, rebuild, progress, Store(settings))
    return dataclasses.replace(report, notes=(*notes, *report.notes))


def _reindex(settings: Settings, paths: list[Path] | None, rebuild: bool, progress: Any, store: Store) -> IndexReport:
    corpus = paths or resolve_corpus(settings, store.info())
    papers = load_papers(corpus, parse_cache(settings))
    report = build_index(papers, corpus, settings, store, functools.partial(make_embedder, settings), rebuild=rebuild, progress=progress)
    load_bm25(settings, store)  # built and saved now, so the next start-up only opens it
    return report
