"""How an Assistant is put together: its parts chosen once from the settings and passed in,
the model connected once on first use, messages reaching every listener, and a start-up that
reads the index's record once."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

from assistant import Assistant
from assistant import store as store_module
from assistant.judge import Fitted
from assistant.llm import ModelHandle, backend_of

from support import make_settings, scripted_settings
from fakes import ScriptedLLM


def test_the_embedded_model_is_chosen_when_no_server_is_set(tmp_path: Path) -> None:
    assert backend_of(make_settings(tmp_path)) == "local"


def test_a_server_url_chooses_that_server(tmp_path: Path) -> None:
    assert backend_of(make_settings(tmp_path, llm_base_url="http://127.0.0.1:9/v1")) == "server"


def test_the_openai_backend_wins_over_a_server_url(tmp_path: Path) -> None:
    assert backend_of(make_settings(tmp_path, llm_backend="openai", llm_base_url="http://127.0.0.1:9/v1")) == "openai"


def test_the_model_handle_connects_once_for_callers_that_arrive_together(tmp_path: Path, scripted_llm: ScriptedLLM) -> None:
    handle = ModelHandle(scripted_settings(tmp_path, scripted_llm), notify=lambda message: None)
    assert handle.loaded is None and handle.start_seconds is None
    got: list[object] = []
    callers = [threading.Thread(target=lambda: got.append(handle.get())) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(got) == 4 and all(model is got[0] for model in got)
    assert handle.loaded is got[0] and handle.start_seconds is not None


def test_a_closed_model_handle_connects_again_on_the_next_use(tmp_path: Path, scripted_llm: ScriptedLLM) -> None:
    handle = ModelHandle(scripted_settings(tmp_path, scripted_llm), notify=lambda message: None)
    first = handle.get()
    handle.close()
    assert handle.loaded is None
    assert handle.get() is not first


def test_a_listener_hears_the_assistants_messages_after_the_start_up_notify(small_index: Path) -> None:
    heard: list[tuple[str, str]] = []
    with Assistant.from_settings(make_settings(small_index), notify=lambda m: heard.append(("start-up", m))) as assistant:
        assistant.listen(lambda m: heard.append(("listener", m)))
        assistant.notify("The model restarted.")
    assert heard == [("start-up", "The model restarted."), ("listener", "The model restarted.")]


def test_start_up_on_an_index_up_to_date_reads_its_record_once(small_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    read = store_module.Store.info

    def counted(self: store_module.Store) -> store_module.IndexInfo | None:
        reads.append(1)
        return read(self)

    monkeypatch.setattr(store_module.Store, "info", counted)
    Assistant.from_settings(make_settings(small_index)).close()
    assert len(reads) == 1


def test_fitted_rules_given_at_start_up_replace_the_packaged_ones(small_index: Path) -> None:
    packaged = Fitted.load()
    given = dataclasses.replace(packaged, claim_threshold=packaged.claim_threshold + 1.0)
    with Assistant.from_settings(make_settings(small_index), fitted=given) as assistant:
        assert assistant.engine.judge.fitted is given
