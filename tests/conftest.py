"""Shared fixtures: real components in temp folders (Chroma, the MiniLM model, servers) over the tests'
own corpus, and the bundled collection for the tests that are about it."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import assistant  # noqa: F401  (sets the offline environment first)
from assistant import Assistant, Settings
from assistant.config import BUNDLED_CORPUS, PROJECT_ROOT
from assistant.embed import MiniLMEmbedding
from assistant.llm import ensure_gguf
from assistant.load import load_papers
from assistant.types import Paper

from fakes import ScriptedLLM

DATA = Path(__file__).parent / "data"
HANG_GUARD = 600  # seconds; only stops a hung process, never judges speed

# -- the corpora ----------------------------------------------------------------------------------
# The tests' own corpus: twelve abstracts copied from the bundled lists, in their format (a title line,
# then one abstract per line), in two files. Tests name its papers through the constants below: the
# titles the loader derives, the same in the bundled lists.
CORPUS = sorted((DATA / "corpus").glob("*.txt"))
VEGAS = "Vegas"  # self-speculative decoding that drafts from part of its own KV cache; 1.25×–2.81× over vLLM
ARM = "ARM"  # long-context attention that routes tokens into a fixed number of memory slots
UPIPE = "UPipe"  # cuts the memory of attention in long-context training
ISA = "ISA"  # in-context sparse attention for video editing
ECHO_ATTENTION = "EchoAttention"  # sparse attention for video diffusion
SYSRS = "SySRs"  # best-arm identification among language models; second in its file
VIEWMASK = "ViewMask-1-to-3"  # novel views of an object from discrete tokens
FEDERATED = ("FedUSD", "RC-FCL")  # the corpus's two federated learning papers
SDG_NAME = "Stein Diffusion Guidance (SDG)"  # how the abstract names it: its derived title is a gist

# The bundled ICML 2026 lists (index/*.txt), for the tests about that collection, its default index
# and the real model's answers on it.
BUNDLED_FILES = sorted(BUNDLED_CORPUS.glob("*.txt"))


@functools.cache
def corpus_papers() -> dict[str, Paper]:
    """The papers of the tests' corpus by title."""
    return {paper.title: paper for paper in load_papers(CORPUS)}


def corpus_abstracts() -> list[str]:
    """The abstracts of the tests' corpus as written, in file order."""
    return [paper.abstract for paper in load_papers(CORPUS)]


@functools.cache
def bundled_papers() -> dict[str, Paper]:
    """The papers of the bundled collection by title."""
    return {paper.title: paper for paper in load_papers(BUNDLED_FILES)}


# -- the environment and the command line ---------------------------------------------------------


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


def cli_env(index_dir: Path, **variables: str) -> dict[str, str]:
    """The environment of an `assistant` command run by a test: none of the caller's ASSISTANT_*
    settings, the store in `index_dir`, plus `variables` (ASSISTANT_* names)."""
    # the shared model cache, the session's states, no reading ahead
    shared = ("ASSISTANT_CACHE_DIR", "ASSISTANT_LLM_KEPT_STATES_DIR", "ASSISTANT_READ_AHEAD_IDLE_SECONDS")
    env = {key: value for key, value in os.environ.items() if not key.startswith("ASSISTANT_") or key in shared}
    return {**env, "ASSISTANT_INDEX_DIR": str(index_dir), **variables}


def run_cli(*args: str, index_dir: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    """`assistant <args>` as a real process, as a user runs it; its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "assistant.cli", *args],
        cwd=PROJECT_ROOT, env=cli_env(index_dir, **variables), capture_output=True, text=True, timeout=HANG_GUARD,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_settings(index_dir: Path, **overrides: object) -> Settings:
    """Settings for a test: its own store folder, the shared model cache."""
    return Settings(index_dir=index_dir, **overrides)


def scripted_settings(index_dir: Path, llm: ScriptedLLM, **overrides: object) -> Settings:
    """Settings whose language model is the scripted server `llm`."""
    return make_settings(index_dir, **{"llm_base_url": llm.url, "llm_model": "scripted", "llm_timeout": 10, **overrides})


def down_url() -> str:
    """The URL of an OpenAI-compatible server that is down (a loopback port nobody listens on)."""
    return f"http://127.0.0.1:{free_port()}/v1"


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


@contextlib.contextmanager
def running_server(
    command: list[str], health_url: str, log_path: Path, start_timeout: float, stop_timeout: float = 10, **popen: Any
) -> Iterator[subprocess.Popen]:
    """Start `command`, wait until `health_url` answers 200, and stop it by pid afterwards."""
    log = open(log_path, "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, **popen)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(health_url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.3)
        yield process
    finally:
        process.terminate()  # SIGTERM lets it stop its own children (the UI stops its LLM server)
        try:
            process.wait(timeout=stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


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
