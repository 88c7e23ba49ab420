"""What the chat UI shows and how it is served, without a browser: source cards and their quotes,
escaping, the source filter, the paper browser, the status line, the app and its serving rules, the
Compare papers tab (the chat's handlers are in test_ui.py). Rendering tests build `Answer` and
`Citation` values from the papers of the tests' corpus; the Compare tab runs with a scripted model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ARM, ISA, VEGAS, VIEWMASK, free_port

from assistant import Assistant, AssistantError, Settings, ui
from assistant.load import make_paper
from assistant.text import clean_markup, split_sentences
from assistant.types import Answer, Citation, Paper, Passage

VEGAS_QUESTION = f"Against default vLLM, what throughput speedup is reported for {VEGAS}?"
HOSTILE = '<script>alert(1)</script> We study <img src=x onerror="alert(2)"> robust {{x}} ${y} models.'


def paper_titled(assistant: Assistant, title: str) -> Paper:
    return next(p for p in assistant.papers if p.title == title)


def sentence_with(paper: Paper, needle: str) -> str:
    return next(s for s in split_sentences(paper.abstract) if needle in s)


def vegas_answer(assistant: Assistant) -> Answer:
    """A verified answer as a value, for the rendering tests."""
    vegas = paper_titled(assistant, VEGAS)
    quote = sentence_with(vegas, "speedup in decoding throughput")  # has LaTeX: 1.25$\times$
    return Answer(
        question=VEGAS_QUESTION,
        text=f"{VEGAS} achieves a 1.25×–2.81× decoding throughput speedup over default vLLM [1].",
        citations=[Citation(marker=1, paper=vegas, quote=quote, support=0.9)],
        passages=assistant.retrieve(VEGAS_QUESTION, k=3),
        flagged=["It is the fastest method ever built."],
        timings={"first_token": 1.0},
    )


def test_sources_card_highlights_the_quote_in_the_cleaned_abstract(small_assistant: Assistant) -> None:
    answer = vegas_answer(small_assistant)
    panel = ui.render_sources(answer, turn=3)
    vegas = answer.citations[0].paper
    cleaned = clean_markup(answer.citations[0].quote)
    assert "$" in answer.citations[0].quote and "$" not in cleaned
    assert cleaned in vegas.text
    assert '<article class="src-card" id="src-3-1">' in panel
    assert '<span class="cite-badge">1</span>' in panel
    assert f'<span class="src-title">{VEGAS}</span>' in panel
    assert f"{vegas.source}</span> <span class=\"src-ordinal\">#{vegas.ordinal}</span>" in panel
    assert panel.count(f"<mark>{ui.esc(cleaned)}</mark>") == 2  # the excerpt and inside the full abstract
    assert "<details" in panel and "Full abstract" in panel
    assert "\\times" not in panel


def test_every_abstract_sentence_can_be_located(small_assistant: Assistant) -> None:
    """Quotes are verbatim sentences of `abstract`; each must be found in the cleaned `text`."""
    missing = [
        (p.label, s[:60])
        for p in small_assistant.papers
        for s in split_sentences(p.abstract)
        if len(clean_markup(s)) >= 3 and not ui.locate_quote(p, s)
    ]
    assert missing == []


def test_quote_of_two_separate_sentences_is_highlighted_twice(small_assistant: Assistant) -> None:
    paper = paper_titled(small_assistant, ARM)
    sentences = split_sentences(paper.abstract)
    quote = f"{sentences[0]} {sentences[-1]}"
    spans = ui.locate_quote(paper, quote)
    assert len(spans) == 2
    card = ui.citation_card(Citation(marker=2, paper=paper, quote=quote), turn=1)
    assert card.count("<mark>") == 4


def test_refusal_lists_the_closest_papers(small_assistant: Assistant) -> None:
    passages = small_assistant.retrieve("What is the best recipe for sourdough bread?", k=5)
    answer = Answer(
        question="What is the best recipe for sourdough bread?",
        text="The abstracts in this collection do not contain the answer to that question.",
        status="not_in_abstracts",
        passages=passages,
    )
    panel = ui.render_sources(answer, turn=1)
    assert "Closest papers" in panel and "Not an answer" in panel
    assert panel.count('class="src-card src-ranked"') == 3
    titles = re.findall(r'<span class="src-title">([^<]*)</span>', panel)
    assert titles == [ui.esc(p.paper.title) for p in passages[:3]]
    message = ui.render_answer(answer, turn=1)
    assert "closest papers are listed beside the chat" in message and "cite" not in message


# -- escaping --------------------------------------------------------------------------------------


def test_abstract_and_answer_html_is_escaped() -> None:
    paper = make_paper("evil.txt", 1, HOSTILE, title="<img src=x onerror=alert(3)>", url="javascript:alert(4)")
    quote = split_sentences(paper.abstract)[0]
    answer = Answer(
        question="<script>alert(5)</script>?",
        text="<script>alert(6)</script> It is robust [1]. <img src=x onerror=alert(7)>",
        citations=[Citation(marker=1, paper=paper, quote=quote)],
        flagged=["<script>alert(8)</script>"],
        notices=["<b>notice</b>"],
    )
    passage = Passage(paper=paper, text=paper.text, score=0.5)
    rendered = [
        ui.render_sources(answer),
        ui.render_answer(answer),
        ui.render_sources(Answer(question="x", text="", status="not_in_abstracts", passages=[passage])),
        ui.render_ranked([passage], 1),
        ui.render_paper_list([paper], "robust"),
        ui.render_draft(answer.text),
        ui.render_error("<script>alert(9)</script>"),
    ]
    for html_text in rendered:
        assert "<script" not in html_text and "<img" not in html_text, html_text
        assert "javascript:" not in html_text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered[0]
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in rendered[0]
    assert "&lt;script&gt;alert(6)&lt;/script&gt;" in rendered[1]
    assert "&lt;script&gt;alert(8)&lt;/script&gt;" in rendered[1]


# -- the source filter, the paper browser, the status line -----------------------------------------


def test_source_filter_limits_retrieval(small_assistant: Assistant) -> None:
    controller = ui.ChatController(small_assistant, small_assistant.settings)
    wanted = small_assistant.sources[-1]
    session = ui.Session()
    *_, retrieval_job = controller.submit("sparse attention", session, True)
    display, panel, status, session = controller.retrieve(retrieval_job, session, 3, wanted)
    files = re.findall(r'<span class="src-file">([^<]*)</span>', panel)
    assert files and set(files) == {wanted}
    assert small_assistant.llm_loaded is None


def test_paper_browser_filters_and_opens_abstracts(small_assistant: Assistant) -> None:
    total = len(small_assistant.papers)
    everything = ui.render_paper_list(small_assistant.papers)
    assert everything.count('<details class="paper-row">') == total
    assert f"{total} papers" in everything
    some = ui.render_paper_list(small_assistant.papers, "sparse ATTENTION")
    count = some.count('<details class="paper-row">')
    assert 0 < count < total and f"{count} of {total} papers" in some
    assert VEGAS in some and re.search(r"<mark>sparse attention</mark>", some, re.IGNORECASE)
    assert "No paper matches" in ui.render_paper_list(small_assistant.papers, "zzzz-no-such-word")


def test_model_status_does_not_start_the_model(small_assistant: Assistant) -> None:
    line = ui.model_status(small_assistant, small_assistant.settings)
    assert "Qwen2.5-Coder-1.5B-Instruct (local)" in line and "starts on the first question" in line
    assert f"{len(small_assistant.papers)} abstracts" in line and small_assistant.llm_loaded is None
    remote = Settings(index_dir=Path("/nonexistent"), llm_base_url="http://127.0.0.1:8080/v1", llm_model="qwen")
    assert "qwen at http://127.0.0.1:8080/v1" in ui.backend_label(remote)


def test_the_page_says_offline_only_when_nothing_leaves_the_machine(tmp_path: Path) -> None:
    assert ui.runs_offline(Settings(index_dir=tmp_path))
    assert ui.runs_offline(Settings(index_dir=tmp_path, llm_base_url="http://127.0.0.1:8080/v1", llm_backend="server"))
    assert not ui.runs_offline(Settings(index_dir=tmp_path, llm_backend="openai"))
    assert not ui.runs_offline(Settings(index_dir=tmp_path, llm_base_url="http://10.1.2.3:8000/v1", llm_backend="server"))
    assert not ui.runs_offline(Settings(index_dir=tmp_path, chroma_host="chroma.example.org"))
    assert not ui.runs_offline(Settings(index_dir=tmp_path, embedding="openai:text-embedding-3-small"))


def test_the_status_line_reports_offline_from_the_settings(small_assistant: Assistant, tmp_path: Path) -> None:
    assert "offline" in ui.model_status(small_assistant, small_assistant.settings)
    remote = Settings(index_dir=tmp_path, llm_backend="openai", llm_model="gpt-4o-mini")
    assert "offline" not in ui.model_status(small_assistant, remote)


def test_title_and_examples_come_from_the_loaded_collection(small_assistant: Assistant) -> None:
    assert ui.app_title(small_assistant.papers) == "Reading Assistant · ICML 2026 test papers"  # the files' title line
    assert any(VIEWMASK in q for q in ui.examples_for(small_assistant.papers))
    other = [make_paper("mine.jsonl", i, f"We propose {name}, a method for sorting socks by colour and size.")
             for i, name in enumerate(["SockSort", "PairNet"], start=1)]
    assert ui.app_title(other) == "Reading Assistant"
    examples = ui.examples_for(other)
    assert examples and all("SockSort" in q or "PairNet" in q for q in examples)


# -- the app and serving ---------------------------------------------------------------------------


def test_app_exposes_the_ask_endpoint(small_assistant: Assistant) -> None:
    app = ui.build_app(small_assistant, small_assistant.settings)
    info = app.get_api_info()
    assert list(info["named_endpoints"]) == ["/ask"]  # the chat's own handlers stay private
    ask = info["named_endpoints"]["/ask"]
    assert [p["parameter_name"] for p in ask["parameters"]] == ["question"]
    assert ask["parameters"][0]["type"] == {"type": "string"}
    assert [r["type"].get("type") for r in ask["returns"]] == ["object"]  # the answer's JSON (Answer.to_json)
    names = {d.get("api_name") for d in app.config["dependencies"]}
    assert "ask" in names
    assert app.analytics_enabled is False
    assert small_assistant.llm_loaded is None


def test_theme_and_page_use_no_external_resources() -> None:
    options = ui.launch_options()
    theme = options["theme"]
    stylesheets = " ".join(getattr(theme, "_stylesheets", []))
    assert "googleapis" not in stylesheets and "http" not in stylesheets
    for text in (options["css"], options["head"]):
        assert text and "http://" not in text and "https://" not in text and "@import" not in text
    assert options["share"] is False


def test_loopback_needs_no_login_but_other_addresses_do(tmp_path: Path) -> None:
    settings = Settings(index_dir=tmp_path)
    assert ui.auth_for("127.0.0.1", settings) is None
    assert ui.auth_for("localhost", settings) is None
    assert ui.auth_for("::1", settings) is None
    for host in ("0.0.0.0", "192.168.1.20", "::"):
        with pytest.raises(AssistantError, match="ASSISTANT_USERNAME and ASSISTANT_PASSWORD"):
            ui.auth_for(host, settings)
    with pytest.raises(AssistantError, match="ASSISTANT_USERNAME"):
        ui.serve(settings, host="0.0.0.0", port=free_port())  # refuses before opening anything
    secured = Settings(index_dir=tmp_path, username="ann", password="s3cret")
    assert ui.auth_for("0.0.0.0", secured) == ("ann", "s3cret")
    assert ui.auth_for("127.0.0.1", secured) == ("ann", "s3cret")


def test_cli_registers_serve() -> None:
    from assistant import cli

    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--port", "7999", "--index-dir", "/tmp/x"])
    assert (args.host, args.port, args.index_dir) == (None, 7999, Path("/tmp/x"))
    assert args.run is cli.cmd_serve
    assert "127.0.0.1" in parser._subparsers._group_actions[0].choices["serve"].format_help()


# -- the Compare papers tab ------------------------------------------------------------------------


def test_column_questions_are_one_per_line():
    from assistant.ui.compare import parse_columns

    assert parse_columns("What speedup?\n\n  Compared with what? \n") == ["What speedup?", "Compared with what?"]


def test_the_compare_tab_streams_the_table_then_offers_the_csv(scripted, scripted_llm, tmp_path, monkeypatch):
    import json as _json

    from assistant.ui import compare
    from assistant.ui.compare import PENDING, CompareController

    monkeypatch.setattr(compare, "CSV_DIR", tmp_path)  # the export goes to the test's own temp folder
    scripted_llm.responder = lambda messages: _json.dumps({"answer": "not stated", "evidence": ["1"]})
    vegas, arm = paper_titled(scripted, VEGAS), paper_titled(scripted, ARM)
    updates = list(CompareController(scripted).fill([vegas.id, arm.id], "What speedup?\nWhich baseline?"))
    grids = [u[0] for u in updates]
    assert (grids[0].values == PENDING).sum() == 3, "the first cell arrives while the others wait"
    final_grid, status, table, export, _, _ = updates[-1]
    assert list(final_grid.columns) == ["Paper", "What speedup?", "Which baseline?"]
    assert table is not None and "2 papers × 2 questions" in status
    assert Path(export["value"]).parent == tmp_path
    assert Path(export["value"]).read_text(encoding="utf-8").startswith("paper_id,title,label")


def test_the_compare_tab_says_to_pick_papers_first(small_assistant):
    from assistant.ui.compare import CompareController

    (_, status, table, _, _, _), = list(CompareController(small_assistant).fill([], "What speedup?"))
    assert "Pick papers" in status and table is None


def test_a_clicked_cell_shows_its_abstract_with_the_evidence_marked(small_assistant):
    from assistant.cite import make_citation
    from assistant.types import Cell, Row, Table
    from assistant.ui.compare import render_cell

    vegas = paper_titled(small_assistant, VEGAS)
    sentences = small_assistant.engine.sentences.get(vegas)
    index = next(i for i, s in enumerate(sentences.clean) if "1.25×" in s)
    cell = Cell(0, 0, vegas, "What speedup?", "<b>1.25×–2.81×</b>", "stated", make_citation(1, vegas, sentences.raw, [index]))
    html = render_cell(Table(["What speedup?"], [Row(vegas)], [[cell]]), 0, 0)
    assert html.count("<mark>") == 2  # the quote, and the same sentence in the whole abstract
    assert "&lt;b&gt;" in html and "<b>" not in html
    missing = Cell(0, 0, vegas, "What batch size?", "not stated in the abstract", "not_stated")
    assert "Not stated in the abstract" in render_cell(Table(["What batch size?"], [Row(vegas)], [[missing]]), 0, 0)


def test_a_topic_group_fills_the_papers_of_the_table(small_assistant):
    from assistant.ui.compare import CompareController

    controller = CompareController(small_assistant)
    label = controller.group_choices()[0][1]
    update, status = controller.from_group(label)
    group = next(g for g in small_assistant.topic_groups() if g.label == label)
    assert update["value"] == [p.id for p in group.papers] and label in status


def test_papers_by_typed_topic_say_when_the_model_failed_while_weighing_them(scripted, scripted_llm):
    from assistant.ui.compare import CompareController

    def fail(messages):
        raise RuntimeError("out of memory")

    scripted_llm.first_tokens = fail
    update, status = CompareController(scripted).from_topic("sparse attention for video")
    titles = {p.title for p in scripted.papers if p.id in update["value"]}
    assert ISA in titles, "the rule alone still chooses the papers"
    assert "could not weigh the papers" in status


def test_exporting_a_table_removes_exports_older_than_a_day(tmp_path, monkeypatch):
    import os
    import time

    from assistant.types import Table
    from assistant.ui import compare

    monkeypatch.setattr(compare, "CSV_DIR", tmp_path)
    old, recent = tmp_path / "table-old.csv", tmp_path / "table-recent.csv"
    for path in (old, recent):
        path.write_text("paper_id\n", encoding="utf-8")
    os.utime(old, (time.time() - 2 * 24 * 3600,) * 2)
    written = compare.CompareController._csv(Table(columns=["What speedup?"], rows=[], cells=[]))
    assert written.read_text(encoding="utf-8").startswith("paper_id,title,label")
    assert not old.exists() and recent.exists()
