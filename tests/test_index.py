"""Indexing: incremental, stable, crash-safe, and recording how the index was built."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from support import CORPUS, SYSRS, VEGAS, corpus_abstracts, corpus_papers, make_settings
from fakes import SimulatedCrash, crash_after_first_batch

from assistant import Assistant, Settings
from assistant.api import reindex
from assistant.chunk import chunk_papers
from assistant.embed import MINILM_DIM, MINILM_NAME, MiniLMEmbedding
from assistant.errors import IndexMismatchError
from assistant.index import IndexReport, build_index, corpus_fingerprint
from assistant.load import load_papers
from assistant import store as store_module
from assistant.retrieve import HybridRetriever
from assistant.store import Store

SMALL_PAPERS = 5  # the first five abstracts of the tests' corpus: a corpus that indexes in about a second
OPENAI = "openai:text-embedding-3-small"


def write_paper_list(path: Path, abstracts: list[str]) -> Path:
    path.write_text("Test papers\n\n" + "\n\n".join(abstracts) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def abstracts() -> list[str]:
    """The abstracts of the tests' corpus, to write paper lists from."""
    return corpus_abstracts()


@pytest.fixture
def small_corpus(tmp_path: Path, abstracts: list[str]) -> Path:
    """A corpus file of its own holding the first few abstracts of the tests' corpus."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    return write_paper_list(folder / "small.txt", abstracts[:SMALL_PAPERS])


def index(corpus: Path, settings: Settings, embedder: MiniLMEmbedding, **kwargs) -> IndexReport:
    return build_index(load_papers([corpus]), [corpus], settings, Store(settings), lambda: embedder, **kwargs)


def stored_chunks(settings: Settings) -> dict[str, tuple[str, dict]]:
    """chunk id -> (text, metadata) of everything in the active collection."""
    got = Store(settings).active().get(include=["documents", "metadatas"])
    return {cid: (text, meta) for cid, text, meta in zip(got["ids"], got["documents"], got["metadatas"])}


def chunks_of(chunks: dict[str, tuple[str, dict]], paper_id: str) -> dict[str, str]:
    return {cid: text for cid, (text, meta) in chunks.items() if meta["paper_id"] == paper_id}


def expected_chunks(corpus: Path, settings: Settings) -> dict[str, str]:
    """chunk id -> text of an index that holds exactly the papers of `corpus`."""
    return {n.node_id: n.text for n in chunk_papers(load_papers([corpus]), settings)}


def generations(settings: Settings) -> list[str]:
    return sorted(c.name for c in Store(settings).generations())


# -- incremental indexing -----------------------------------------------------------------------


def test_indexing_twice_embeds_nothing_the_second_time_and_keeps_the_chunk_count(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store")
    first = index(small_corpus, settings, embedder)
    second = index(small_corpus, settings, embedder)

    assert (first.papers, first.embedded_papers, first.embedded_chunks) == (SMALL_PAPERS, SMALL_PAPERS, first.chunks)
    assert second.chunks == first.chunks
    assert (second.embedded_papers, second.embedded_chunks, second.deleted_chunks) == (0, 0, 0)
    assert second.collection == first.collection
    assert Store(settings).info().chunks == first.chunks


def test_an_index_run_reports_the_time_of_each_stage_of_its_work(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store")
    first = index(small_corpus, settings, embedder)
    assert set(first.stages) == {"read_stored", "chunk", "copy", "embed", "write"}
    assert first.stages["embed"] > 0 and first.stages["write"] > 0
    assert sum(first.stages.values()) <= first.seconds
    assert index(small_corpus, settings, embedder).stages == {}  # up to date: no stage ran


def test_reindexing_an_unchanged_corpus_reads_no_chunk_metadata_back(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path / "store")
    first = index(small_corpus, settings, embedder)

    def read_every_hash(self: Store, collection: object) -> None:
        raise AssertionError("an unchanged corpus read every chunk's metadata")

    monkeypatch.setattr(Store, "paper_hashes", read_every_hash)
    again = index(small_corpus, settings, embedder)
    assert (again.chunks, again.embedded_chunks, again.collection) == (first.chunks, 0, first.collection)


def test_changing_one_abstract_reembeds_only_that_paper(
    tmp_path: Path, small_corpus: Path, abstracts: list[str], embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store")
    index(small_corpus, settings, embedder)
    before = stored_chunks(settings)
    papers = load_papers([small_corpus])

    edited = list(abstracts[:SMALL_PAPERS])
    edited[2] = abstracts[10]  # paper #3 now has another abstract
    write_paper_list(small_corpus, edited)
    report = index(small_corpus, settings, embedder)
    after = stored_chunks(settings)

    assert (report.embedded_papers, report.papers) == (1, SMALL_PAPERS)
    for paper in papers[:2] + papers[3:]:
        assert chunks_of(after, paper.id) == chunks_of(before, paper.id), f"{paper.label} changed"
    new_paper = load_papers([small_corpus])[2]
    assert new_paper.id == papers[2].id
    assert chunks_of(after, new_paper.id) == {n.node_id: n.text for n in chunk_papers([new_paper], settings)}
    assert chunks_of(after, new_paper.id) != chunks_of(before, new_paper.id)
    assert len(after) == report.chunks


def test_removing_the_last_paper_deletes_its_chunks_and_embeds_nothing(
    tmp_path: Path, small_corpus: Path, abstracts: list[str], embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store")
    index(small_corpus, settings, embedder)
    removed = load_papers([small_corpus])[-1]
    removed_chunks = chunks_of(stored_chunks(settings), removed.id)
    assert removed_chunks

    write_paper_list(small_corpus, abstracts[: SMALL_PAPERS - 1])
    report = index(small_corpus, settings, embedder)

    assert (report.papers, report.embedded_papers) == (SMALL_PAPERS - 1, 0)
    assert report.deleted_chunks == len(removed_chunks)
    assert chunks_of(stored_chunks(settings), removed.id) == {}


def test_removing_a_paper_from_the_middle_leaves_exactly_the_chunks_of_the_remaining_papers(
    tmp_path: Path, small_corpus: Path, abstracts: list[str], embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store")
    index(small_corpus, settings, embedder)

    write_paper_list(small_corpus, abstracts[:1] + abstracts[2:SMALL_PAPERS])
    index(small_corpus, settings, embedder)

    expected = {n.node_id: n.text for n in chunk_papers(load_papers([small_corpus]), settings)}
    assert {cid: text for cid, (text, _) in stored_chunks(settings).items()} == expected


def test_chunk_size_setting_changes_the_number_of_chunks(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    default = index(small_corpus, make_settings(tmp_path / "default"), embedder)
    small = index(small_corpus, make_settings(tmp_path / "small", chunk_size=32, chunk_overlap=8), embedder)

    assert small.chunks > default.chunks
    assert Store(make_settings(tmp_path / "small")).info().chunks == small.chunks


def test_changing_the_chunk_size_of_an_existing_index_rechunks_every_paper(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    first = index(small_corpus, make_settings(tmp_path / "store"), embedder)
    second = index(small_corpus, make_settings(tmp_path / "store", chunk_size=32, chunk_overlap=8), embedder)

    assert second.embedded_papers == SMALL_PAPERS
    assert second.chunks > first.chunks
    assert Store(make_settings(tmp_path / "store")).info().chunks == second.chunks


# -- what the index records ---------------------------------------------------------------------


def test_every_chunk_carries_its_papers_fields_as_flat_scalar_metadata(small_index: Path) -> None:
    settings = make_settings(small_index)
    by_id = {p.id: p for p in load_papers(CORPUS)}
    chunks = stored_chunks(settings)
    assert chunks
    for chunk_id, (_, meta) in chunks.items():
        assert all(isinstance(value, (str, int, float, bool)) for value in meta.values()), chunk_id
        paper = by_id[meta["paper_id"]]
        assert (meta["source"], meta["ordinal"], meta["title"]) == (paper.source, paper.ordinal, paper.title)
        assert type(meta["ordinal"]) is int
        assert chunk_id.startswith(paper.id + ":")
    assert {meta["paper_id"] for _, meta in chunks.values()} == set(by_id)


def test_whole_index_reads_are_paged_and_return_every_chunk_once(
    small_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One unpaged read fails beyond SQLite's variable limit (~10,000 abstracts); a page of a
    # quarter of the index, give or take, makes it span several pages, the last one partial.
    store = Store(make_settings(small_index))
    total = store.info().chunks
    page = next(size for size in range(total // 4, 0, -1) if total % size)
    monkeypatch.setattr(store_module, "_READ_PAGE", page)
    assert total > 3 * page and total % page
    node_ids = [node.node_id for node in store.nodes()]
    assert len(node_ids) == len(set(node_ids)) == total
    hashed = [chunk_id for _, ids in store.paper_hashes(store.active()).values() for chunk_id in ids]
    assert sorted(hashed) == sorted(node_ids)


def test_collection_metadata_records_embedding_model_dimension_and_fingerprint(small_index: Path) -> None:
    settings = make_settings(small_index)
    info = Store(settings).info()
    assert info is not None
    assert (info.embedding_model, info.embedding_dim) == (MINILM_NAME, MINILM_DIM) == (MINILM_NAME, 384)
    assert info.fingerprint == corpus_fingerprint(load_papers(CORPUS), settings)
    assert info.corpus == [str(p) for p in CORPUS]


# -- a mismatched embedding model ---------------------------------------------------------------


@pytest.fixture
def no_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any attempt to use OpenAI fail fast and locally, so a mismatch can never turn into a network call."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ASSISTANT_LLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")


def _via_store_require(settings: Settings) -> object:
    return Store(settings).require(OPENAI)


def _via_assistant(settings: Settings) -> object:
    return Assistant.from_settings(settings)


def _via_reindex(settings: Settings) -> object:
    return reindex(settings)


@pytest.mark.parametrize("open_index", [_via_store_require, _via_assistant, _via_reindex], ids=["Store.require", "Assistant.from_settings", "reindex"])
def test_opening_a_minilm_index_with_openai_embedding_settings_asks_for_a_rebuild(
    small_index: Path, no_openai: None, open_index
) -> None:
    settings = make_settings(small_index, embedding=OPENAI)
    with pytest.raises(IndexMismatchError) as caught:
        open_index(settings)
    message = str(caught.value)
    assert "assistant index --rebuild" in message
    assert MINILM_NAME in message and OPENAI in message


# -- crash safety -------------------------------------------------------------------------------


def test_a_rebuild_that_crashes_midway_leaves_the_previous_index_usable(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store", corpus=[small_corpus])
    old = index(small_corpus, settings, embedder)

    batches = make_settings(tmp_path / "store", corpus=[small_corpus], chunk_size=32, chunk_overlap=8, embed_batch_size=4)
    assert len(chunk_papers(load_papers([small_corpus]), batches)) > 2 * batches.embed_batch_size  # several batches
    with pytest.raises(SimulatedCrash):
        index(small_corpus, batches, embedder, rebuild=True, progress=crash_after_first_batch)

    notices: list[str] = []
    fresh = Assistant.from_settings(settings, notify=notices.append)
    assert notices == [], "the old index should be used as it is, not rebuilt"
    info = fresh.store.info()
    assert (info.collection, info.chunks) == (old.collection, old.chunks)
    top = fresh.retrieve(f"Give me a short summary of {SYSRS}.", k=1)[0]
    assert (top.paper.title, top.paper.source, top.paper.ordinal) == (SYSRS, small_corpus.name, 2)


@dataclass
class Interrupted:
    settings: Settings
    first: IndexReport  # the index before the update
    fingerprint: str  # its corpus fingerprint
    before: dict[str, tuple[str, dict]]  # its chunks


@pytest.fixture
def interrupted(tmp_path: Path, small_corpus: Path, abstracts: list[str], embedder: MiniLMEmbedding) -> Interrupted:
    """An index of the small corpus, then an update adding five papers that crashes after its first batch."""
    settings = make_settings(tmp_path / "store", embed_batch_size=4)
    first = index(small_corpus, settings, embedder)
    state = Interrupted(settings, first, Store(settings).info().fingerprint, stored_chunks(settings))
    write_paper_list(small_corpus, abstracts[: SMALL_PAPERS + 5])
    assert len(expected_chunks(small_corpus, settings)) - len(state.before) > 2 * settings.embed_batch_size
    with pytest.raises(SimulatedCrash):
        index(small_corpus, settings, embedder, progress=crash_after_first_batch)
    return state


def test_an_update_that_crashes_midway_leaves_the_previous_index_as_it_was(interrupted: Interrupted) -> None:
    info = Store(interrupted.settings).info()
    assert (info.collection, info.fingerprint) == (interrupted.first.collection, interrupted.fingerprint)
    assert stored_chunks(interrupted.settings) == interrupted.before


def test_the_next_index_of_the_same_files_resumes_an_interrupted_update(
    interrupted: Interrupted, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    settings = interrupted.settings
    report = index(small_corpus, settings, embedder)

    new_chunks = len(expected_chunks(small_corpus, settings)) - len(interrupted.before)
    assert any(note.startswith("Resumed an interrupted index update") for note in report.notes), report.notes
    assert 0 < report.embedded_chunks <= new_chunks - settings.embed_batch_size  # the first batch was kept
    assert {cid: text for cid, (text, _) in stored_chunks(settings).items()} == expected_chunks(small_corpus, settings)
    assert Store(settings).info().fingerprint == corpus_fingerprint(load_papers([small_corpus]), settings)


def test_an_index_of_the_previous_files_discards_an_interrupted_update(
    interrupted: Interrupted, small_corpus: Path, abstracts: list[str], embedder: MiniLMEmbedding
) -> None:
    settings = interrupted.settings
    write_paper_list(small_corpus, abstracts[:SMALL_PAPERS])
    report = index(small_corpus, settings, embedder)

    assert any(note.startswith("Discarded the unfinished index update of an interrupted run") for note in report.notes), report.notes
    assert (report.embedded_chunks, report.collection) == (0, interrupted.first.collection)
    assert generations(settings) == [interrupted.first.collection]
    assert stored_chunks(settings) == interrupted.before


def test_a_process_that_opened_the_index_before_an_update_keeps_answering_from_it(
    tmp_path: Path, small_corpus: Path, abstracts: list[str], embedder: MiniLMEmbedding
) -> None:
    settings = make_settings(tmp_path / "store", corpus=[small_corpus])
    reader = Assistant.from_settings(settings)
    write_paper_list(small_corpus, abstracts[: SMALL_PAPERS + 2])
    index(small_corpus, settings, embedder)

    top = reader.retrieve(f"Give me a short summary of {SYSRS}.", k=1)[0]
    assert (top.paper.title, top.paper.ordinal) == (SYSRS, 2)


# -- what the index holds -----------------------------------------------------------------------


def test_identical_abstracts_are_indexed_once_with_a_warning_naming_both_positions(
    tmp_path: Path, abstracts: list[str], embedder: MiniLMEmbedding
) -> None:
    vegas = corpus_papers()[VEGAS].abstract
    assert "$\\times$" in vegas  # the copy below differs only in markup
    others = [a for a in abstracts if a != vegas][:5]
    corpus = write_paper_list(tmp_path / "dups.txt", [*others, vegas, vegas.replace("$\\times$", "×"), vegas])
    settings = make_settings(tmp_path / "store", corpus=[corpus])
    report = index(corpus, settings, embedder)

    assert report.warnings == (
        "dups.txt #7 repeats the abstract of dups.txt #6; indexed once, as dups.txt #6.",
        "dups.txt #8 repeats the abstract of dups.txt #6; indexed once, as dups.txt #6.",
    )
    assert report.papers == 6
    hits = Assistant.from_settings(settings).retrieve("self-speculative decoding with verification-guided sparse attention", k=3)
    assert [(h.paper.title, h.paper.ordinal) for h in hits].count((VEGAS, 6)) == 1
    assert all(h.paper.title != VEGAS for h in hits[1:])


def test_a_stored_chunk_whose_paper_the_corpus_does_not_have_is_skipped_and_reported_once(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    # An index out of step with its files, as an interrupted update of an older version left it.
    settings = make_settings(tmp_path / "store")
    index(small_corpus, settings, embedder)
    papers = load_papers([small_corpus])
    sysrs = papers[1]
    notices: list[str] = []
    retriever = HybridRetriever(settings, Store(settings), embedder, {p.id: p for p in papers if p is not sysrs}, notices.append)

    for question in (f"Give me a short summary of {SYSRS}.", f"What is {SYSRS}?"):
        hits = retriever.retrieve(question, k=3)
        assert len(hits) == 3 and sysrs.id not in [h.paper.id for h in hits]
    assert len(notices) == 1
    assert sysrs.id in notices[0] and "Run `assistant index --rebuild`" in notices[0]


def test_a_chunk_size_change_is_announced_as_one_not_as_a_corpus_change(
    tmp_path: Path, small_corpus: Path, embedder: MiniLMEmbedding
) -> None:
    index(small_corpus, make_settings(tmp_path / "store"), embedder)
    notices: list[str] = []
    Assistant.from_settings(
        make_settings(tmp_path / "store", corpus=[small_corpus], chunk_size=32, chunk_overlap=8), notify=notices.append
    )
    assert notices[0] == "Chunking settings changed: re-chunking the index…"


def test_another_embedder_is_reported_as_a_mismatch_without_announcing_an_update(
    small_index: Path, no_openai: None
) -> None:
    notices: list[str] = []
    with pytest.raises(IndexMismatchError):
        Assistant.from_settings(make_settings(small_index, embedding=OPENAI), notify=notices.append)
    assert notices == []
