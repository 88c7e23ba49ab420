"""Asking across papers: rows, cells, "not stated", quotes, export, the CLI and the table evaluation.

Cells are decided below the model with a scripted OpenAI-compatible server (its replies are the
line the grammar would force), over the tests' corpus; one test (marked `llm`) fills a real table
with the local model.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from assistant import Assistant, topic_choice
from assistant.cite import make_citation
from assistant.errors import QuestionError
from assistant.evaluation.dataset import paper_key
from assistant.evaluation.tables import TABLES_PATH, load_tables, score_cell, score_rows
from assistant.table import CELL_ANSWER_CHARS, _parse, check_columns, resolve_papers, to_csv, to_markdown
from assistant.types import NOT_STATED, Cell, Row, Table

from support import ARM, FEDERATED, ISA, VEGAS, bundled_papers, make_settings, run_cli

SPEEDUP = "What speedup does it report?"


# -- choosing rows and columns ----------------------------------------------------------------


def test_papers_are_found_by_id_title_or_label(small_assistant):
    vegas = next(p for p in small_assistant.papers if p.title == VEGAS)
    for name in (vegas.id, VEGAS.lower(), vegas.label):
        assert resolve_papers([name], small_assistant.papers) == [vegas]


def test_an_unknown_paper_is_an_error_that_says_where_to_look(small_assistant):
    with pytest.raises(QuestionError, match="assistant papers"):
        resolve_papers([VEGAS, "No Such Paper"], small_assistant.papers)


def test_a_table_needs_a_column_and_not_too_many():
    with pytest.raises(QuestionError, match="at least one"):
        check_columns(["  ", ""], 200)
    with pytest.raises(QuestionError, match="at most"):
        check_columns([f"Question {i}?" for i in range(9)], 200)


def test_a_table_needs_to_know_its_papers(small_assistant):
    with pytest.raises(QuestionError, match="which papers"):
        small_assistant.table([SPEEDUP])


@pytest.fixture(scope="module")
def weighing(small_index):
    """An Assistant whose embedded model may be asked whether candidates are on a topic (kept apart
    from `small_assistant`, whose tests check that retrieval alone never starts the model)."""
    with Assistant.from_settings(make_settings(small_index)) as assistant:
        yield assistant


def test_a_topic_chooses_its_papers_each_with_the_sentence_that_shows_it(weighing):
    rows, _ = weighing.tables.topic_rows("federated learning")
    assert {row.paper.title for row in rows} == set(FEDERATED)
    for row in rows:
        span = row.reason.spans[0]
        assert row.paper.abstract[span.start:span.end] == span.text
        assert "Federated" in span.text


def test_a_topics_sentences_are_each_read_once_against_one_part_of_it(small_assistant):
    topic = "federated learning or diffusion models"
    engine = small_assistant.engine
    calls: list[tuple[str, list[str]]] = []

    def rerank(query, texts):
        calls.append((query, list(texts)))
        return engine.topics.rerank(query, texts)

    vector = engine.encode([topic])[0]
    candidates = small_assistant.retriever.retrieve(topic, k=20, embedding=vector.tolist())
    rows = topic_choice.topic_features(topic, vector, candidates, engine.sentences, rerank)
    *sentence_calls, (abstract_query, abstracts) = calls
    read = [text for _, texts in sentence_calls for text in texts]
    assert {query for query, _ in sentence_calls} <= set(topic_choice.topic_parts(topic))
    assert len(sentence_calls) >= 2 and len(read) == len(set(read))
    sentence_logit = topic_choice.TOPIC_FEATURES.index("sentence logit")
    read_whole = [p for p, _, features in rows if features[sentence_logit] != topic_choice.UNRELATED_LOGIT]
    assert abstract_query == topic and len(abstracts) == len(read_whole)


def test_a_topic_longer_than_a_question_may_be_is_an_error_that_says_so(small_assistant):
    with pytest.raises(QuestionError, match="name it in a few words"):
        small_assistant.table([SPEEDUP], topic="KV cache compression " * 300)


def test_a_topic_no_paper_is_about_gives_an_empty_table_that_says_so(weighing):
    table = weighing.table([SPEEDUP], topic="sourdough bread baking")
    assert table.rows == [] and table.cells == [] and any("No paper" in n for n in table.notices)


def test_a_topic_no_paper_says_is_not_put_to_the_model(scripted, scripted_llm):
    scripted_llm.first_tokens = lambda messages: {"Yes": -0.05, "No": -3.0}  # it would say yes to any paper
    rows, related = scripted.tables.topic_rows("sourdough bread baking")
    assert rows == [] and related == []
    assert not [r for r in scripted_llm.judged if "Is this paper about" in r["messages"][-1]["content"]]


def test_every_paper_of_a_corpus_file_can_be_the_rows(scripted, scripted_llm):
    scripted_llm.responder = lambda messages: "not stated"
    source = scripted.sources[0]
    table = scripted.table([SPEEDUP], source=source)
    assert [r.paper for r in table.rows] == [p for p in scripted.papers if p.source == source]
    with pytest.raises(QuestionError, match="No corpus file"):
        scripted.table([SPEEDUP], source="nope.txt")


# -- deciding a cell (scripted model) --------------------------------------------------------


def one_cell(scripted, scripted_llm, reply: str, column: str, paper: str = VEGAS) -> Cell:
    """The cell of `paper` and `column` when the model replies `reply`."""
    scripted_llm.responder = lambda messages: reply
    return scripted.table([column], papers=[paper]).cells[0][0]


def test_a_stated_cell_has_the_answer_and_its_verbatim_quote(scripted, scripted_llm):
    scripted_llm.responder = lambda messages: "1.25×–2.81× over default vLLM"
    table = scripted.table([SPEEDUP], papers=[VEGAS])
    cell = table.cells[0][0]
    assert cell.status == "stated" and "2.81" in cell.text
    span = cell.citation.spans[0]
    assert cell.paper.abstract[span.start:span.end] == span.text and "1.25" in span.text


def test_the_quote_is_the_sentence_that_holds_the_answers_figures(scripted, scripted_llm):
    cell = one_cell(scripted, scripted_llm, "1.25×–2.81×", SPEEDUP)
    assert cell.status == "stated" and "1.25" in cell.citation.quote


def test_the_model_is_asked_for_the_answer_alone_on_one_line(scripted, scripted_llm):
    # No structure around the answer: on the embedded model every forced token costs a decoding
    # step (its grammar bounds the line, see test_llm); another backend stops at the line's end.
    scripted_llm.responder = lambda messages: "1.25×–2.81×"
    scripted.table([SPEEDUP], papers=[VEGAS])
    assert scripted_llm.requests[-1]["stop"] == ["\n"] and "response_format" not in scripted_llm.requests[-1]


def test_an_answer_as_long_as_the_grammar_allows_and_not_copied_verbatim_is_marked_as_possibly_cut(scripted, scripted_llm):
    long = f"{VEGAS} is 1.25×–2.81× faster in decoding throughput than default vLLM and a"
    cell = one_cell(scripted, scripted_llm, long[:CELL_ANSWER_CHARS], SPEEDUP)
    assert cell.status == "stated" and cell.text == long[:CELL_ANSWER_CHARS] + "…"


def test_a_model_that_says_not_stated_gives_a_not_stated_cell(scripted, scripted_llm):
    cell = one_cell(scripted, scripted_llm, "not stated", "What batch size is used?")
    assert cell.status == "not_stated" and cell.text == NOT_STATED and cell.citation is None


def test_a_yes_to_a_yes_no_column_is_quoted_with_the_sentence_that_says_so(scripted, scripted_llm):
    # A bare "yes" holds no words to find its sentence by: the cross-encoder finds the one that answers.
    cell = one_cell(scripted, scripted_llm, "yes", "Is its code released?")
    assert cell.status == "stated" and cell.text == "yes" and "github.com/platformxlab/vegas" in cell.citation.quote


def test_a_yes_no_answer_keeps_its_words_where_a_sentence_holds_them(scripted, scripted_llm):
    cell = one_cell(scripted, scripted_llm, "yes, verification-guided sparse attention", "Does it use sparse attention?")
    assert cell.status == "stated" and cell.text == "yes, verification-guided sparse attention"
    assert "we propose Vegas" in cell.citation.quote


def test_an_answer_that_names_one_of_a_yes_no_columns_alternatives_is_a_yes(scripted, scripted_llm):
    # Asked "X or Y?", the small model often answers "X" alone: it takes that alternative.
    cell = one_cell(scripted, scripted_llm, "sparse attention", "Does it use sparse or dense attention?")
    assert cell.status == "stated" and cell.text == "yes" and "sparse attention" in cell.citation.quote


def test_a_negated_alternative_is_not_read_as_a_yes(scripted, scripted_llm):
    cell = one_cell(scripted, scripted_llm, "without dense attention", "Does it use sparse or dense attention?")
    assert cell.status == "not_stated"


def test_a_yes_that_no_sentence_says_is_not_stated(scripted, scripted_llm):
    # The small model answers "yes" as readily when the abstract is silent (Vegas states no theory).
    cell = one_cell(scripted, scripted_llm, "yes", "Does it provide theoretical guarantees?")
    assert cell.status == "not_stated" and cell.citation is None and "no sentence" in cell.note


def test_a_yes_the_model_is_sure_of_stands_where_no_sentence_is_found_to_say_so(scripted, scripted_llm):
    # Its first word "yes" far likelier than "not" (of "not stated"): the answer stands, quoted with the
    # sentence the cross-encoder reads as closest to answering the column.
    scripted_llm.first_tokens = lambda messages: {"yes": -0.05, "not": -4.0}
    cell = one_cell(scripted, scripted_llm, "yes", "Does it provide theoretical guarantees?")
    assert cell.status == "stated" and cell.text == "yes" and cell.citation is not None
    assert cell.paper.abstract[cell.citation.spans[0].start:cell.citation.spans[0].end] == cell.citation.spans[0].text


def test_a_yes_the_model_is_unsure_of_and_no_sentence_says_is_not_stated(scripted, scripted_llm):
    scripted_llm.first_tokens = lambda messages: {"yes": -0.6, "not": -1.0}
    cell = one_cell(scripted, scripted_llm, "yes", "Does it provide theoretical guarantees?")
    assert cell.status == "not_stated" and cell.citation is None
    assert scripted_llm.judged, "the model was asked how sure it is"


def test_a_small_number_is_written_as_its_sentence_spells_it(scripted, scripted_llm):
    # The abstract says "two key insights"; the model answers with the digit.
    cell = one_cell(scripted, scripted_llm, "2", "How many key insights is the design grounded in?", ISA)
    assert cell.status == "stated" and cell.text == "two" and "two key insights" in cell.citation.quote


def test_a_figure_about_another_quantity_is_not_an_answer(scripted, scripted_llm):
    # Asked how much memory Vegas saves, a small model gives the speedup: the abstract gives no saving.
    cell = one_cell(scripted, scripted_llm, "1.25×–2.81× memory", "How much memory does it save?")
    assert cell.status == "not_stated"


def test_a_figure_no_sentence_holds_is_not_an_answer(scripted, scripted_llm):
    cell = one_cell(scripted, scripted_llm, "a 7.5× speedup", SPEEDUP)
    assert cell.status == "not_stated"


def test_the_columns_of_one_paper_share_the_prompt_up_to_the_question(scripted, scripted_llm):
    scripted_llm.responder = lambda messages: "not stated"
    scripted.table([SPEEDUP, "Compared with what baseline?"], papers=[VEGAS])
    first, second = (scripted_llm.messages(i)[-1]["content"] for i in (0, 1))
    assert first.split("Question:")[0] == second.split("Question:")[0]
    assert scripted_llm.messages(0)[0] == scripted_llm.messages(1)[0]


def test_cells_stream_row_by_row_before_the_table(scripted, scripted_llm):
    scripted_llm.responder = lambda messages: "not stated"
    events = list(scripted.table_events([SPEEDUP, "Which baseline?"], papers=[VEGAS, ARM]))
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["Row", "Row", "Cell", "Cell", "Cell", "Cell", "Table"]
    assert [(e.row, e.column) for e in events if isinstance(e, Cell)] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_a_down_model_fails_the_cells_with_a_notice_and_stops_calling_it(llm_down):
    table = llm_down.table([SPEEDUP, "Which baseline?"], papers=[VEGAS, ARM])
    assert all(c.status == "failed" and "not reachable" in c.note for line in table.cells for c in line)
    assert any("could not fill" in n for n in table.notices)


def test_a_reply_is_read_as_its_first_line_without_quotes_and_cut_to_a_cells_length():
    assert _parse('"1.25× over vLLM"\nThe abstract also says') == "1.25× over vLLM"
    assert _parse("  ") == ""
    assert len(_parse("x" * 200)) == CELL_ANSWER_CHARS


# -- writing the table out -----------------------------------------------------------------------


@pytest.fixture
def small_table(small_assistant) -> Table:
    vegas, arm = resolve_papers([VEGAS, ARM], small_assistant.papers)
    sentences = small_assistant.engine.sentences.get(vegas)
    index = next(i for i, s in enumerate(sentences.clean) if "1.25×" in s)
    quote = make_citation(1, vegas, sentences.raw, [index])
    cells = [[Cell(0, 0, vegas, SPEEDUP, "1.25×–2.81× | vLLM", "stated", quote)],
             [Cell(1, 0, arm, SPEEDUP, NOT_STATED, "not_stated")]]
    return Table([SPEEDUP], [Row(vegas), Row(arm)], cells)


def test_csv_has_an_answer_and_a_quote_column_per_question(small_table):
    rows = list(csv.reader(io.StringIO(to_csv(small_table))))
    assert rows[0] == ["paper_id", "title", "label", SPEEDUP, f"{SPEEDUP} (quote)"]
    assert rows[1][1] == VEGAS and "1.25" in rows[1][4] and rows[2][3] == NOT_STATED and rows[2][4] == ""


def test_markdown_escapes_pipes_and_lists_the_quotes(small_table):
    text = to_markdown(small_table)
    assert "1.25×–2.81× \\| vLLM [1]" in text and f"[1] {VEGAS} (" in text
    assert text.splitlines()[3].startswith(f"| {ARM} | not stated in the abstract")


def test_the_table_as_json_keeps_the_verbatim_spans(small_table):
    data = small_table.to_json()
    span = data["cells"][0][0]["citation"]["spans"][0]
    assert small_table.rows[0].paper.abstract[span["start"]:span["end"]] == span["text"]


# -- the command line ----------------------------------------------------------------------------


def test_the_cli_writes_csv_and_prints_the_markdown_table(small_index, scripted_llm, tmp_path):
    scripted_llm.responder = lambda messages: "not stated"
    out = tmp_path / "t.csv"
    done = run_cli("table", "--papers", f"{VEGAS},{ARM}", "-c", SPEEDUP, "--csv", str(out), index_dir=small_index,
                   **scripted_llm.env())
    assert done.returncode == 0, done.stderr
    assert f"| {VEGAS} | not stated in the abstract |" in done.stdout
    assert "Filling the table" in done.stderr
    assert [r[1] for r in csv.reader(io.StringIO(out.read_text()))] == ["title", VEGAS, ARM]


def test_the_cli_says_it_is_choosing_a_topics_papers_and_when_none_is_on_it(small_index):
    done = run_cli("table", "--topic", "sourdough bread baking", "-c", SPEEDUP, index_dir=small_index)
    assert "Choosing the papers on “sourdough bread baking”…" in done.stderr
    assert done.returncode == 1 and "No paper in the collection is about" in done.stderr and not done.stdout


def test_the_cli_asks_which_papers_when_none_are_given(small_index):
    done = run_cli("table", "-c", SPEEDUP, index_dir=small_index)
    assert done.returncode == 2 and "--topic" in done.stderr


# -- the table evaluation ------------------------------------------------------------------------


def test_the_table_set_has_a_gold_cell_for_every_gold_paper():
    items = load_tables(TABLES_PATH)
    assert len(items) >= 12 and sum(len(i["columns"]) for i in items) >= 12


def test_the_held_out_table_set_has_topics_of_its_own():
    own = {i["topic"] for i in load_tables(TABLES_PATH)}
    held = load_tables(TABLES_PATH.with_name("tables_heldout.jsonl"))
    assert len(held) >= 10 and not own & {i["topic"] for i in held}


def test_the_check_table_set_has_topics_of_its_own_and_quotes_its_facts_verbatim():
    seen = {i["topic"] for name in ("tables.jsonl", "tables_heldout.jsonl") for i in load_tables(TABLES_PATH.with_name(name))}
    check = load_tables(TABLES_PATH.with_name("tables_check.jsonl"))
    papers = {paper.id: paper for paper in bundled_papers().values()}
    facts = [(fact, paper_key(cell["source"], cell["ordinal"])) for item in check for column in item["columns"]
             for cell in column["cells"] for fact in cell["facts"] or []]
    assert len(check) >= 8 and not seen & {i["topic"] for i in check}
    assert facts and all(fact in papers[key].abstract for fact, key in facts)


def test_a_table_set_line_missing_a_cell_is_rejected(tmp_path):
    item = load_tables(TABLES_PATH)[0]
    item["columns"][0]["cells"].pop()
    path = tmp_path / "tables.jsonl"
    path.write_text(json.dumps(item) + "\n")
    with pytest.raises(ValueError, match="one cell per gold paper"):
        load_tables(path)


def test_cells_are_scored_on_facts_and_on_not_stated():
    stated = {"status": "stated", "text": "1.25×–2.81× over vLLM"}
    assert score_cell(stated, ["1.25x-2.81x"]) and not score_cell(stated, None)
    assert score_cell({"status": "not_stated", "text": NOT_STATED}, None)
    assert score_rows(["a", "b", "c"], ["a", "d"]) == {"recall": 0.5, "precision": 1 / 3}


def test_a_yes_no_cell_is_scored_on_its_answer_and_the_words_of_its_quote():
    quoted = {"status": "stated", "text": "yes", "citation": {"quote": "We theoretically prove that it converges."}}
    assert score_cell(quoted, ["theoretically prove"], "yes")
    assert not score_cell(quoted, ["theoretically prove"], "no")
    assert not score_cell({**quoted, "citation": {"quote": "It is fast."}}, ["theoretically prove"], "yes")


def test_a_table_set_answer_must_be_yes_or_no_with_its_facts(tmp_path):
    item = load_tables(TABLES_PATH)[0]
    item["columns"][0]["cells"][0]["answer"] = "maybe"
    path = tmp_path / "tables.jsonl"
    path.write_text(json.dumps(item) + "\n")
    with pytest.raises(ValueError, match="yes"):
        load_tables(path)


# -- the real model -------------------------------------------------------------------------------


@pytest.mark.llm
def test_the_local_model_fills_a_table_with_a_figure_and_a_not_stated(small_index, tmp_path):
    # Nothing kept yet: each row is read in the sentences closest to the column, never whole
    # (reading a whole abstract first costs seconds), so the table keeps nothing; a row kept
    # afterwards still fills right.
    with Assistant.from_settings(make_settings(small_index, llm_kept_states_dir=tmp_path)) as assistant:
        table = assistant.table([SPEEDUP], papers=[VEGAS, ARM])
        vegas, arm = table.cells[0][0], table.cells[1][0]
        assert vegas.status == "stated" and "2.81" in vegas.text, vegas
        assert vegas.citation.spans[0].text in vegas.paper.abstract
        assert arm.status == "not_stated", arm
        kept = assistant.tables.keep(vegas.paper)
        assert kept is not None and kept["new"] is True  # the table had not read the whole abstract
        again = assistant.table([SPEEDUP], papers=[VEGAS]).cells[0][0]
        assert again.status == "stated" and "2.81" in again.text, again
        assert assistant.tables.keep(vegas.paper)["new"] is False


def test_an_answer_that_stops_within_a_word_near_the_length_bound_was_cut_by_it() -> None:
    from assistant.table import complete, was_cut

    sentence = "Code is at https://github.com/snu-mllab/Identifiable-Token-Correspondence."
    cut = "https://github.com/snu-mllab/Identifiable-Token-Correspond"  # 58 characters: the next token crossed 60
    assert was_cut(cut, sentence)
    assert complete(cut, sentence) == "https://github.com/snu-mllab/Identifiable-Token-Correspondence"


def test_a_short_answer_that_is_part_of_a_word_is_not_taken_as_cut() -> None:
    from assistant.table import was_cut

    assert not was_cut("Transformer", "It outperforms Transformers on long inputs.")


def test_an_answer_the_length_bound_cut_is_completed_from_its_sentence_to_the_end_of_the_clause() -> None:
    from assistant.table import complete

    sentence = "We target efficient sampling of molecular systems at thermodynamic equilibrium, which is hard."
    assert complete("Efficient sampling of molecular systems at thermodynamic equ", sentence) == \
        "efficient sampling of molecular systems at thermodynamic equilibrium"
    assert complete("Sampling molecules at equilibrium, efficiently and at sca", sentence).endswith("…")
