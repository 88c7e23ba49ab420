"""The chat UI without a browser: its handlers and the /ask endpoint (what the pages render, and how
they are served, is in test_ui_pages.py).

The handlers drive a real `Assistant` over the tests' corpus (index, retrieval, answer engine,
citation verifier, the `openai` client of assistant.llm) whose language model is the `scripted_llm`
fixture: an OpenAI-compatible HTTP server replying from a script and recording what it was sent.
The one test that needs the real local language model (`/ask` over HTTP) is marked `llm`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from support import ISA, VEGAS, free_port, make_settings
from fakes import Fault, ScriptedLLM

from assistant import Assistant, ui
from assistant.text import clean_markup, split_sentences
from assistant.prompts import REFUSAL_SENTINEL
from assistant.types import Answer, Paper

VEGAS_QUESTION = f"Against default vLLM, what throughput speedup is reported for {VEGAS}?"
# A draft as a small model writes it: one claim the Vegas abstract supports, one it does not.
VEGAS_DRAFT = f"{VEGAS} achieves a 1.25×–2.81× speedup over default vLLM [1]. It is the fastest method ever built [1]."
VEGAS_VERIFIED = f"{VEGAS} achieves a 1.25×–2.81× speedup over default vLLM [1]. It is the fastest method ever built."
FOLLOW_UP = "Is its code public?"
FOLLOW_UP_QUERY = f"{VEGAS} self-speculative decoding source code availability"
CHINESE_FOLLOW_UP = f"{VEGAS} 的代码公开了吗？"
FOLLOW_UP_DRAFT = f"The code of {VEGAS} is available on GitHub [1]."
ISA_QUESTION = "Which paper brings sparse attention to editing videos in context?"
ISA_DRAFT = f"{ISA} is an in-context sparse attention framework for ICL video editing [1]."


def paper_titled(assistant: Assistant, title: str) -> Paper:
    return next(p for p in assistant.papers if p.title == title)


def sentence_with(paper: Paper, needle: str) -> str:
    return next(s for s in split_sentences(paper.abstract) if needle in s)


@pytest.fixture
def controller(scripted: Assistant) -> ui.ChatController:
    return ui.ChatController(scripted, scripted.settings)


def run_turn(
    controller: ui.ChatController, question: str, session: ui.Session, retrieval_only: bool = False, source: str = ""
) -> list[tuple]:
    """submit + the handler it routes to, as the browser would; returns the handler's outputs."""
    cleared, display, status, session, llm_job, retrieval_job = controller.submit(question, session, retrieval_only)
    assert cleared == ""
    assert display[-2] == {"role": "user", "content": ui.esc(question)}
    if retrieval_only:
        assert llm_job == gr.skip()
        return [controller.retrieve(retrieval_job, session, 5, source)]
    assert retrieval_job == gr.skip()
    assert "Queued" in status
    return list(controller.answer(llm_job, session, 5, source))


def last_value(outputs: list[tuple], position: int) -> Any:
    return [o[position] for o in outputs if o[position] != gr.skip()][-1]


def is_condense(request: dict[str, Any]) -> bool:
    return request["messages"][0]["content"].startswith("Rewrite the user's last message")


def answer_prompt(request: dict[str, Any]) -> str:
    """The user message of an answer request (sources and question)."""
    system, user = request["messages"]
    assert system["role"] == "system" and REFUSAL_SENTINEL in system["content"]
    assert user["role"] == "user"
    return user["content"]


def plain(messages: list[Any]) -> bool:
    return all(type(m) is dict and set(m) == {"role", "content"} and type(m["content"]) is str for m in messages)


# -- the chat handler ---------------------------------------------------------------------------


def test_history_is_passed_as_plain_messages(controller: ui.ChatController, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.queue(VEGAS_DRAFT, FOLLOW_UP_DRAFT)
    session = ui.Session()

    run_turn(controller, VEGAS_QUESTION, session)
    first = [{"role": "user", "content": VEGAS_QUESTION}, {"role": "assistant", "content": VEGAS_VERIFIED}]
    assert session.history() == first and plain(session.history())
    assert len(scripted_llm.requests) == 1  # an English first question needs no rewriting
    assert f"Question: {VEGAS_QUESTION}" in answer_prompt(scripted_llm.requests[0])

    run_turn(controller, FOLLOW_UP, session)
    # "Is its code public?" leans on the conversation: it is searched for with the last exchange
    # (no model call to rewrite it) and the model reads the question it follows.
    assert scripted_llm.replies == [] and len(scripted_llm.requests) == 2 and not is_condense(scripted_llm.requests[1])
    prompt = answer_prompt(scripted_llm.requests[1])
    assert f"Question: {FOLLOW_UP}\n(This follows the earlier question: {VEGAS_QUESTION})" in prompt
    assert prompt.startswith(f"Sources:\n[1] {VEGAS}:")
    assert session.history() == first + [
        {"role": "user", "content": FOLLOW_UP},
        {"role": "assistant", "content": FOLLOW_UP_DRAFT},
    ]
    assert plain(session.history())
    # What the chat shows: two questions, two answers, the second linked to its own cards.
    assert [m["role"] for m in ui.chat_messages(session)] == ["user", "assistant", "user", "assistant"]
    assert 'href="#src-2-1"' in ui.chat_messages(session)[-1]["content"]
    assert session.answered == 2 and not session.pending and session.answered == 2
    assert 'id="src-2-1"' in ui.panel_at(session, 3) and "github.com/platformxlab/vegas" in ui.panel_at(session, 3)


def test_stream_shows_draft_then_verified_answer(
    scripted: Assistant, controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue(  # VEGAS_DRAFT in three deltas, with markup the page must not render
        [f"{VEGAS} achieves a 1.25×–2.81× speedup ", "over default vLLM [1]. ", "It is the <b>fastest</b> method ever built [1]."]
    )
    assert "connects on the first question" in ui.model_status(scripted, scripted.settings)
    outputs = run_turn(controller, VEGAS_QUESTION, ui.Session())

    drafts = [o[0][-1]["content"] for o in outputs if o[0] != gr.skip() and "draft-cursor" in o[0][-1]["content"]]
    assert len(drafts) == 3
    assert drafts[0].startswith(f"{VEGAS} achieves a 1.25×–2.81× speedup") and "Drafting" in drafts[0]
    assert "It is the &lt;b&gt;fastest&lt;/b&gt; method ever built [1]." in drafts[2] and "<b>" not in drafts[2]

    final_chat, panel, status = last_value(outputs, 0), last_value(outputs, 1), last_value(outputs, 2)
    message = final_chat[-1]["content"]
    body = message.split("\n\n")[0]
    assert "draft-cursor" not in message and "<b>" not in message
    # The supported sentence keeps its citation; the unsupported one loses it and is flagged.
    assert body.startswith(f'{VEGAS} achieves a 1.25×–2.81× speedup over default vLLM <a class="cite" href="#src-1-1"')
    assert body.count('class="cite"') == 1 and body.endswith("It is the &lt;b&gt;fastest&lt;/b&gt; method ever built.")
    assert "1 sentence of the draft could not be verified against the abstracts" in message
    assert "fastest&lt;/b&gt; method ever built. (no source supports it)" in message
    vegas = paper_titled(scripted, VEGAS)
    quote = clean_markup(sentence_with(vegas, "speedup in decoding throughput"))
    assert 'id="src-1-1"' in panel and f'<span class="src-title">{VEGAS}</span>' in panel
    assert f"<mark>{ui.esc(quote)}</mark>" in panel
    assert "1 source verified" in status
    [request] = scripted_llm.requests
    assert request["stream"] is True and request["model"] == "scripted"
    assert answer_prompt(request).startswith(f"Sources:\n[1] {VEGAS}:")
    line = ui.model_status(scripted, scripted.settings)
    assert f"scripted at {scripted_llm.url}" in line and "ready" in line


def test_the_papers_being_read_are_shown_before_the_first_word_of_the_answer(
    controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue(VEGAS_DRAFT)
    outputs = run_turn(controller, VEGAS_QUESTION, ui.Session())
    first_panel = next(i for i, o in enumerate(outputs) if o[1] != gr.skip())
    first_draft = next(i for i, o in enumerate(outputs) if o[0] != gr.skip() and "draft-cursor" in o[0][-1]["content"])
    assert first_panel < first_draft
    panel = outputs[first_panel][1]
    assert "Reading" in panel and f'<span class="src-title">{VEGAS}</span>' in panel
    assert "<mark>" not in panel.split("</blockquote>")[0]  # the closest sentence, shown, not yet a cited quote
    assert "speedup in decoding throughput" in panel


def test_a_model_warming_up_in_the_background_shows_loading_then_ready(
    scripted: Assistant, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue("Ready.")
    assert scripted.model_state == "idle"
    scripted.warm_up().join(10)
    assert scripted.model_state == "ready" and "ready" in ui.model_status(scripted, scripted.settings)
    [request] = scripted_llm.requests  # the fixed instructions, read once
    assert request["messages"][0]["role"] == "system" and REFUSAL_SENTINEL in request["messages"][0]["content"]


def test_a_warm_up_that_fails_is_reported_and_the_next_question_tries_again(llm_down: Assistant) -> None:
    llm_down.warm_up().join(30)
    line = ui.model_status(llm_down, llm_down.settings)
    assert llm_down.model_state == "failed" and "could not start" in line and "tries again" in line


def test_a_question_about_something_else_is_told_so_without_calling_the_model(
    controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    question = "What is the best recipe for sourdough bread?"
    outputs = run_turn(controller, question, ui.Session())
    assert scripted_llm.requests == []  # nothing relevant was retrieved: the model is not asked
    panel = last_value(outputs, 1)
    assert "Nothing in the collection is about" in panel and 'class="src-card' not in panel
    message = last_value(outputs, 0)[-1]["content"]
    assert "outside this collection" in message and 'class="cite"' not in message
    assert "Not about this collection" in last_value(outputs, 2)


def test_a_question_the_abstracts_do_not_answer_lists_the_closest_papers_beside_the_chat(
    controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue("NOT_IN_SOURCES")
    outputs = run_turn(controller, "Which paper trains spiking neural networks on neuromorphic chips?", ui.Session())
    panel = last_value(outputs, 1)
    assert "Closest papers" in panel and "Not an answer" in panel
    assert panel.count('class="src-card src-ranked"') == 3
    message = last_value(outputs, 0)[-1]["content"]
    assert "closest papers are listed beside the chat" in message and 'class="cite"' not in message
    assert "No answer in these abstracts" in last_value(outputs, 2)


def test_llm_down_shows_the_retrieval_answer_with_its_notice(llm_down: Assistant) -> None:
    controller = ui.ChatController(llm_down, llm_down.settings)
    session = ui.Session()
    outputs = run_turn(controller, VEGAS_QUESTION, session)
    message = last_value(outputs, 0)[-1]["content"]
    assert "most relevant papers instead" in message
    assert f"LLM server at {llm_down.settings.llm_base_url} is not reachable" in message and "Traceback" not in message
    panel = last_value(outputs, 1)
    assert "Most relevant papers" in panel and panel.count('class="src-card src-ranked"') == 5
    assert f'<span class="src-title">{VEGAS}</span>' in panel
    assert "Language model unavailable" in last_value(outputs, 2)
    assert not session.pending and session.answered == 1


FAILURES = [  # what the server does -> what the user reads
    (Fault.http(500, "CUDA out of memory"), "returned HTTP 500: CUDA out of memory"),
    (Fault.garbage(), "sent a response that is not a valid chat completion"),
    (Fault.disconnect(), "is not reachable: Server disconnected without sending a response"),
    (Fault.truncated(f"{VEGAS} achieves a 1.25×"), "ended the answer stream unexpectedly"),
]


def test_llm_failures_become_readable_messages(controller: ui.ChatController, scripted_llm: ScriptedLLM) -> None:
    # One assistant for all four (a fresh one per case would only repeat its start-up).
    scripted_llm.queue(*[fault for fault, _ in FAILURES])
    for fault, explanation in FAILURES:
        session = ui.Session()
        outputs = run_turn(controller, VEGAS_QUESTION, session)
        message = last_value(outputs, 0)[-1]["content"]
        assert "most relevant papers instead" in message and explanation in message, (fault, message)
        assert "Traceback" not in message and "draft-cursor" not in message, fault
        assert "Most relevant papers" in last_value(outputs, 1), fault
        assert "Language model unavailable" in last_value(outputs, 2), fault
        assert not session.pending, fault
    assert len(scripted_llm.requests) == len(FAILURES) and scripted_llm.replies == []


def test_a_chinese_follow_up_is_rewritten_with_the_conversation_as_plain_text(
    controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue(VEGAS_DRAFT, FOLLOW_UP_QUERY, FOLLOW_UP_DRAFT)  # answer; then condense, answer
    session = ui.Session()
    run_turn(controller, VEGAS_QUESTION, session)
    run_turn(controller, CHINESE_FOLLOW_UP, session)
    condense, answer = scripted_llm.requests[1], scripted_llm.requests[2]
    assert is_condense(condense) and condense["max_tokens"] == 64
    assert [m["role"] for m in condense["messages"]] == ["user"]
    prompt = condense["messages"][0]["content"]
    assert f"user: {VEGAS_QUESTION}\nassistant: {VEGAS_VERIFIED}\n" in prompt
    assert f"Last message: {CHINESE_FOLLOW_UP}" in prompt
    # The rewritten query drove retrieval and the prompt; the typed question rides along.
    assert f"Question: {FOLLOW_UP_QUERY}\n(The user asked: {CHINESE_FOLLOW_UP})" in answer_prompt(answer)
    assert 'href="#src-2-1"' in ui.chat_messages(session)[-1]["content"]


def test_a_follow_up_is_searched_as_typed_when_the_rewrite_fails(
    controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue(VEGAS_DRAFT, Fault.http(500, "rewrite failed"), FOLLOW_UP_DRAFT)
    session = ui.Session()
    run_turn(controller, VEGAS_QUESTION, session)
    outputs = run_turn(controller, CHINESE_FOLLOW_UP, session)
    assert is_condense(scripted_llm.requests[1]) and scripted_llm.replies == []
    assert f"Question: {CHINESE_FOLLOW_UP}" in answer_prompt(scripted_llm.requests[2])
    message = last_value(outputs, 0)[-1]["content"]
    assert "Could not rewrite the question" in message and "rewrite failed" in message
    assert 'href="#src-2-1"' in message and "1 source verified" in last_value(outputs, 2)


def test_assistant_errors_become_messages_not_tracebacks(
    controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    # A corpus file the index does not have (a stale page, say): the retriever's QuestionError.
    session = ui.Session()
    with pytest.warns(UserWarning, match="Unknown source file"):  # gr.Warning outside a request
        outputs = run_turn(controller, "anything?", session, source="no-such-file.txt")
    message = last_value(outputs, 0)[-1]["content"]
    assert "Could not answer" in message and "Unknown source file &#x27;no-such-file.txt&#x27;" in message
    assert "Traceback" not in message and "Error: Unknown source file" in last_value(outputs, 2)
    assert not session.pending and session.history() == [] and session.answered == 0
    assert scripted_llm.requests == []  # it failed before the model was asked

    # The same in the retrieval-only handler.
    with pytest.warns(UserWarning, match="Unknown source file"):
        [(display, panel, status, _)] = run_turn(
            controller, "anything?", ui.Session(), retrieval_only=True, source="no-such-file.txt"
        )
    assert "Could not answer" in display[-1]["content"] and panel == gr.skip() and "Error:" in status

    # A failure that is not ours (here a request without k) is shown too, as an unexpected error.
    session = ui.Session()
    *_, job, _ = controller.submit("anything?", session, False)
    outputs = list(controller.answer(job, session, None, ""))
    message = last_value(outputs, 0)[-1]["content"]
    assert "Could not answer" in message and "Unexpected error: TypeError" in message
    assert "Traceback" not in message and not session.pending


def test_a_second_question_waits_for_the_first(controller: ui.ChatController, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.queue([f"{VEGAS} achieves ", "a 1.25×–2.81× speedup ", "over default vLLM [1]."])
    session = ui.Session()
    *_, job, _ = controller.submit(VEGAS_QUESTION, session, False)
    answering = controller.answer(job, session, 5, "")
    for display, *_ in answering:  # until the first words of the draft are shown
        if display != gr.skip() and "draft-cursor" in display[-1]["content"]:
            break
    with pytest.warns(UserWarning, match="Still answering"):
        result = controller.submit("second?", session, False)
    assert result[4] == gr.skip() and len(ui.chat_messages(session)) == 2

    display, status, session = controller.stop(session)  # what the Stop button does after cancelling
    answering.close()
    stopped = display[-1]["content"]
    assert stopped.startswith(f"{VEGAS} achieves") and "draft-cursor" not in stopped
    assert "Stopped before the answer was complete; this draft was not verified." in stopped
    assert "Stopped" in status and not session.pending and session.history() == []
    assert controller.submit("second?", session, False)[4]["question"] == "second?"


def test_sessions_are_independent(controller: ui.ChatController, scripted_llm: ScriptedLLM) -> None:
    def respond(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if prompt.startswith("Rewrite the user's last message"):
            return FOLLOW_UP_QUERY
        return ISA_DRAFT if "video editing" in prompt else VEGAS_DRAFT if f"Question: {VEGAS_QUESTION}" in prompt else FOLLOW_UP_DRAFT

    scripted_llm.responder = respond
    one, two, three = ui.Session(), ui.Session(), ui.Session()
    run_turn(controller, VEGAS_QUESTION, one)
    run_turn(controller, ISA_QUESTION, two)
    run_turn(controller, f"Which paper is about {VEGAS}?", three, retrieval_only=True)
    assert [is_condense(r) for r in scripted_llm.requests] == [False, False]  # no history leaked between sessions
    assert ISA in answer_prompt(scripted_llm.requests[1]) and VEGAS not in answer_prompt(scripted_llm.requests[1])
    assert [m["content"] for m in one.history()] == [VEGAS_QUESTION, VEGAS_VERIFIED]
    assert [m["content"] for m in two.history()] == [ISA_QUESTION, ISA_DRAFT]
    assert one.answered == two.answered == three.answered == 1
    assert all('href="#src-1-1"' in ui.chat_messages(s)[-1]["content"] for s in (one, two, three))

    run_turn(controller, FOLLOW_UP, one)
    prompt = answer_prompt(scripted_llm.requests[2])
    assert not is_condense(scripted_llm.requests[2]) and VEGAS_QUESTION in prompt
    assert ISA_QUESTION not in prompt and f"Which paper is about {VEGAS}?" not in prompt
    assert len(ui.chat_messages(one)) == 4 and len(ui.chat_messages(two)) == len(ui.chat_messages(three)) == 2
    assert scripted_llm.errors == []


def test_retrieval_only_ranks_papers_without_the_llm(small_assistant: Assistant) -> None:
    assert small_assistant.llm_loaded is None
    controller = ui.ChatController(small_assistant, small_assistant.settings)
    session = ui.Session()
    [(display, panel, status, session)] = run_turn(
        controller, ISA_QUESTION, session, retrieval_only=True
    )
    assert small_assistant.llm_loaded is None
    assert ISA in re.findall(r'<span class="src-title">([^<]*)</span>', panel)[0]
    assert panel.count('class="src-card src-ranked"') == 5 and "Ranked papers" in panel
    assert 'href="#src-1-1"' in display[-1]["content"] and "no language model" in status
    assert session.history()[0]["role"] == "user" and ISA in session.history()[1]["content"]


# -- the /ask endpoint and the sources of an earlier answer ----------------------------------------


def test_ask_api_returns_text_and_sources(
    scripted: Assistant, controller: ui.ChatController, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.queue(VEGAS_DRAFT)
    result = controller.ask_api(VEGAS_QUESTION)
    assert result["status"] == "answered" and result["text"] == VEGAS_VERIFIED
    vegas = paper_titled(scripted, VEGAS)
    quote = sentence_with(vegas, "speedup in decoding throughput")
    start = vegas.abstract.index(quote)
    [citation] = result["citations"]
    assert citation["marker"] == 1 and citation["paper"]["id"] == vegas.id and citation["paper"]["title"] == VEGAS
    assert citation["quote"] == clean_markup(quote)
    assert [(s["start"], s["end"], s["text"]) for s in citation["spans"]] == [(start, start + len(quote), quote)]
    assert "1.25×" in citation["quote"] and "$" not in citation["quote"]  # as the chat and the CLI show it
    assert set(result) == set(Answer(question="q", text="").to_json())  # the one JSON shape of an answer
    with pytest.raises(gr.Error, match="The question is empty"):
        controller.ask_api("   ")
    assert len(scripted_llm.requests) == 1


@pytest.mark.llm
def test_ask_endpoint_answers_through_gradio_client(small_index: Path) -> None:
    """The one real answer of this file: /ask over HTTP with gradio_client, the local LLM behind it."""
    from gradio_client import Client

    assistant = Assistant.from_settings(make_settings(small_index))
    app = ui.build_app(assistant, assistant.settings)
    port = free_port()
    try:
        app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **ui.launch_options())
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        result = client.predict(VEGAS_QUESTION, api_name="/ask")
        assert result["status"] == "answered" and re.search(r"\[1\]", result["text"]), result
        citation = result["citations"][0]
        assert citation["marker"] == 1 and citation["paper"]["title"] == VEGAS
        assert citation["quote"] in paper_titled(assistant, VEGAS).text  # markup cleaned, as displayed
    finally:
        app.close()
        assistant.close()


def test_clicking_an_answer_after_an_error_turn_shows_that_answers_sources(controller: ui.ChatController) -> None:
    session = ui.Session()
    with pytest.warns(UserWarning):
        run_turn(controller, "anything?", session, retrieval_only=True, source="no-such-file.txt")
    run_turn(controller, VEGAS_QUESTION, session, retrieval_only=True)
    assert controller.select(session, gr.SelectData(None, {"index": 1, "value": ""})) == gr.skip()  # the error
    assert VEGAS in controller.select(session, gr.SelectData(None, {"index": 3, "value": ""}))


