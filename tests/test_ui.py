"""The chat UI without a browser: handlers, renderers, escaping, the /ask endpoint, serving rules.

Answers are built directly from real corpus papers (our own `Answer`/`Citation` values), and
the handlers run against a scripted assistant, so no test here needs the language model except
the single end-to-end `/ask` call marked `llm`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from conftest import free_port, make_settings

from assistant import Assistant, AssistantError, Settings, ui
from assistant.errors import IndexMissingError, LLMUnavailableError
from assistant.load import clean_markup, make_paper, split_sentences
from assistant.types import Answer, Citation, Paper, Passage

VEGAS_QUESTION = "What decoding throughput speedup does Vegas get over default vLLM?"
HOSTILE = '<script>alert(1)</script> We study <img src=x onerror="alert(2)"> robust {{x}} ${y} models.'


def paper_titled(assistant: Assistant, title: str) -> Paper:
    return next(p for p in assistant.papers if p.title == title)


def sentence_with(paper: Paper, needle: str) -> str:
    return next(s for s in split_sentences(paper.abstract) if needle in s)


def vegas_answer(shared_assistant: Assistant) -> Answer:
    vegas = paper_titled(shared_assistant, "Vegas")
    quote = sentence_with(vegas, "speedup in decoding throughput")  # has LaTeX: 1.25$\times$
    return Answer(
        question=VEGAS_QUESTION,
        text="Vegas achieves a 1.25×–2.81× decoding throughput speedup over default vLLM [1].",
        citations=[Citation(marker=1, paper=vegas, quote=quote, support=0.9)],
        passages=shared_assistant.retrieve(VEGAS_QUESTION, k=3),
        flagged=["It is the fastest method ever built."],
        timings={"first_token": 1.0},
    )


class ScriptedAssistant:
    """Real papers and retrieval; `stream` replays a script and records what it was given."""

    def __init__(self, real: Assistant, script: list[Any] | Exception) -> None:
        self.real = real
        self.papers = real.papers
        self.sources = real.sources
        self.engine = type("Engine", (), {"_llm": None})()
        self.notify = lambda message: None
        self.script = script
        self.calls: list[dict[str, Any]] = []

    def retrieve(self, question: str, k: int | None = None, source: str | None = None) -> list[Passage]:
        return self.real.retrieve(question, k=k, source=source)

    def stream(self, question: str, history: Any = None, k: Any = None, source: Any = None) -> Iterator[Any]:
        self.calls.append({"question": question, "history": history, "k": k, "source": source})
        if isinstance(self.script, Exception):
            raise self.script
        for event in self.script:
            if isinstance(event, Answer):
                event.question = question
            yield event

    def ask(self, question: str, **kwargs: Any) -> Answer:
        return [e for e in self.stream(question) if isinstance(e, Answer)][-1]


def run_turn(controller: ui.ChatController, question: str, session: dict, retrieval_only: bool = False) -> list[tuple]:
    """submit + the handler it routes to, as the browser would; returns the handler's outputs."""
    cleared, display, status, session, llm_job, retrieval_job = controller.submit(question, session, retrieval_only)
    assert cleared == ""
    assert display[-2] == {"role": "user", "content": ui.esc(question)}
    if retrieval_only:
        assert llm_job == gr.skip()
        return [controller.retrieve(retrieval_job, session, 5, "")]
    assert retrieval_job == gr.skip()
    assert "Queued" in status
    return list(controller.answer(llm_job, session, 5, ""))


def last_value(outputs: list[tuple], position: int) -> Any:
    return [o[position] for o in outputs if o[position] != gr.skip()][-1]


# -- the chat handler ---------------------------------------------------------------------------


def test_history_is_passed_as_plain_messages(shared_assistant: Assistant) -> None:
    answer = vegas_answer(shared_assistant)
    fake = ScriptedAssistant(shared_assistant, ["Vegas ", "is fast [1]."] + [answer])
    controller = ui.ChatController(fake, shared_assistant.settings)
    session = ui.new_session()

    run_turn(controller, VEGAS_QUESTION, session)
    run_turn(controller, "Is its code public?", session)

    assert fake.calls[0]["history"] == []
    second = fake.calls[1]["history"]
    assert second == [{"role": "user", "content": VEGAS_QUESTION}, {"role": "assistant", "content": answer.text}]
    assert all(type(m) is dict and set(m) == {"role", "content"} and isinstance(m["content"], str) for m in second)
    assert fake.calls[1]["question"] == "Is its code public?"
    # What the chat shows: two questions, two answers, the second linked to its own cards.
    assert [m["role"] for m in session["display"]] == ["user", "assistant", "user", "assistant"]
    assert 'href="#src-2-1"' in session["display"][-1]["content"]
    assert len(session["panels"]) == 2 and not session["pending"]


def test_stream_shows_draft_then_verified_answer(shared_assistant: Assistant) -> None:
    answer = vegas_answer(shared_assistant)
    fake = ScriptedAssistant(shared_assistant, ["Vegas <b>is</b> ", "fast [1]."] + [answer])
    controller = ui.ChatController(fake, shared_assistant.settings)
    outputs = run_turn(controller, VEGAS_QUESTION, ui.new_session())

    drafts = [o[0][-1]["content"] for o in outputs if o[0] != gr.skip() and "draft-cursor" in o[0][-1]["content"]]
    assert len(drafts) == 2
    assert "Vegas &lt;b&gt;is&lt;/b&gt;" in drafts[0] and "fast [1]." in drafts[1]
    final_chat, panel, status = last_value(outputs, 0), last_value(outputs, 1), last_value(outputs, 2)
    message = final_chat[-1]["content"]
    assert "draft-cursor" not in message
    assert '<a class="cite" href="#src-1-1"' in message
    assert "1 sentence of the draft could not be verified against the abstracts" in message and "fastest method ever" in message
    assert 'id="src-1-1"' in panel and "Vegas" in panel
    assert "1 source verified" in status


def test_sources_card_highlights_the_quote_in_the_cleaned_abstract(shared_assistant: Assistant) -> None:
    answer = vegas_answer(shared_assistant)
    panel = ui.render_sources(answer, turn=3)
    vegas = answer.citations[0].paper
    cleaned = clean_markup(answer.citations[0].quote)
    assert "$" in answer.citations[0].quote and "$" not in cleaned
    assert cleaned in vegas.text
    assert f'<article class="src-card" id="src-3-1">' in panel
    assert '<span class="cite-badge">1</span>' in panel
    assert '<span class="src-title">Vegas</span>' in panel
    assert f"{vegas.source}</span> <span class=\"src-ordinal\">#{vegas.ordinal}</span>" in panel
    assert panel.count(f"<mark>{ui.esc(cleaned)}</mark>") == 2  # the excerpt and inside the full abstract
    assert "<details" in panel and "Full abstract" in panel
    assert "\\times" not in panel


def test_every_abstract_sentence_can_be_located(shared_assistant: Assistant) -> None:
    """Quotes are verbatim sentences of `abstract`; each must be found in the cleaned `text`."""
    missing = [
        (p.label, s[:60])
        for p in shared_assistant.papers
        for s in split_sentences(p.abstract)
        if len(clean_markup(s)) >= 3 and not ui.locate_quote(p, s)
    ]
    assert missing == []


def test_quote_of_two_separate_sentences_is_highlighted_twice(shared_assistant: Assistant) -> None:
    paper = paper_titled(shared_assistant, "We study online bilateral trade where a learner…")
    sentences = split_sentences(paper.abstract)
    quote = f"{sentences[0]} {sentences[-1]}"
    spans = ui.locate_quote(paper, quote)
    assert len(spans) == 2
    card = ui.citation_card(Citation(marker=2, paper=paper, quote=quote), turn=1)
    assert card.count("<mark>") == 4


def test_refusal_lists_the_closest_papers(shared_assistant: Assistant) -> None:
    passages = shared_assistant.retrieve("What is the best recipe for sourdough bread?", k=5)
    answer = Answer(
        question="What is the best recipe for sourdough bread?",
        text="The abstracts in this collection do not contain the answer to that question.",
        refused=True,
        passages=passages,
    )
    panel = ui.render_sources(answer, turn=1)
    assert "Closest papers" in panel and "Not an answer" in panel
    assert panel.count('class="src-card src-ranked"') == 3
    titles = re.findall(r'<span class="src-title">([^<]*)</span>', panel)
    assert titles == [ui.esc(p.paper.title) for p in passages[:3]]
    message = ui.render_answer(answer, turn=1)
    assert "closest papers are listed beside the chat" in message and "cite" not in message


def test_llm_down_shows_the_retrieval_answer_with_its_notice(shared_assistant: Assistant) -> None:
    passages = shared_assistant.retrieve(VEGAS_QUESTION, k=4)
    down = Answer(
        question=VEGAS_QUESTION,
        text="The language model could not answer, so here are the most relevant papers instead.",
        passages=passages,
        retrieval_only=True,
        notices=["LLM server at http://127.0.0.1:9/v1 is not reachable: Connection refused."],
    )
    fake = ScriptedAssistant(shared_assistant, [down])
    controller = ui.ChatController(fake, shared_assistant.settings)
    outputs = run_turn(controller, VEGAS_QUESTION, ui.new_session())
    message = last_value(outputs, 0)[-1]["content"]
    assert "not reachable" in message and "most relevant papers instead" in message
    panel = last_value(outputs, 1)
    assert "Most relevant papers" in panel and panel.count("src-card") == 4
    assert "Language model unavailable" in last_value(outputs, 2)


def test_assistant_errors_become_messages_not_tracebacks(shared_assistant: Assistant) -> None:
    error = IndexMissingError("No index yet. Run `assistant index` first.")
    controller = ui.ChatController(ScriptedAssistant(shared_assistant, error), shared_assistant.settings)
    session = ui.new_session()
    with pytest.warns(UserWarning, match="No index yet"):  # gr.Warning outside a request
        outputs = run_turn(controller, "anything?", session)
    message = last_value(outputs, 0)[-1]["content"]
    assert "Could not answer" in message and "Run `assistant index` first." in message
    assert "Traceback" not in message and "Error: No index yet" in last_value(outputs, 2)
    assert not session["pending"] and session["history"] == []

    crash = ui.ChatController(ScriptedAssistant(shared_assistant, ZeroDivisionError("boom")), shared_assistant.settings)
    outputs = run_turn(crash, "anything?", ui.new_session())
    assert "Unexpected error: ZeroDivisionError: boom" in last_value(outputs, 0)[-1]["content"]


def test_a_second_question_waits_for_the_first(shared_assistant: Assistant) -> None:
    controller = ui.ChatController(ScriptedAssistant(shared_assistant, []), shared_assistant.settings)
    session = ui.new_session()
    controller.submit("first?", session, False)
    with pytest.warns(UserWarning, match="Still answering"):
        result = controller.submit("second?", session, False)
    assert result[4] == gr.skip() and len(session["display"]) == 2
    display, status, session = controller.stop(session)
    assert "Stopped" in display[-1]["content"] and not session["pending"]


def test_sessions_are_independent(shared_assistant: Assistant) -> None:
    controller = ui.ChatController(ScriptedAssistant(shared_assistant, []), shared_assistant.settings)
    one, two = ui.new_session(), ui.new_session()
    run_turn(controller, "Which paper is about Vegas?", one, retrieval_only=True)
    assert two == ui.new_session() and len(one["display"]) == 2


# -- escaping -------------------------------------------------------------------------------------


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
        ui.render_sources(Answer(question="x", text="", refused=True, passages=[passage])),
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


# -- retrieval only, browser, status ---------------------------------------------------------------


def test_retrieval_only_ranks_papers_without_the_llm(shared_assistant: Assistant) -> None:
    assert shared_assistant.engine._llm is None
    controller = ui.ChatController(shared_assistant, shared_assistant.settings)
    session = ui.new_session()
    [(display, panel, status, session)] = run_turn(
        controller, "Which paper proposes sparse attention for in-context video editing?", session, retrieval_only=True
    )
    assert shared_assistant.engine._llm is None
    assert "ISA" in re.findall(r'<span class="src-title">([^<]*)</span>', panel)[0]
    assert panel.count('class="src-card src-ranked"') == 5 and "Ranked papers" in panel
    assert 'href="#src-1-1"' in display[-1]["content"] and "no language model" in status
    assert session["history"][0]["role"] == "user" and "ISA" in session["history"][1]["content"]


def test_source_filter_limits_retrieval(shared_assistant: Assistant) -> None:
    controller = ui.ChatController(shared_assistant, shared_assistant.settings)
    wanted = shared_assistant.sources[2]
    session = ui.new_session()
    *_, retrieval_job = controller.submit("sparse attention", session, True)
    display, panel, status, session = controller.retrieve(retrieval_job, session, 3, wanted)
    files = re.findall(r'<span class="src-file">([^<]*)</span>', panel)
    assert files and set(files) == {wanted}
    assert shared_assistant.engine._llm is None


def test_paper_browser_filters_and_opens_abstracts(shared_assistant: Assistant) -> None:
    everything = ui.render_paper_list(shared_assistant.papers)
    assert everything.count('<details class="paper-row">') == len(shared_assistant.papers) == 57
    assert "57 papers" in everything
    some = ui.render_paper_list(shared_assistant.papers, "sparse ATTENTION")
    count = some.count('<details class="paper-row">')
    assert 0 < count < 57 and f"{count} of 57 papers" in some
    assert "Vegas" in some and re.search(r"<mark>sparse attention</mark>", some, re.IGNORECASE)
    assert "No paper matches" in ui.render_paper_list(shared_assistant.papers, "zzzz-no-such-word")


def test_model_status_does_not_start_the_model(shared_assistant: Assistant) -> None:
    line = ui.model_status(shared_assistant, shared_assistant.settings)
    assert "Qwen2.5-Coder-1.5B-Instruct (local)" in line and "loads on first question" in line
    assert "57 abstracts" in line and shared_assistant.engine._llm is None
    remote = Settings(index_dir=Path("/nonexistent"), llm_base_url="http://127.0.0.1:8080/v1", llm_model="qwen")
    assert "qwen at http://127.0.0.1:8080/v1" in ui.backend_label(remote)


# -- the app --------------------------------------------------------------------------------------


def test_app_exposes_the_ask_endpoint(shared_assistant: Assistant) -> None:
    app = ui.build_app(shared_assistant, shared_assistant.settings)
    info = app.get_api_info()
    assert list(info["named_endpoints"]) == ["/ask"]  # the chat's own handlers stay private
    ask = info["named_endpoints"]["/ask"]
    assert [p["parameter_name"] for p in ask["parameters"]] == ["question"]
    assert ask["parameters"][0]["type"] == {"type": "string"}
    assert [r["type"].get("type") for r in ask["returns"]] == ["string", "array"]
    names = {d.get("api_name") for d in app.config["dependencies"]}
    assert "ask" in names
    assert app.analytics_enabled is False
    assert shared_assistant.engine._llm is None


def test_ask_api_returns_text_and_sources(shared_assistant: Assistant) -> None:
    answer = vegas_answer(shared_assistant)
    controller = ui.ChatController(ScriptedAssistant(shared_assistant, [answer]), shared_assistant.settings)
    text, sources = controller.ask_api(VEGAS_QUESTION)
    assert text == answer.text
    assert sources == [
        {"marker": 1, "title": "Vegas", "source": answer.citations[0].paper.source,
         "ordinal": answer.citations[0].paper.ordinal, "quote": answer.citations[0].quote}
    ]
    failing = ui.ChatController(ScriptedAssistant(shared_assistant, LLMUnavailableError("down")), shared_assistant.settings)
    with pytest.raises(gr.Error, match="down"):
        failing.ask_api("x")


def test_theme_and_page_use_no_external_resources() -> None:
    options = ui.launch_options()
    theme = options["theme"]
    stylesheets = " ".join(getattr(theme, "_stylesheets", []))
    assert "googleapis" not in stylesheets and "http" not in stylesheets
    for text in (options["css"], options["head"]):
        assert text and "http://" not in text and "https://" not in text and "@import" not in text
    assert options["share"] is False


# -- serving ----------------------------------------------------------------------------------


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
    parser = argparse.ArgumentParser(prog="assistant")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--index-dir", type=Path)
    ui.add_cli(parser.add_subparsers(dest="command"), common)
    args = parser.parse_args(["serve", "--port", "7999", "--index-dir", "/tmp/x"])
    assert (args.host, args.port, args.index_dir) == (None, 7999, Path("/tmp/x"))
    assert args.run is ui._cmd_serve
    assert "127.0.0.1" in parser._subparsers._group_actions[0].choices["serve"].format_help()


@pytest.mark.llm
def test_ask_endpoint_answers_through_gradio_client(shared_index_dir: Path) -> None:
    """The one real answer of this file: /ask over HTTP with gradio_client, the local LLM behind it."""
    from gradio_client import Client

    assistant = Assistant.from_settings(make_settings(shared_index_dir))
    app = ui.build_app(assistant, assistant.settings)
    port = free_port()
    try:
        app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **ui.launch_options())
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        text, sources = client.predict(VEGAS_QUESTION, api_name="/ask")
        assert re.search(r"\[1\]", text), text
        assert sources and sources[0]["marker"] == 1 and sources[0]["title"] == "Vegas"
        assert set(sources[0]) == {"marker", "title", "source", "ordinal", "quote"}
        assert sources[0]["quote"] in paper_titled(assistant, "Vegas").abstract
    finally:
        app.close()
        assistant.close()
