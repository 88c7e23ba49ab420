"""The public Python API: `Assistant` ties settings, index, retrieval and answering together.

    from assistant import Assistant
    a = Assistant.from_settings()
    a.retrieve("question", k=5); a.ask("question", history=[...]); a.stream("question")
    for event in a.events("question"): ...   # Evidence, then str tokens, then the Answer
    a.table(["What speedup?", "Compared with what?"], topic="KV cache")   # a Table, a quoted cell per paper
    for event in a.table_events([...], papers=["Vegas", "ARM"]): ...    # each Row, each Cell, then the Table
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .answer import AnswerEngine
from .judge import Fitted
from .kinds import KindReader
from .config import BUNDLED_CORPUS, Settings
from .embed import embedding_identity, make_embedder
from .errors import LLMError, QuestionError, StoreDamagedError
from .index import IndexReport, build_index, corpus_fingerprint
from .labels import LabelBook, Labeler
from .load import load_papers
from .retrieve import HybridRetriever, load_bm25
from .store import IndexInfo, Store, move_aside, recorded_corpus
from .table import TableBuilder, check_columns, resolve_papers
from .topics import TopicGroup, group_papers
from .types import Answer, Cell, Evidence, Paper, Passage, Row, Table

log = logging.getLogger(__name__)

Notify = Callable[[str], None]
T = TypeVar("T")


def resolve_corpus(settings: Settings, store: Store) -> list[Path]:
    """The corpus files: as set, else what the index was built from, else the bundled lists."""
    if settings.corpus:
        return [Path(p) for p in settings.corpus]
    info = store.info()
    if info is not None and info.corpus and all(Path(p).is_file() for p in info.corpus):
        return [Path(p) for p in info.corpus]
    return sorted(BUNDLED_CORPUS.glob("*.txt"))


def _minilm_encoder(embedder: Any) -> Callable[[list[str]], Any]:
    """MiniLM vectors for the kind reader: the store's embedder when it is MiniLM, else its own copy."""
    from .embed import MiniLMEmbedding

    model = embedder if isinstance(embedder, MiniLMEmbedding) else MiniLMEmbedding()
    return model.encode


def parse_cache(settings: Settings) -> Path:
    """Where parsed corpus files are kept, keyed by their content (see `load.load_file`)."""
    return Path(settings.cache_dir).expanduser() / "papers"


class Assistant:
    """Question answering over a paper collection with verified citations."""

    def __init__(self, settings: Settings, store: Store, embedder: Any, papers: list[Paper]) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.papers = papers
        self.by_id = {p.id: p for p in papers}
        self.notify: Notify = lambda message: None
        # Through a lambda: `notify` is replaced after construction (by from_settings, the UI).
        self.retriever = HybridRetriever(settings, store, embedder, self.by_id, notify=lambda m: self.notify(m))
        self.timings: dict[str, float] = {}
        self.engine = AnswerEngine(settings, self.retriever, embedder, self._connect_llm,
                                   KindReader(_minilm_encoder(embedder)), Fitted.load())
        self.tables = TableBuilder(settings, self.engine.sentences, self.engine._encode, lambda: self.engine.llm,
                                   self.engine.prompts, self.engine.topics)
        self.labels = Labeler(LabelBook(settings.index_dir), self.engine.prompts.label.format(),
                              self.engine.prompter.about, lambda: self.engine.llm)
        self.warm_error: str | None = None  # why a background warm-up failed, if it did
        self._groups: list[TopicGroup] | None = None
        self._warming: threading.Thread | None = None
        self._quiet_start = False  # a warm-up asked not to report the model's loading steps
        # Questions and tables in progress, and when the last one ended: reading ahead waits for quiet.
        self._activity = threading.Lock()
        self._busy = 0
        self._last_active = time.monotonic()
        self._stop_reading = threading.Event()
        self._reader: threading.Thread | None = None
        self.read_ahead_progress = (0, 0)  # (papers read ahead, papers to read) of the current read-ahead

    def _connect_llm(self) -> Any:
        from .llm import connect

        mark = time.perf_counter()
        llm = connect(self.settings, progress=None if self._quiet_start else self.notify, notify=lambda m: self.notify(m))
        self.timings["llm_start"] = time.perf_counter() - mark
        return llm

    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, notify: Notify | None = None, progress: Any = None, **overrides: Any
    ) -> Assistant:
        """Open (and if needed build or update) the index described by `settings`.

        The index builds itself on first use; when the corpus changed, only changed papers
        are re-embedded. An index built with another embedding model is an error.
        """
        started = time.perf_counter()
        settings = settings or Settings(**overrides)
        say = notify or (lambda message: None)
        store = Store(settings)
        corpus = resolve_corpus(settings, store)
        papers = load_papers(corpus, parse_cache(settings))
        info = store.info()
        embedder = functools.cache(functools.partial(make_embedder, settings))
        if info is not None and info.chunks:
            # Another embedder is an error to report as such, not an update to announce.
            store.check_embedding(store.active(), embedding_identity(settings)[0])
        if info is None or not info.chunks or info.fingerprint != corpus_fingerprint(papers, settings):
            say(_update_reason(info, settings))
            report = build_index(papers, corpus, settings, store, embedder, progress=progress)
            for line in (*report.warnings, *report.notes):
                say(line)
            say(f"Indexed {report.papers} papers ({report.embedded_chunks} chunks embedded) in {report.seconds:.1f} s.")
        # Labels are display only (see `labels`): applied after the index is checked against the papers.
        assistant = cls(settings, store, embedder(), LabelBook(settings.index_dir).apply(papers))
        if notify:
            assistant.notify = notify
        assistant.timings["startup"] = time.perf_counter() - started
        return assistant

    def retrieve(
        self, question: str, k: int | None = None, source: str | None = None, timings: dict[str, float] | None = None
    ) -> list[Passage]:
        """Ranked papers for `question`, one entry per paper (optionally from one corpus file).

        `timings`, if given, receives the seconds of each part (query_embedding, dense, keyword, fuse)."""
        return self.retriever.retrieve(question, k=k or self.settings.k, source=source, timings=timings)

    def ask(
        self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None
    ) -> Answer:
        """A short answer whose every claim cites its paper, or an honest refusal."""
        return _last(self.events(question, history=history, k=k, source=source), Answer)

    def stream(
        self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None
    ) -> Iterator[str | Answer]:
        """Draft tokens as they are generated, then the final verified `Answer` (`events` without
        the `Evidence`)."""
        with contextlib.closing(self.events(question, history=history, k=k, source=source)) as events:
            for event in events:
                if not isinstance(event, Evidence):
                    yield event

    def events(
        self, question: str, history: list[dict[str, str]] | None = None, k: int | None = None, source: str | None = None
    ) -> Iterator[Evidence | str | Answer]:
        """One `Evidence` (the papers being read and their closest sentences) as soon as retrieval is
        done, then draft tokens as the model writes them, then the final verified `Answer`. A Chinese
        question that names a paper gets an earlier `Evidence` with the papers it names, before the
        model translates it for the search."""
        with self._active(), contextlib.closing(self.engine.events(question, history=history, k=k, source=source)) as events:
            for event in events:
                if isinstance(event, Answer) and "first_token" in event.timings:
                    self.warm_error = None  # the model answered: whatever stopped the warm-up is over
                yield event

    def topic_groups(self) -> list[TopicGroup]:
        """The collection grouped into topics (clusters of the stored embeddings, each labelled by
        its distinctive terms), largest first; computed once."""
        if self._groups is None:
            self._groups = group_papers(self.papers, self.store.paper_vectors())
        return self._groups

    def table(
        self, columns: list[str], papers: list[str] | None = None, topic: str | None = None, source: str | None = None
    ) -> Table:
        """Ask every question of `columns` of each paper: a `Table` with one row per paper and one
        quoted cell (or "not stated in the abstract") per question. See `table_events`."""
        return _last(self.table_events(columns, papers=papers, topic=topic, source=source), Table)

    def table_events(
        self, columns: list[str], papers: list[str] | None = None, topic: str | None = None, source: str | None = None
    ) -> Iterator[Row | Cell | Table]:
        """The rows, then each cell as soon as it is filled, then the whole `Table`.

        Rows are `papers` (ids, titles or labels, in that order), else the papers on `topic` (each
        with the sentence that puts it there), else every paper of the corpus file `source`."""
        columns = check_columns(columns, self.settings.max_question_tokens)
        started = time.perf_counter()
        notices: list[str] = []
        related: list[Row] = []
        if topic and not papers:
            rows, related = self.tables.topic_rows(topic, source=source, notices=notices)
            if not rows:
                notices.append(f"No paper in the collection is about {topic}.")
        elif papers or source:
            rows = [Row(p) for p in self.papers_of(papers, source)]
        else:
            raise QuestionError("Say which papers the table is about: papers, a topic or a corpus file.")
        if len(rows) > self.settings.max_table_rows:
            notices.append(f"Only the first {self.settings.max_table_rows} of {len(rows)} papers are in the table "
                           "(ASSISTANT_MAX_TABLE_ROWS raises the limit).")
            rows = rows[: self.settings.max_table_rows]
        chosen = time.perf_counter() - started
        with self._active():
            for event in self.tables.events(rows, columns, topic=topic or "", notices=notices):
                if isinstance(event, Table):
                    event.related = related
                    event.timings["rows"] = chosen
                    if "first_cell" in event.timings:
                        event.timings["first_cell"] += chosen
                    event.timings["total"] = time.perf_counter() - started
                yield event

    def warm_up(self, background: bool = True, report: bool = True) -> threading.Thread | None:
        """Start the language model now, and have it read the fixed instructions, so the first
        question neither waits for the model to load nor reads the instructions cold.

        In the background (the default) a failure is kept in `warm_error` and the first question
        tries again (and reports it); in the foreground it raises. `report=False` keeps the
        loading steps out of `notify` (a terminal prompt is waiting for the user's typing)."""
        self._quiet_start = not report
        if not background:
            try:
                self.engine.warm_up()
            finally:
                self._quiet_start = False
            return None

        def run() -> None:
            try:
                self.engine.warm_up()
            except Exception as exc:  # noqa: BLE001 - kept for the status line; the next question retries
                self.warm_error = str(exc)
                log.warning("Warming up the language model failed: %s", exc)
            finally:
                self._quiet_start = False  # a later start (after a failure or a crash) reports its steps

        self.warm_error = None
        self._warming = threading.Thread(target=run, name="llm-warm-up", daemon=True)
        self._warming.start()
        return self._warming

    def keep_papers(self, papers: list[str] | None = None, source: str | None = None) -> Iterator[Paper]:
        """Have the model read each paper once, as it opens a question about the paper and a table
        row of it, and keep those states on disk: later questions and tables about the papers, in
        this process or a later one, read only their own words. Yields each paper when it is kept.

        All papers, or `papers` (ids, titles or labels), or those of the corpus file `source`.
        Papers read before cost a fraction of a second each. Needs the embedded model; with another
        backend nothing is kept (those servers reuse shared prompt prefixes by themselves)."""
        for paper in self.papers_of(papers, source):
            self.engine.keep_paper(paper)
            self.label(paper)
            self.tables.keep(paper)
            yield self.by_id[paper.id]

    def label(self, paper: Paper) -> Paper:
        """Have the model name `paper` (once; right after reading it costs a second) and show the name
        where it holds against the abstract (`labels`). A model failure leaves the derived title."""
        try:
            verdict = self.labels.write(paper)
        except LLMError as exc:
            self.notify(f"No label for {paper.title}: {exc}")
            return paper
        label = self.labels.book.label(paper) if verdict is not None else ""
        if label:
            labelled = dataclasses.replace(paper, display=label)
            self.by_id[paper.id] = labelled  # the retriever reads papers from here: later answers show it
            self.papers[:] = [labelled if p.id == paper.id else p for p in self.papers]
            return labelled
        return paper

    def read_ahead(self, idle_seconds: float | None = None, papers: list[str] | None = None) -> threading.Thread | None:
        """In the background, have the model read papers ahead while nobody is asking: whenever no
        question or table has been in progress for `idle_seconds` (default: the setting
        `read_ahead_idle_seconds`), it keeps the next paper (`keep_papers`), until every paper (or
        each of `papers`) is kept. A question that arrives meanwhile waits for at most the paper
        being read (about 3 s; a paper read before takes a fraction of a second). Only with the
        embedded model (other servers keep nothing); None when it does not run. Progress is in
        `read_ahead_progress`; `close()` stops it."""
        idle = self.settings.read_ahead_idle_seconds if idle_seconds is None else idle_seconds
        if idle <= 0 or self.settings.llm_backend != "local" or self.settings.llm_base_url:
            return None
        chosen = self.papers_of(papers)
        self.stop_read_ahead()
        self._stop_reading.clear()
        self.read_ahead_progress = (0, len(chosen))
        self._reader = threading.Thread(target=self._read_ahead, args=(chosen, idle), name="read-ahead", daemon=True)
        self._reader.start()
        return self._reader

    def stop_read_ahead(self) -> None:
        """Stop reading ahead (after the paper being read, if any)."""
        self._stop_reading.set()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join()
        self._reader = None

    @property
    def reading_ahead(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def _read_ahead(self, papers: list[Paper], idle: float) -> None:
        for done, paper in enumerate(papers, start=1):
            if not self._wait_until_idle(idle):
                return
            try:
                self.engine.keep_paper(paper)
                self.label(paper)
                if not self._wait_until_idle(idle):
                    return
                self.tables.keep(paper)
            except Exception as exc:  # noqa: BLE001 - a model that stopped ends reading ahead; questions report it
                log.warning("Stopped reading papers ahead: %s", exc)
                return
            self.read_ahead_progress = (done, len(papers))

    def _wait_until_idle(self, idle: float) -> bool:
        """Wait until the model is up and no question or table has been in progress for `idle`
        seconds; False when reading ahead was stopped meanwhile."""
        while not self._stop_reading.is_set():
            with self._activity:
                quiet = 0.0 if self._busy else time.monotonic() - self._last_active
            if self.llm_loaded is None:  # still loading, or its start failed: never start it from here
                quiet = 0.0
            if quiet >= idle:
                return True
            self._stop_reading.wait(min(idle - quiet, 1.0))
        return False

    @contextlib.contextmanager
    def _active(self) -> Iterator[None]:
        """Mark a question or table in progress (reading ahead waits until they are over)."""
        with self._activity:
            self._busy += 1
        try:
            yield
        finally:
            with self._activity:
                self._busy -= 1
                self._last_active = time.monotonic()

    def papers_of(self, papers: list[str] | None = None, source: str | None = None) -> list[Paper]:
        """`papers` (ids, titles or labels, in that order, each once), else every paper of the corpus
        file `source`, else every paper."""
        if papers:
            return resolve_papers(papers, self.papers)
        if source is None:
            return list(self.papers)
        if source not in self.sources:
            raise QuestionError(f"No corpus file is called {source!r}; the files are: {', '.join(self.sources)}.")
        return [p for p in self.papers if p.source == source]

    @property
    def model_state(self) -> str:
        """"ready" (connected), "loading" (a warm-up is starting it), "failed" (the warm-up failed;
        `warm_error` says why, and the next question tries again) or "idle" (starts on first use)."""
        if self._warming is not None and self._warming.is_alive():
            return "loading"
        if self.warm_error:
            return "failed"
        return "ready" if self.llm_loaded is not None else "idle"

    @property
    def llm(self) -> Any:
        """The connected language model (started on first use)."""
        return self.engine.llm

    @property
    def llm_loaded(self) -> Any:
        """The language model if it is already connected, else None (never starts it)."""
        return self.engine.llm_loaded

    @property
    def sources(self) -> list[str]:
        return self.retriever.sources

    def close(self) -> None:
        """Stop reading ahead, and the local LLM server if this assistant started one."""
        self.stop_read_ahead()
        self.engine.close()

    def __enter__(self) -> Assistant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last(events: Iterator[Any], kind: type[T]) -> T:
    """The final value of an event stream (`ask` and `table` are their streams run to the end)."""
    final = None
    for event in events:
        if isinstance(event, kind):
            final = event
    assert final is not None, f"the stream ended without a {kind.__name__}"
    return final


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
    corpus = paths or resolve_corpus(settings, store)
    papers = load_papers(corpus, parse_cache(settings))
    report = build_index(papers, corpus, settings, store, functools.partial(make_embedder, settings), rebuild=rebuild, progress=progress)
    load_bm25(settings, store)  # built and saved now, so the next start-up only opens it
    return report
