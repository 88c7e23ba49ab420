"""The local model runs on the CPU it was built on: no AMX kernels in the build (GCC 12 miscompiles
them into a SIGILL), and a server that still dies of SIGILL is restarted once without llama.cpp's
extra buffer types, so the answer still comes.

The restart is exercised with a stand-in child process (`data/sigill_child.py`): the fault it plays,
a build that does not fit the CPU, cannot be produced on a machine whose build is right. The other
tests use the real library and the real packaged model.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.errors import LLMUnavailableError
from assistant.llm import LLM, LocalServer, ensure_gguf
from support import DATA, HANG_GUARD

SIGILL_CHILD = DATA / "sigill_child.py"
# A prompt of about 300 tokens: the broken build survives a few tokens and dies on a real prompt.
LONG_PROMPT = [{"role": "user", "content": (
    "Here is a list of fruits: " + ", ".join(["apple", "pear", "plum", "fig", "kiwi", "lime"] * 40)
    + ". Which fruit comes first in the list? Answer with one word."
)}]


def cpu_libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.origin
    return sorted(Path(spec.origin).parent.glob("lib/libggml-cpu*.so"))


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")
def test_the_installed_llama_cpp_cpu_library_holds_no_amx_tile_instructions() -> None:
    libraries = cpu_libraries()
    assert libraries, "llama-cpp-python has no libggml-cpu library"
    for library in libraries:
        listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                                 text=True, check=True, timeout=HANG_GUARD).stdout
        tiles = re.findall(r"\b(ldtilecfg|tilezero|tileloadd|tdpbssd|tdpbf16ps)\b", listing)
        assert not tiles, f"{library.name} holds AMX instructions ({len(tiles)}): run bash scripts/setup.sh"


def real_server(tmp_path: Path, *, fallback: bool) -> LocalServer:
    settings = Settings(llm_backend="local", llm_base_url=None, gguf_path=None, max_answer_tokens=16,
                        llm_kept_states_mb=0)
    server = LocalServer(ensure_gguf(settings), settings)
    server.cpu_fallback = fallback
    server.log_path = tmp_path / "llama-server.log"
    return server


@pytest.mark.llm
def test_the_local_model_answers_a_300_token_prompt_without_the_cpu_fallback(tmp_path: Path) -> None:
    server = real_server(tmp_path, fallback=False).start()
    llm = LLM(base_url=server.url, model=server.alias, api_key="x", timeout=HANG_GUARD, server=server, max_tokens=8)
    try:
        assert llm.chat(LONG_PROMPT).strip()
        assert not server.cpu_fallback, "the server died of SIGILL and needed the CPU fallback"
    finally:
        llm.close()


@pytest.mark.llm
def test_the_cpu_fallback_loads_the_real_model_without_extra_buffers_and_answers(tmp_path: Path) -> None:
    server = real_server(tmp_path, fallback=True).start()
    llm = LLM(base_url=server.url, model=server.alias, api_key="x", timeout=HANG_GUARD, server=server, max_tokens=8)
    try:
        assert "--no_extra_bufts" in server.command(8080)
        assert llm.chat(LONG_PROMPT).strip()
    finally:
        llm.close()
    log = server.log_path.read_text()
    assert "model buffer size" in log and not re.search(r"(?:AMX|REPACK) model buffer size", log)


@pytest.fixture
def sigill_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """A LocalServer whose child dies of SIGILL on its first request unless started in the CPU fallback;
    its fallback marker in a temp cache (never the shared one, whose real servers must not inherit it)."""
    yield make_sigill_server(tmp_path, monkeypatch)


def make_sigill_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> LocalServer:
    settings = Settings(cache_dir=tmp_path / "cache", llm_kept_states_mb=0)
    server = LocalServer(tmp_path / "model.gguf", settings)
    real_command = server.command
    # The child's own arguments (port, host, --no_extra_bufts, ...) go to the stand-in unchanged.
    monkeypatch.setattr(server, "command", lambda port: [sys.executable, str(SIGILL_CHILD), *extra, *real_command(port)[3:]])
    return server


def client(server: LocalServer, notices: list[str]) -> LLM:
    return LLM(base_url=server.start().url, model="scripted", api_key="x", timeout=60, server=server, notify=notices.append)


def test_a_server_killed_by_sigill_restarts_once_in_the_cpu_fallback_and_the_answer_comes(sigill_server: LocalServer) -> None:
    notices: list[str] = []
    llm = client(sigill_server, notices)
    try:
        assert llm.chat([{"role": "user", "content": "Hello?"}]) == "The fallback answered."
        assert sigill_server.cpu_fallback and "--no_extra_bufts" in sigill_server.command(8080)
        [notice] = notices
        assert "SIGILL" in notice and "bash scripts/setup.sh" in notice
    finally:
        llm.close()


def test_a_choice_request_that_kills_the_server_with_sigill_is_answered_after_the_restart(sigill_server: LocalServer) -> None:
    notices: list[str] = []
    llm = client(sigill_server, notices)
    try:
        odds = llm.choice_logprobs([{"role": "user", "content": "Yes or no?"}], ["yes", "no"])
        assert odds is not None and odds["yes"] > odds["no"]
        assert len(notices) == 1
    finally:
        llm.close()


def test_a_later_server_on_the_same_library_starts_in_the_cpu_fallback_at_once(
    sigill_server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = client(sigill_server, [])
    try:
        llm.chat([{"role": "user", "content": "Hello?"}])
    finally:
        llm.close()
    later = make_sigill_server(tmp_path, monkeypatch)
    notices: list[str] = []
    llm = client(later, notices)
    try:
        assert later.cpu_fallback and llm.chat([{"role": "user", "content": "Hello?"}]) == "The fallback answered."
        assert notices == []
    finally:
        llm.close()


def test_a_server_that_dies_of_sigill_in_the_fallback_too_is_reported_not_restarted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_sigill_server(tmp_path, monkeypatch, "--always")
    notices: list[str] = []
    llm = client(server, notices)
    try:
        with pytest.raises(LLMUnavailableError, match="SIGILL"):
            llm.chat([{"role": "user", "content": "Hello?"}])
        assert len(notices) == 1 and server.cpu_fallback and server.crashed
    finally:
        llm.close()
