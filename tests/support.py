"""What the tests share besides fixtures: the tests' own corpus and the names of its papers, the
bundled collection, and helpers that run the command line and servers as a user would."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import assistant  # noqa: F401  (sets the offline environment first)
from assistant import Settings
from assistant.config import BUNDLED_CORPUS, PROJECT_ROOT
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


# -- the command line and settings -------------------------------------------------------------


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
