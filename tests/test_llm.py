"""Tests of assistant.llm against the real packaged model and a real llama.cpp server (no mocks).

The assembled GGUF lives in the shared cache (ASSISTANT_CACHE_DIR or the default), so only
the first run ever pays for assembling it. The file makes two short real generations.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.errors import LLMTimeoutError, LLMUnavailableError, ModelError
from conftest import free_port

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
