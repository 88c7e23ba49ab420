"""Shared fixtures: real components in temp folders (Chroma, the MiniLM model, servers)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import assistant  # noqa: F401  (sets the offline environment first)
from assistant import Assistant, Settings
from assistant.config import BUNDLED_CORPUS, PROJECT_ROOT
from assistant.embed import MiniLMEmbedding

CORPUS_FILES = sorted(BUNDLED_CORPUS.glob("*.txt"))
DATA = Path(__file__).parent / "data"
HANG_GUARD = 600  # seconds; only stops a hung process, never judges speed


@pytest.fixture(scope="session", autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No ASSISTANT_* or OPENAI_* setting of the developer's reaches a test, and the default store
    and parse cache are temp folders. The model cache stays where it is (ASSISTANT_CACHE_DIR or the
    default): it holds the assembled 1.1 GB model, which takes a minute to assemble again.
    Session-scoped and autouse, so it is in place before any other fixture builds anything."""
    model_cache = Settings().cache_dir
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("ASSISTANT_") or key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
                patch.delenv(key)
        patch.setenv("ASSISTANT_CACHE_DIR", str(model_cache))
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


# -- what a scripted model "thinks" when asked for log-probabilities ----------------------------

YES, NO = {"yes": -0.05, "no": -3.5}, {"no": -0.05, "yes": -3.5}


def judging_model(*, declines: bool = False, claim_holds: bool = True, says_otherwise: bool = True,
                  sentence: Callable[[str], bool] = lambda content: False) -> Callable[[list[dict]], dict[str, float]]:
    """`ScriptedLLM.first_tokens` for each kind of judgement: whether the model declines to answer,
    whether a claim holds (and, if not, whether the abstract says otherwise), whether a sentence answers."""
    from assistant.prompts import load_prompts

    prompts = load_prompts()
    claim = prompts.judge_claim.format(statement="").splitlines()[-1]
    claim_kind = prompts.judge_claim_kind.format(statement="").splitlines()[-1]
    asked_sentence = prompts.judge_sentence.format(question="", sentence="").splitlines()[-1]

    def first_tokens(messages: list[dict]) -> dict[str, float]:
        content = messages[-1]["content"]
        if claim in content:
            return YES if claim_holds else NO
        if claim_kind in content:
            return {"false": -0.05, "unknown": -3.0} if says_otherwise else {"unknown": -0.05, "false": -3.0}
        if asked_sentence in content:
            return YES if sentence(content) else NO
        return {"NOT": -0.05, "The": -3.0} if declines else {"The": -0.05, "NOT": -6.0}

    return first_tokens


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


@pytest.fixture
def own_index(shared_index_dir: Path, tmp_path: Path) -> Path:
    """A copy of the shared index, for a test whose model names papers: labels are written beside it."""
    return Path(shutil.copytree(shared_index_dir, tmp_path / "index"))


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


# -- a scripted OpenAI-compatible LLM server ------------------------------------------------------
# The language model is a network service, so this is where tests may put a stand-in: a real
# HTTP server speaking the chat-completions API, in front of which the whole stack (the
# `openai` client in assistant.llm, the answer engine, the verifier, the UI) runs unchanged.


class Fault:
    """What the scripted server does instead of replying (queue it like a reply)."""

    def __init__(self, kind: str, *, status: int = 500, text: str = "") -> None:
        self.kind, self.status, self.text = kind, status, text

    @classmethod
    def http(cls, status: int = 500, message: str = "scripted server error") -> Fault:
        """An HTTP error with an OpenAI-style JSON error body."""
        return cls("http", status=status, text=message)

    @classmethod
    def garbage(cls) -> Fault:
        """HTTP 200 whose body is not a chat completion (SSE data that is not JSON, when streaming)."""
        return cls("garbage")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without sending any response."""
        return cls("disconnect")

    @classmethod
    def truncated(cls, text: str = "Vegas achieves") -> Fault:
        """Stream `text`, then close without a finish_reason or [DONE] (a server that died mid-answer)."""
        return cls("truncated", text=text)

    def __repr__(self) -> str:
        return f"Fault({self.kind!r}, status={self.status}, text={self.text!r})"


def split_deltas(text: str, pieces: int = 3) -> list[str]:
    """`text` cut at word boundaries into at most `pieces` deltas that join back to it."""
    words = re.split(r"(?<=\s)(?=\S)", text)
    size = max(1, -(-len(words) // pieces))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)] if text else []


class ScriptedLLM:
    """A tiny OpenAI-compatible server on 127.0.0.1 answering from a script.

    A reply is a string (streamed in a few deltas), a list of strings (exactly these deltas)
    or a `Fault`. Queue replies in the order the app will ask for them (`queue`; a follow-up's
    condense call consumes one before the answer), or set `responder` to a function of the
    request's messages returning a reply; with neither, a request gets HTTP 500. A request for
    log-probabilities is answered from `first_tokens` instead (see there) and kept in `judged`. Every
    other chat request's JSON body is kept in `requests`, in arrival order (`messages(i)` for short).
    """

    def __init__(self) -> None:
        self.replies: list[Any] = []
        self.responder: Callable[[list[dict]], Any] | None = None
        # Requests for log-probabilities (`logprobs`, not streamed): a function of the messages giving
        # the first token's top choices, {token: logprob}; None answers as a server that gives none.
        self.first_tokens: Callable[[list[dict]], dict[str, float]] | None = None
        self.requests: list[dict[str, Any]] = []
        self.judged: list[dict[str, Any]] = []  # requests for log-probabilities (judgements), kept apart
        self.errors: list[Exception] = []  # exceptions raised by `responder`
        self.model_listings = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one response per connection; a stream ends at close

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/v1/models":
                    return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                with owner._lock:
                    owner.model_listings += 1
                model = {"id": "scripted", "object": "model", "owned_by": "tests"}
                self._json(200, {"object": "list", "data": [model]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                try:
                    body = json.loads(raw)
                except ValueError:
                    error = {"message": "request body is not JSON", "type": "invalid_request"}
                    return self._json(400, {"error": error})
                if body.get("logprobs") and not body.get("stream"):
                    return self._first_token(body)
                reply = owner._next_reply(body)
                if isinstance(reply, Fault):
                    return self._fault(reply, body)
                deltas = split_deltas(reply) if isinstance(reply, str) else list(reply)
                if body.get("stream"):
                    self._stream(body, deltas, finish=True)
                else:
                    self._json(200, {
                        "id": f"chatcmpl-scripted-{id(body)}", "object": "chat.completion", "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": "".join(deltas)}}],
                        "usage": {"prompt_tokens": 0, "completion_tokens": len(deltas), "total_tokens": len(deltas)},
                    })

            def _first_token(self, body: dict[str, Any]) -> None:
                """A request for the first token's log-probabilities: answered from `first_tokens`,
                else as by a server that gives none (a plain reply); never from the queued replies."""
                with owner._lock:
                    owner.judged.append(body)
                    first_tokens = owner.first_tokens
                if first_tokens is None:
                    return self._json(200, {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0,
                                            "model": "scripted", "choices": [{"index": 0, "finish_reason": "length",
                                            "message": {"role": "assistant", "content": "Yes"}}]})
                try:
                    top = first_tokens(body.get("messages") or [])
                except Exception as exc:
                    owner.errors.append(exc)
                    return self._json(500, {"error": {"message": f"scripted LLM: {exc!r}", "type": "server_error"}})
                entries = [{"token": t, "logprob": lp, "bytes": None, "top_logprobs": []} for t, lp in top.items()]
                best = max(entries, key=lambda e: e["logprob"])
                self._json(200, {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": "scripted",
                                 "choices": [{"index": 0, "finish_reason": "length",
                                              "message": {"role": "assistant", "content": best["token"]},
                                              "logprobs": {"content": [{**best, "top_logprobs": entries}]}}]})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], deltas: list[str], finish: bool) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()

                def chunk(delta: dict[str, Any], finish_reason: str | None) -> bytes:
                    payload = {
                        "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                    }
                    return f"data: {json.dumps(payload)}\n\n".encode()

                try:
                    self.wfile.write(chunk({"role": "assistant", "content": ""}, None))
                    for piece in deltas:
                        self.wfile.write(chunk({"content": piece}, None))
                        self.wfile.flush()
                    if finish:
                        self.wfile.write(chunk({}, "stop"))
                        self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except OSError:  # the client gave up on the stream
                    pass

            def _fault(self, fault: Fault, body: dict[str, Any]) -> None:
                if fault.kind == "http":
                    return self._json(fault.status, {"error": {"message": fault.text, "type": "server_error"}})
                if fault.kind == "garbage":
                    streaming = bool(body.get("stream"))
                    data = b"data: <html>this is not JSON</html>\n\n" if streaming else b"<html>this is not JSON</html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream" if streaming else "application/json")
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if fault.kind == "disconnect":
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault.kind == "truncated":
                    return self._stream(body, split_deltas(fault.text), finish=False)
                raise ValueError(f"unknown fault {fault!r}")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )

    def queue(self, *replies: Any) -> ScriptedLLM:
        """Append replies (str, list of deltas, or Fault), consumed one per chat request."""
        with self._lock:
            self.replies.extend(replies)
        return self

    def _next_reply(self, body: dict[str, Any]) -> Any:
        with self._lock:
            self.requests.append(body)
            if self.replies:
                return self.replies.pop(0)
            responder = self.responder
        if responder is None:
            return Fault.http(500, "scripted LLM: no reply was queued for this request")
        try:
            return responder(body.get("messages") or [])
        except Exception as exc:  # a bug in the test's responder: answer, and let the test see it
            self.errors.append(exc)
            return Fault.http(500, f"scripted LLM: the responder failed: {exc!r}")

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        """The messages of a recorded request (the last by default)."""
        return self.requests[index]["messages"]

    def start(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    """A scripted OpenAI-compatible chat server on a free loopback port; `.url` ends in /v1."""
    server = ScriptedLLM().start()
    try:
        yield server
    finally:
        server.stop()
