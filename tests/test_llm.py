"""Tests of assistant.llm against the real packaged model and a real llama.cpp server (no mocks).

The assembled GGUF lives in the shared cache (ASSISTANT_CACHE_DIR or the default), so only
the first run ever pays for assembling it. The file makes a few short real generations.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from llama_cpp import LlamaState

from assistant.config import Settings
from assistant.errors import LLMTimeoutError, LLMUnavailableError, ModelError
from support import free_port
from fakes import ScriptedLLM

from assistant.llm.child import KeptStates, _DryRun
from assistant.llm.server import drop_outdated_states
from assistant.llm import LLM, PACKAGED_GGUF_SHA256, PACKAGED_GGUF_SIZE, LocalServer, connect, ensure_gguf

# Every test here starts or assembles the real packaged model.
pytestmark = pytest.mark.llm

TINY_PROMPT = [{"role": "user", "content": "Count from 1 to 5, separated by commas."}]


def local_settings(**overrides: object) -> Settings:
    """Settings for the embedded model in the shared cache, whatever ASSISTANT_LLM_* says."""
    values: dict[str, object] = {
        "llm_backend": "local",
        "llm_base_url": None,
        "gguf_path": None,
        "max_answer_tokens": 16,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
def local_llm() -> Iterator[tuple[LLM, list[str]]]:
    messages: list[str] = []
    llm = connect(local_settings(), progress=messages.append)
    yield llm, messages
    llm.close()


def test_ensure_gguf_returns_verified_packaged_model() -> None:
    path = ensure_gguf(local_settings())
    assert path.stat().st_size == PACKAGED_GGUF_SIZE
    marker = json.loads(path.with_name(path.name + ".verified.json").read_text())
    assert marker["sha256"] == PACKAGED_GGUF_SHA256
    assert marker["size"] == PACKAGED_GGUF_SIZE
    assert marker["mtime_ns"] == path.stat().st_mtime_ns


def test_ensure_gguf_missing_user_file_raises_model_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError, match="nope.gguf.*ASSISTANT_GGUF_PATH"):
        ensure_gguf(local_settings(gguf_path=missing))


def test_unreachable_server_names_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    llm = LLM(base_url=url, model="any", api_key="not-needed", timeout=5)
    with pytest.raises(LLMUnavailableError, match="127.0.0.1") as info:
        llm.chat(TINY_PROMPT)
    assert url in str(info.value)
    llm.close()


def test_connect_reports_loading(local_llm: tuple[LLM, list[str]]) -> None:
    llm, messages = local_llm
    assert llm.name == "Qwen2.5-Coder-1.5B-Instruct (local, llama.cpp)"
    assert llm.context_window == 4096
    assert llm.server is not None and llm.server.load_seconds is not None
    assert any(m.startswith("Loading Qwen2.5-Coder-1.5B-Instruct… (") for m in messages)


def test_stream_chat_yields_deltas(local_llm: tuple[LLM, list[str]]) -> None:
    llm, _ = local_llm
    deltas = list(llm.stream_chat(TINY_PROMPT, max_tokens=16))
    assert len(deltas) >= 3
    assert "".join(deltas).strip()


def test_tiny_timeout_raises_timeout_error(local_llm: tuple[LLM, list[str]]) -> None:
    llm, _ = local_llm
    assert llm.server is not None
    impatient = LLM(base_url=llm.server.url, model=llm.model, api_key="not-needed", timeout=0.001)
    with pytest.raises(LLMTimeoutError, match="ASSISTANT_LLM_TIMEOUT"):
        impatient.chat(TINY_PROMPT, max_tokens=4)
    impatient.close()


def test_the_prompt_cache_size_setting_reaches_the_server_and_zero_turns_it_off(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    on = LocalServer(model, local_settings(llm_prompt_cache_mb=256)).command(8080)
    assert on[on.index("--cache") + 1] == "true" and on[on.index("--cache_size") + 1] == str(256 << 20)
    assert "--cache" not in LocalServer(model, local_settings(llm_prompt_cache_mb=0)).command(8080)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def server_log(llm: LLM) -> str:
    assert llm.server is not None
    with open(llm.server.log_path, "rb") as log:
        log.seek(llm.server._log_offset)
        return log.read().decode(errors="replace")


def test_repeated_prompt_is_served_from_the_prompt_cache(local_llm: tuple[LLM, list[str]]) -> None:
    llm, _ = local_llm
    first = [{"role": "user", "content": f"Nonce {uuid.uuid4().hex}. Name one prime number."}]
    other = [{"role": "user", "content": f"Nonce {uuid.uuid4().hex}. Name one colour."}]
    hits = server_log(llm).count("cache hit")
    llm.chat(first, max_tokens=2)
    llm.chat(other, max_tokens=2)  # the server's context now holds another prompt
    llm.chat(first, max_tokens=2)
    assert server_log(llm).count("cache hit") == hits + 1


def test_prompt_cache_memory_stays_bounded(local_llm: tuple[LLM, list[str]]) -> None:
    # llama-cpp-python alone keeps ~600 KB of logits per prompt token (up to 512 tokens) with
    # every cached state, ~180 MB per request here; the server's wrapper keeps one row.
    llm, _ = local_llm
    assert llm.server is not None and llm.server.pid is not None
    filler = " ".join(f"item{i}" for i in range(150))  # ~300 tokens
    llm.chat([{"role": "user", "content": f"{uuid.uuid4().hex} warm-up {filler}"}], max_tokens=1)
    before = rss_mib(llm.server.pid)
    for _ in range(2):
        llm.chat([{"role": "user", "content": f"{uuid.uuid4().hex} {filler} How many items?"}], max_tokens=1)
    assert rss_mib(llm.server.pid) - before < 120


def test_the_embedded_model_says_how_likely_each_one_word_reply_is(local_llm: tuple[LLM, list[str]]) -> None:
    llm, _ = local_llm
    ask = "Is Paris the capital of {}? Answer yes or no."
    france = llm.choice_logprobs([{"role": "user", "content": ask.format("France")}], ["yes", "no"])
    peru = llm.choice_logprobs([{"role": "user", "content": ask.format("Peru")}], ["yes", "no"])
    assert france is not None and peru is not None
    assert all(v <= 0 for v in (*france.values(), *peru.values()))  # log-probabilities
    assert france["yes"] > france["no"] and peru["no"] > peru["yes"]


def test_a_reply_asked_for_on_one_line_stops_at_the_grammars_bound(local_llm: tuple[LLM, list[str]]) -> None:
    llm, _ = local_llm
    ask = [{"role": "user", "content": "Write the numbers from 1 to 60, one per line."}]
    reply = llm.chat(ask, max_tokens=64, **llm.line_format(20))
    assert reply and "\n" not in reply and len(reply) <= 20


def test_close_stops_server(local_llm: tuple[LLM, list[str]]) -> None:
    # Runs last in this file: it ends the module's server.
    llm, _ = local_llm
    server = llm.server
    assert server is not None and server.running
    pid, port = server.pid, server.port
    assert pid is not None and port is not None
    llm.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    with pytest.raises(LLMUnavailableError, match="stopped"):
        llm.chat(TINY_PROMPT)


# -- prompt states kept on disk ---------------------------------------------------------------------


def state_of(tokens: list[int], size: int = 64) -> LlamaState:
    """A state as the server's cache receives it: the whole token window, one row of logits."""
    window = np.zeros(4096, dtype=np.intc)
    window[: len(tokens)] = tokens
    return LlamaState(input_ids=window, scores=np.ones((1, 8), dtype=np.single), n_tokens=len(tokens),
                      llama_state=bytes(range(256)) * (size // 256 + 1), llama_state_size=size, seed=7)


def kept_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.npz"))


def test_a_kept_state_is_found_by_a_later_cache_for_a_prompt_that_starts_with_it(tmp_path: Path) -> None:
    cache = KeptStates(1 << 20, tmp_path, 1 << 30)
    cache.keep_next = True
    cache[[1, 2, 3, 4]] = state_of([1, 2, 3, 4])
    later = KeptStates(1 << 20, tmp_path, 1 << 30)  # a new server process: nothing in RAM
    state = later[[1, 2, 3, 9, 9]]
    assert state.n_tokens == 4 and state.input_ids[:4].tolist() == [1, 2, 3, 4] and state.seed == 7
    assert state.llama_state == state_of([1, 2, 3, 4]).llama_state


def test_only_states_asked_for_are_kept_on_disk(tmp_path: Path) -> None:
    cache = KeptStates(1 << 20, tmp_path, 1 << 30)
    cache[[5, 6, 7]] = state_of([5, 6, 7])  # an ordinary request: RAM only
    assert kept_files(tmp_path) == []
    with pytest.raises(KeyError):
        KeptStates(1 << 20, tmp_path, 1 << 30)[[5, 6, 7]]


def test_the_same_prompt_is_kept_once(tmp_path: Path) -> None:
    cache = KeptStates(1 << 20, tmp_path, 1 << 30)
    cache.keep_next = True
    cache[[1, 2, 3, 4]] = state_of([1, 2, 3, 4])
    cache[[1, 2, 3, 8]] = state_of([1, 2, 3, 8])  # the same prompt, another generated token
    assert len(kept_files(tmp_path)) == 1 and cache.last_kept["new"] is False


def test_kept_states_stay_within_their_disk_limit_dropping_the_least_recently_used(tmp_path: Path) -> None:
    one = KeptStates(1 << 20, tmp_path, 1 << 30)
    one.keep_next = True
    one[[1, 1]] = state_of([1, 1], size=200_000)
    size = kept_files(tmp_path)[0].stat().st_size
    cache = KeptStates(1 << 20, tmp_path, int(size * 2.5))
    cache.keep_next = True
    cache[[2, 2]] = state_of([2, 2], size=200_000)
    os.utime(kept_files(tmp_path)[0], (1, 1))  # make the files' order of use unambiguous
    cache[[1, 1, 5]]  # noqa: B018 - reading [1, 1] marks it used
    cache[[3, 3]] = state_of([3, 3], size=200_000)
    left = KeptStates(1 << 20, tmp_path, 1 << 30)
    assert sorted(left.kept) == [(1, 1), (3, 3)]


def test_a_dry_lookup_says_whether_a_prompt_is_at_hand_and_reads_nothing(tmp_path: Path) -> None:
    cache = KeptStates(1 << 20, tmp_path, 1 << 30)
    cache.keep_next = True
    cache[[1, 2, 3, 4, 0]] = state_of([1, 2, 3, 4, 0])  # a kept prompt, with its one generated token
    cache.keep_next = False
    later = KeptStates(1 << 20, tmp_path, 1 << 30)
    later.dry_next = True
    for prompt, at_hand in (([1, 2, 3, 4], True), ([1, 2, 3, 5], False), ([1, 2, 3, 4, 7, 7], False)):
        with pytest.raises(_DryRun):
            later[prompt]
        assert later.last_kept == {"tokens": len(prompt), "kept": at_hand}


def test_a_damaged_kept_state_is_forgotten_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "0123.npz").write_bytes(b"not a state")
    cache = KeptStates(1 << 20, tmp_path, 1 << 30)
    assert cache.kept == {} and kept_files(tmp_path) == []
    with pytest.raises(KeyError):
        cache[[1, 2]]


def test_a_prefix_kept_by_one_server_is_not_read_again_by_the_next(tmp_path: Path) -> None:
    settings = local_settings(llm_kept_states_dir=tmp_path)
    prefix = [{"role": "system", "content": "You answer in one word."},
              {"role": "user", "content": f"Note {uuid.uuid4().hex}: " + " ".join(f"fact{i}" for i in range(120))}]
    with connect(settings) as first:
        assert first.has_kept(prefix) is False
        kept = first.keep_prefix(prefix)
    assert kept is not None and kept["new"] is True and len(list(tmp_path.rglob("*.npz"))) == 1
    with connect(settings) as second:
        hits = server_log(second).count("cache hit")
        reply = second.chat([prefix[0], {"role": "user", "content": prefix[1]["content"] + " Say yes."}], max_tokens=2)
        assert reply and server_log(second).count("cache hit") == hits + 1  # the state came from disk
        again = second.keep_prefix(prefix)
        assert again is not None and again["new"] is False
        assert second.has_kept(prefix) is True
        assert second.has_kept([prefix[0], {"role": "user", "content": "Another note."}]) is False


def test_states_of_another_llama_cpp_version_are_dropped_and_other_models_kept(tmp_path: Path) -> None:
    current = tmp_path / "model-100-llama_cpp-0.3.36"
    older, other_model = tmp_path / "model-100-llama_cpp-0.3.20", tmp_path / "other-7-llama_cpp-0.3.20"
    for folder in (current, older, other_model):
        folder.mkdir()
        (folder / "a.npz").write_bytes(b"state")
    assert drop_outdated_states(current) == [older]
    assert current.exists() and other_model.exists() and not older.exists()


def test_another_backend_gives_each_reply_its_first_tokens_log_probability_in_any_case(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.first_tokens = lambda messages: {"Yes": -0.4, " yes": -1.6, "No": -2.5, "Maybe": -3.0}
    llm = LLM(base_url=scripted_llm.url, model="scripted", api_key="x", timeout=10)
    found = llm.choice_logprobs([{"role": "user", "content": "Is it? Answer yes or no."}], ["yes", "no", "perhaps"])
    assert found is not None
    assert found["yes"] == pytest.approx(np.logaddexp(-0.4, -1.6)) and found["no"] == pytest.approx(-2.5)
    assert found["perhaps"] == pytest.approx(found["yes"] - 20)  # not among the top tokens
    assert scripted_llm.judged[-1]["logprobs"] is True and scripted_llm.judged[-1]["max_tokens"] == 1


def test_a_choice_outside_the_top_tokens_is_less_likely_than_the_least_of_them(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.first_tokens = lambda messages: {"The": -0.1, "A": -2.5, "In": -4.0}
    llm = LLM(base_url=scripted_llm.url, model="scripted", api_key="x", timeout=10)
    found = llm.choice_logprobs([{"role": "user", "content": "What is it?"}], ["NOT"])
    assert found is not None and found["NOT"] < -4.0


def test_a_backend_that_gives_no_log_probabilities_is_asked_for_them_once(scripted_llm: ScriptedLLM) -> None:
    llm = LLM(base_url=scripted_llm.url, model="scripted", api_key="x", timeout=10)
    ask = [{"role": "user", "content": "Is it? Answer yes or no."}]
    assert llm.choice_logprobs(ask, ["yes", "no"]) is None
    assert llm.choice_logprobs(ask, ["yes", "no"]) is None
    assert len(scripted_llm.judged) == 1
