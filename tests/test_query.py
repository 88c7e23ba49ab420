"""Reading a question once: its words, language, kind, and what is searched for and weighed."""

from __future__ import annotations

import pytest

from assistant.errors import LLMUnavailableError, QuestionError
from assistant.kinds import KindReader, KindReading
from assistant.query import language_of, read_query, words_of


@pytest.fixture(scope="module")
def kinds(embedder) -> KindReader:
    return KindReader(embedder.encode)


def read(question: str, history=(), rewrite=lambda text, turns: "", kinds=None, **options):
    values = {"max_tokens": 400, "history_turns": 6, "rewrite_follow_ups": False}
    values.update(options)
    reader = kinds.read if kinds else (lambda text: KindReading("fact", {"fact": 1.0}))
    return read_query(question, list(history), rewrite=rewrite, read_kind=reader, **values)


def test_an_empty_question_is_an_error_that_says_what_to_do() -> None:
    with pytest.raises(QuestionError, match="empty"):
        words_of("   <b></b>  ", 400)


def test_a_question_longer_than_the_limit_is_cut_with_a_notice() -> None:
    text, notices = words_of("why " * 1000, 50)
    assert len(text.split()) <= 60 and "truncated" in notices[0]


def test_a_question_in_chinese_is_answered_in_chinese_and_japanese_in_english() -> None:
    assert language_of("这个方法快多少？") == "zh"
    assert language_of("この手法はどれくらい速いですか") == "en"
    assert language_of("How fast is it?") == "en"


def test_a_question_in_chinese_is_searched_for_as_the_models_english_rewrite() -> None:
    query = read("Vegas 比 vLLM 快多少？", rewrite=lambda text, turns: "How much faster is Vegas than vLLM?")
    assert query.search == query.english == "How much faster is Vegas than vLLM?"
    assert query.language == "zh" and "Vegas 比 vLLM 快多少" in query.prompt


def test_a_rewrite_that_fails_leaves_the_question_as_typed_and_says_so() -> None:
    def fails(text, turns):
        raise LLMUnavailableError("the server is down")

    query = read("Vegas 比 vLLM 快多少？", rewrite=fails)
    assert query.search == query.text and "Could not rewrite" in query.notices[0]


def test_a_follow_up_that_points_back_is_searched_with_the_last_exchange() -> None:
    history = [{"role": "user", "content": "Which paper drafts tokens from its own KV cache?"},
               {"role": "assistant", "content": "That is Vegas [1]."}]
    query = read("How much faster is it?", history)
    assert "Vegas" in query.search and query.follow_up
    assert "This follows the earlier question" in query.prompt


def test_a_follow_up_with_its_own_subject_is_searched_as_typed() -> None:
    history = [{"role": "user", "content": "What is Vegas?"}, {"role": "assistant", "content": "A decoding method [1]."}]
    query = read("Which paper prunes tree ensembles without changing their predictions?", history)
    assert query.search == query.text


def test_the_kind_of_question_is_read_by_the_fitted_classifier(kinds: KindReader) -> None:
    assert read("what is gradient descent in simple terms?", kinds=kinds).kind.kind == "out_of_scope"
    assert read("give me a short summary of the HaloNorm paper", kinds=kinds).kind.kind == "summary"
    assert read("list all the papers on graph neural networks", kinds=kinds).kind.kind == "topic"
    assert read("does FooNet need any retraining?", kinds=kinds).kind.kind == "yes_no"
