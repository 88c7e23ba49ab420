"""Shared fixtures: real components in temp folders (Chroma, the MiniLM model, servers) over the tests'
own corpus, and the bundled collection for the tests that are about it. What the tests share besides
fixtures (the corpora, the names of their papers, helpers) is in `support`."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import assistant  # noqa: F401  (sets the offline environment first)
from assistant import Assistant, Settings
from assistant.embed import MiniLMEmbedding
from assistant.llm import ensure_gguf

from fakes import ScriptedLLM
from support import CORPUS, down_url, free_port, make_settings, running_server, scripted_settings

# -- the environment --------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "settings(**overrides): settings the `scripted` fixture's Assistant is opened with")


@pytest.fixture(scope="session", autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No ASSISTANT_* or OPENAI_* setting of the developer's reaches a test, and what the assistant
    keeps (the default store, the cache of parsed corpora and keyword indexes, server logs) lives in
    temp folders. The assembled 1.1 GB model, a minute to assemble, stays in the user's cache
    (ASSISTANT_CACHE_DIR or the default): assembled there once, linked from the session's cache.
    Session-scoped and autouse, so it is in place before any other fixture builds anything."""
    user_cache = Settings().cache_dir
    cache = tmp_path_factory.mktemp("cache")
    model = ensure_gguf(Settings(cache_dir=user_cache, gguf_path=None))
    for path in (model, model.with_name(model.name + ".verified.json")):
        (cache / path.name).symlink_to(path)
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("ASSISTANT_") or key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
                patch.delenv(key)
        patch.setenv("ASSISTANT_CACHE_DIR", str(cache))
        # Prompt states the model keeps on disk belong to the test session, not to the user.
        patch.setenv("ASSISTANT_LLM_KEPT_STATES_DIR", str(tmp_path_factory.mktemp("kept-states")))
        # No reading ahead in the background of `serve` and `chat`: a test asks for it by name.
        patch.setenv("ASSISTANT_READ_AHEAD_IDLE_SECONDS", "0")
        patch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
        yield


# -- indexes and assistants -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedding:
    return MiniLMEmbedding()


@pytest.fixture(scope="session")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the tests' corpus, built once per session in a temp folder."""
    folder = tmp_path_factory.mktemp("small-index")
    Assistant.from_settings(make_settings(folder, corpus=CORPUS)).close()
    return folder


@pytest.fixture(scope="session")
def small_assistant(small_index: Path) -> Iterator[Assistant]:
    """An Assistant over the tests' corpus (retrieval; its LLM starts only when asked)."""
    with Assistant.from_settings(make_settings(small_index)) as instance:
        yield instance


@pytest.fixture
def own_index(small_index: Path, tmp_path: Path) -> Path:
    """A copy of the small index, for a test whose model names papers: labels are written beside it."""
    return Path(shutil.copytree(small_index, tmp_path / "index"))


@pytest.fixture
def corpus_copy(tmp_path: Path) -> list[Path]:
    """A writable copy of the tests' corpus files."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    return [Path(shutil.copy(path, folder / path.name)) for path in CORPUS]


@pytest.fixture(scope="session")
def bundled_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the bundled collection, built once per session in a temp folder."""
    folder = tmp_path_factory.mktemp("bundled-index")
    Assistant.from_settings(make_settings(folder)).close()
    return folder


@pytest.fixture(scope="session")
def bundled_assistant(bundled_index: Path) -> Iterator[Assistant]:
    """An Assistant over the bundled collection (retrieval; its LLM starts only when asked)."""
    with Assistant.from_settings(make_settings(bundled_index)) as instance:
        yield instance


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A scripted OpenAI-compatible chat server on a free loopback port; `.url` ends in /v1."""
    server = ScriptedLLM().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def scripted(request: pytest.FixtureRequest, small_index: Path, scripted_llm: ScriptedLLM) -> Iterator[Assistant]:
    """An Assistant over the tests' corpus whose language model is `scripted_llm`. A test that needs
    other settings names them with `@pytest.mark.settings(name=value, ...)`."""
    marker = request.node.get_closest_marker("settings")
    overrides = marker.kwargs if marker else {}
    with Assistant.from_settings(scripted_settings(small_index, scripted_llm, **overrides)) as instance:
        yield instance


@pytest.fixture
def llm_down(small_index: Path) -> Iterator[Assistant]:
    """An Assistant over the tests' corpus whose OpenAI-compatible server is down."""
    with Assistant.from_settings(make_settings(small_index, llm_base_url=down_url(), llm_timeout=5)) as instance:
        yield instance


# -- servers --------------------------------------------------------------------------------------


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A real `chroma run` on a free loopback port, stopped by pid afterwards."""
    port = free_port()
    chroma = Path(sys.executable).parent / "chroma"
    command = [str(chroma), "run", "--path", str(tmp_path / "chroma-server"), "--host", "127.0.0.1", "--port", str(port)]
    with running_server(
        command, f"http://127.0.0.1:{port}/api/v2/heartbeat", tmp_path / "chroma.log", start_timeout=60,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    ):
        yield "127.0.0.1", port
