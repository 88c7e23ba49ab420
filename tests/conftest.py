"""Shared fixtures: real components in temp folders (Chroma, the MiniLM model, servers)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import assistant  # noqa: F401  (sets the offline environment first)
from assistant import Assistant, Settings
from assistant.config import BUNDLED_CORPUS
from assistant.embed import MiniLMEmbedding

CORPUS_FILES = sorted(BUNDLED_CORPUS.glob("*.txt"))
DATA = Path(__file__).parent / "data"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_settings(index_dir: Path, **overrides: object) -> Settings:
    """Settings for a test: its own store folder, the shared model cache."""
    return Settings(index_dir=index_dir, **overrides)


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedding:
    return MiniLMEmbedding()


@pytest.fixture(scope="session")
def shared_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the bundled corpus, built once per session in a temp folder."""
    folder = tmp_path_factory.mktemp("shared-index")
    Assistant.from_settings(make_settings(folder))
    return folder


@pytest.fixture(scope="session")
def shared_assistant(shared_index_dir: Path) -> Iterator[Assistant]:
    """An Assistant over the bundled corpus (retrieval; its LLM starts only when asked)."""
    instance = Assistant.from_settings(make_settings(shared_index_dir))
    yield instance
    close = getattr(instance, "close", None)
    if close:
        close()


@pytest.fixture
def corpus_copy(tmp_path: Path) -> list[Path]:
    """A writable copy of the bundled corpus files."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    return [Path(shutil.copy(path, folder / path.name)) for path in CORPUS_FILES]


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A real `chroma run` on a free loopback port, stopped by pid afterwards."""
    port = free_port()
    chroma = Path(sys.executable).parent / "chroma"
    log = open(tmp_path / "chroma.log", "wb")
    process = subprocess.Popen(
        [str(chroma), "run", "--path", str(tmp_path / "chroma-server"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not start: {(tmp_path / 'chroma.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield "127.0.0.1", port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
