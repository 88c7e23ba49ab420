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
from typing import Any, TypeVar

from .answer import AnswerEngine
from .config import Settings
from .embed import MiniLMEmbedding, encode as encode_with
from .errors import LLMError, QuestionError
from .evidence import SentenceBank
from .judge import Fitted, Judge
from .kinds import KindReader
from .labels import LabelBook, Labeler
from .llm import ModelHandle, backend_of
from .opening import open_collection, reindex  # reindex: `assistant index`, part of the API
from .prompting import Prompter
from .prompts import Prompts, load_prompts
from .rerank import LazyCrossEncoder
from .retrieve import HybridRetriever
from .store import IndexInfo, Store
from .table import TableBuilder, check_columns, resolve_papers
from .topic_list import TopicLister
from .topics import TopicGroup, group_papers
from .types import Answer, Cell, Evidence, Paper, Passage, Row, Table

__all__ = ["Assistant", "Notices", "reindex"]

log = logging.getLogger(__name__)

Notify = Callable[[str], None]
T = TypeVar("T")


class Notices:
    """Where the assistant's messages to a user go (model loading, index updates, a restarted
    server): the notify given at start-up, then every listener added later (the UI's status line)."""

    def __init__(self, notify: Notify | None = None) -> None:
        self.listeners: list[Notify] = [notify] if notify else []

    def __call__(self, message: str) -> None:
        for listener in list(self.listeners):
            listener(message)


def _minilm_encoder(embedder: Any) -> Callable[[list[str]], Any]:
    """MiniLM vectors for the kind reader: the store's embedder when it is MiniLM, else its own copy."""
    model = embedder if isinstance(embedder, MiniLMEmbedding) else MiniLMEmbedding()
    return model.encode


class Assistant:
    """Question answering over a paper collection with verified citations.

    Its parts are built in one place, `from_settings`, each chosen once from the settings, and
    passed in; the constructor only wires them together."""

    def __init__(self, settings: Settings, store: Store, embedder: Any, papers: list[Paper], *, llm: ModelHandle,
                 reranker: LazyCrossEncoder, kinds: KindReader, fitted: Fitted, prompts: Prompts,
                 labels: LabelBook, notices: Notices, info: IndexInfo | None = None) -> None:
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.papers = papers
        self.by_id = {p.id: p for p in papers}
        self.notices = notices
        self.model = llm
        self.startup_seconds: float | None = None
        self.retriever = HybridRetriever(settings, store, embedder, self.by_id, notify=notices, info=info)
        encode = functools.partial(encode_with, embedder)
        sentences = SentenceBank(encode)
        prompter = Prompter(settings, prompts, sentences, llm.get)
        topics = TopicLister(settings, self.retriever, sentences, reranker, prompter, llm.get, encode)
        self.engine = AnswerEngine(settings, self.retriever, encode=encode, sentences=sentences, prompts=prompts,
                                   prompter=prompter, judge=Judge(llm.get, prompts, fitted), topics=topics,
                                   kinds=kinds, model=llm, rerank=reranker)
        self.tables = TableBuilder(settings, sentences, encode, llm.get, prompts, topics, reranker)
        self.labels = Labeler(labels, prompts.label.format(), prompter.about, llm.get)
        self.warm_error: str | None = None  # why a background warm-up failed, if it did
        self._groups: list[TopicGroup] | None = None
        self._warming: threading.Thread | None = None
        # Questions and tables in progress, and when the last one ended: reading ahead waits for quiet.
        self._activity = threading.Lock()
        self._busy = 0
        self._last_active = time.monotonic()
        self._stop_reading = threading.Event()
        self._reader: threading.Thread | None = None
        self.read_ahead_progress = (0, 0)  # (papers read ahead, papers to read) of the current read-ahead

    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, notify: Notify | None = None, progress: Any = None,
        fitted: Fitted | None = None, **overrides: Any
    ) -> Assistant:
        """Open (and if needed build or update) the index described by `settings`, and build the parts.

        The index builds itself on first use; when the corpus changed, only changed papers
        are re-embedded. An index built with another embedding model is an error. `fitted`
        replaces the judge's fitted rules (`assistant/data/decision.json`), for fitting them.
        """
        started = time.perf_counter()
        settings = settings or Settings(**overrides)
        notices = Notices(notify)
        opened = open_collection(settings, notices, progress)
        labels = LabelBook(settings.index_dir)
        assistant = cls(
            settings, opened.store, opened.embedder,
            # Labels are display only (see `labels`): applied after the index is checked against the papers.
            labels.apply(opened.papers),
            llm=ModelHandle(settings, notices), reranker=LazyCrossEncoder(),  # the cross-encoder: topic lists and yes/no table cells
            kinds=KindReader(_minilm_encoder(opened.embedder)), fitted=fitted or Fitted.load(), prompts=load_prompts(),
            labels=labels, notices=notices, info=opened.info,
        )
        assistant.startup_seconds = time.perf_counter() - started
        return assistant

    def listen(self, listener: Notify) -> None:
        """Have `listener` hear the assistant's messages too (after the notify given at start-up)."""
        self.notices.listeners.append(listener)

    def notify(self, message: str) -> None:
        """Tell the user something (every listener hears it)."""
        self.notices(message)

    @property
    def timings(self) -> dict[str, float]:
        """Seconds of start-up ("startup") and of the model's start ("llm_start"), where measured."""
        measured = {"startup": self.startup_seconds, "llm_start": self.model.start_seconds}
        return {name: seconds for name, seconds in measured.items() if seconds is not None}

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

    def topic_rows(self, topic: str, source: str | None = None, notices: list[str] | None = None) -> tuple[list[Row], list[Row]]:
        """The papers on `topic` (each with the sentence of its abstract that shows it) and those possibly
        related, chosen as for a topic question; what went wrong goes to `notices`."""
        return self.tables.topic_rows(topic, source=source, notices=notices)

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
            rows, related = self.topic_rows(topic, source=source, notices=notices)
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
        self.model.quiet = not report
        if not background:
            try:
                self.engine.warm_up()
            finally:
                self.model.quiet = False
            return None

        def run() -> None:
            try:
                self.engine.warm_up()
            except Exception as exc:  # noqa: BLE001 - kept for the status line; the next question retries
                self.warm_error = str(exc)
                log.warning("Warming up the language model failed: %s", exc)
            finally:
                self.model.quiet = False  # a later start (after a failure or a crash) reports its steps

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

    def unkept(self, papers: list[str] | None = None, source: str | None = None) -> list[Paper]:
        """The papers (as `keep_papers` chooses them) whose question state the embedded model no longer
        has at hand: never read, or removed to stay within `llm_kept_states_mb`. Questions about them
        read the whole abstract again, and topic lists weigh them without the model's odds. Empty
        with a backend that keeps nothing. A few milliseconds a paper (nothing is read)."""
        return [p for p in self.papers_of(papers, source) if self.engine.prompter.kept(p) is False]

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
        if idle <= 0 or backend_of(self.settings) != "local":
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
        return self.model.get()

    @property
    def llm_loaded(self) -> Any:
        """The language model if it is already connected, else None (never starts it)."""
        return self.model.loaded

    @property
    def sources(self) -> list[str]:
        return self.retriever.sources

    def close(self) -> None:
        """Stop reading ahead, and the local LLM server if this assistant started one."""
        self.stop_read_ahead()
        self.model.close()

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
