"""Loading the corpus: paper-list .txt files and .jsonl files become `Paper` values."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from assistant.errors import CorpusError
from assistant.load import load_file, load_papers, paper_id
from assistant.text import clean_markup
from assistant.types import Paper

from support import BUNDLED_FILES, CORPUS

FILE_1, FILE_2, FILE_3 = (path.name for path in BUNDLED_FILES)
MAX_TITLE_CHARS = 75  # "a short label": titles run to about 70 characters (8 words plus an ellipsis)


@pytest.fixture(scope="module")
def papers() -> list[Paper]:
    return load_papers(BUNDLED_FILES)


def by_position(papers: list[Paper], source: str, ordinal: int) -> Paper:
    (paper,) = [p for p in papers if p.source == source and p.ordinal == ordinal]
    return paper


def abstract_lines(path: Path) -> list[str]:
    """The abstracts of a paper list as they are written: every non-empty line after the title."""
    return [line for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


# -- the bundled corpus ----------------------------------------------------------------------


def test_bundled_corpus_is_three_files_of_nineteen_papers_each(papers: list[Paper]) -> None:
    assert len(BUNDLED_FILES) == 3
    assert len(papers) == 57
    assert Counter(p.source for p in papers) == {FILE_1: 19, FILE_2: 19, FILE_3: 19}


def test_ordinals_number_each_files_papers_from_1_to_19_in_file_order(papers: list[Paper]) -> None:
    for path in BUNDLED_FILES:
        assert [p.ordinal for p in papers if p.source == path.name] == list(range(1, 20))


def test_paper_ids_are_unique(papers: list[Paper]) -> None:
    assert len({p.id for p in papers}) == len(papers)


def test_paper_ids_are_stable_across_loads_and_derive_from_source_and_ordinal(papers: list[Paper]) -> None:
    again = load_papers(BUNDLED_FILES)
    assert [p.id for p in again] == [p.id for p in papers]
    assert all(p.id == paper_id(p.source, p.ordinal) for p in papers)


def test_abstract_is_the_verbatim_line_of_the_file(papers: list[Paper]) -> None:
    for path in BUNDLED_FILES:
        assert [p.abstract for p in papers if p.source == path.name] == abstract_lines(path)


# -- titles ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "ordinal", "title"),
    [
        (FILE_1, 1, "Dem-HEC"),
        (FILE_1, 2, "SySRs"),
        (FILE_1, 6, "Vegas"),
        (FILE_2, 9, "ISA"),
        (FILE_3, 14, "APT"),
        (FILE_1, 16, "ERT"),  # no "we propose X": the one short form it defines and uses again
    ],
)
def test_title_is_the_method_name_the_abstract_introduces(papers: list[Paper], source: str, ordinal: int, title: str) -> None:
    assert by_position(papers, source, ordinal).title == title


def test_every_title_is_a_short_non_empty_label(papers: list[Paper]) -> None:
    for paper in papers:
        assert paper.title.strip(), f"{paper.label} has an empty title"
        assert len(paper.title) <= MAX_TITLE_CHARS, f"{paper.label}: title {paper.title!r} is {len(paper.title)} chars"


# -- markup cleaning ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (r"$\textbf{APT}$", "APT"),
        ("**ISA**", "ISA"),
        (r"\emph{x}", "x"),
        (r"80\%", "80%"),
        (r"1.25$\times$", "1.25×"),
    ],
)
def test_clean_markup_turns_latex_and_markdown_into_plain_text(raw: str, clean: str) -> None:
    assert clean_markup(raw) == clean


def test_no_cleaned_paper_text_keeps_math_dollars_bold_commands_or_markdown_bold(papers: list[Paper]) -> None:
    for paper in papers:
        for markup in ("$", r"\textbf", "**"):
            assert markup not in paper.text, f"{paper.label}: cleaned text still contains {markup!r}"


def test_abstract_keeps_its_markup_while_text_is_the_readable_version(papers: list[Paper]) -> None:
    paper = by_position(papers, FILE_2, 9)
    assert "we propose **I**n-context **S**parse **A**ttention (**ISA**)" in paper.abstract
    assert "we propose In-context Sparse Attention (ISA)" in paper.text
    assert paper.text == clean_markup(paper.abstract)


# -- JSONL -------------------------------------------------------------------------------------


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


ABSTRACT_A = "We propose Frobnicator, a method that frobnicates large language models to make them faster at inference."
ABSTRACT_B = "We introduce GraphZap, a graph neural network that zaps over-smoothing in deep message passing layers."


def test_jsonl_fields_title_authors_url_and_venue_are_parsed(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"title": "Frobnicating LLMs", "abstract": ABSTRACT_A, "authors": ["Ada Lovelace", "Alan Turing"],
             "url": "https://example.org/a", "venue": "ICML 2026"},
            {"abstract": ABSTRACT_B, "authors": "Grace Hopper"},
        ],
    )
    first, second = load_file(path)
    assert (first.source, first.ordinal, first.id) == ("mine.jsonl", 1, paper_id("mine.jsonl", 1))
    assert first.title == "Frobnicating LLMs"
    assert first.abstract == ABSTRACT_A
    assert first.authors == "Ada Lovelace, Alan Turing"
    assert (first.url, first.venue) == ("https://example.org/a", "ICML 2026")
    assert second.ordinal == 2
    assert second.authors == "Grace Hopper"


def test_jsonl_without_a_title_gets_one_derived_from_the_abstract(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mine.jsonl", [{"abstract": ABSTRACT_B + " GraphZap is fast."}])
    (paper,) = load_file(path)
    assert paper.title == "GraphZap"


# -- the parse cache ---------------------------------------------------------------------------


def test_a_cached_parse_gives_the_same_papers_as_parsing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    parsed = load_file(CORPUS[0])
    assert load_file(CORPUS[0], cache) == parsed  # parsed, then written
    assert len(list(cache.glob("*.json"))) == 1
    assert load_file(CORPUS[0], cache) == parsed  # read back


def test_a_changed_file_is_parsed_again_not_served_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = write_jsonl(tmp_path / "mine.jsonl", [{"abstract": ABSTRACT_A}])
    assert [p.abstract for p in load_file(path, cache)] == [ABSTRACT_A]
    write_jsonl(path, [{"abstract": ABSTRACT_B}])
    assert [p.abstract for p in load_file(path, cache)] == [ABSTRACT_B]


def test_a_file_with_the_same_bytes_under_another_name_gets_its_own_ids(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = write_jsonl(tmp_path / "one.jsonl", [{"abstract": ABSTRACT_A}])
    second = write_jsonl(tmp_path / "two.jsonl", [{"abstract": ABSTRACT_A}])
    assert load_file(first, cache)[0].source == "one.jsonl"
    assert load_file(second, cache)[0].source == "two.jsonl"


# -- malformed input ---------------------------------------------------------------------------

GOOD_ABSTRACT = "We study a perfectly ordinary problem and propose a perfectly ordinary method for it."


def _binary(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _title_only(path: Path) -> None:
    path.write_text("ICML 2026 papers\n\n", encoding="utf-8")


def _latin1_on_line_3(path: Path) -> None:
    path.write_bytes(b"ICML 2026 papers\n\n" + GOOD_ABSTRACT.replace("ordinary", "na\xefve").encode("latin-1") + b"\n")


def _jsonl_not_json_on_line_2(path: Path) -> None:
    path.write_text(json.dumps({"abstract": GOOD_ABSTRACT}) + "\n{abstract: oops\n", encoding="utf-8")


def _jsonl_without_abstract_on_line_2(path: Path) -> None:
    path.write_text(json.dumps({"abstract": GOOD_ABSTRACT}) + "\n" + json.dumps({"title": "No abstract"}) + "\n", encoding="utf-8")


def _missing(path: Path) -> None:
    pass


@pytest.mark.parametrize(
    ("name", "write", "line"),
    [
        ("binary.txt", _binary, None),
        ("empty.txt", _empty, None),
        ("title_only.txt", _title_only, None),
        ("latin1.txt", _latin1_on_line_3, 3),
        ("broken.jsonl", _jsonl_not_json_on_line_2, 2),
        ("no_abstract.jsonl", _jsonl_without_abstract_on_line_2, 2),
        ("missing.txt", _missing, None),
    ],
    ids=["binary", "empty", "title-only", "invalid-utf8", "jsonl-not-json", "jsonl-no-abstract", "missing-file"],
)
def test_malformed_corpus_file_raises_corpus_error_naming_file_and_line(tmp_path: Path, name, write, line) -> None:
    path = tmp_path / name
    write(path)
    with pytest.raises(CorpusError) as caught:
        load_papers([path])
    message = str(caught.value)
    assert str(path) in message
    if line is not None:
        assert f"line {line}" in message
