"""Stand-ins for what a test cannot have for real: a language model whose replies are scripted, what
it "thinks" when asked for log-probabilities, and a crash at a chosen moment of indexing.

The language model is a network service, so this is where tests may put a stand-in: `ScriptedLLM` is a
real HTTP server speaking the chat-completions API, in front of which the whole stack (the `openai`
client in assistant.llm, the answer engine, the verifier, the UI, the `assistant` command) runs unchanged.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from assistant.prompts import load_prompts

# -- what a scripted model "thinks" when asked for log-probabilities ----------------------------

YES, NO = {"yes": -0.05, "no": -3.5}, {"no": -0.05, "yes": -3.5}


def judging_model(*, declines: bool = False, claim_holds: bool = True, says_otherwise: bool = True, premise_holds: bool = True,
                  sentence: Callable[[str], bool] = lambda content: False,
                  about: Callable[[str], bool] | None = None) -> Callable[[list[dict]], dict[str, float]]:
    """`ScriptedLLM.first_tokens` for each kind of judgement: whether the model declines to answer,
    whether a claim holds (and, if not, whether the abstract says otherwise), whether a sentence of the
    abstract states a claim the draft gives a reason for (`premise_holds`), whether a sentence answers,
    and (given `about`) whether a paper is about the question."""
    prompts = load_prompts()
    claim = prompts.judge_claim.format(statement="").splitlines()[-1]
    claim_kind = prompts.judge_claim_kind.format(statement="").splitlines()[-1]
    asked_premise = prompts.judge_premise.format(sentence="", statement="").splitlines()[-1]
    asked_sentence = prompts.judge_sentence.format(question="", sentence="").splitlines()[-1]
    asked_about = prompts.topic_judge.format(topic="").split("?")[0].rstrip()  # "Is this paper about"

    def first_tokens(messages: list[dict]) -> dict[str, float]:
        content = messages[-1]["content"]
        if about is not None and asked_about in content:
            return YES if about(content) else NO
        if claim in content:
            return YES if claim_holds else NO
        if asked_premise in content:
            return YES if premise_holds else NO
        if claim_kind in content:
            return {"false": -0.05, "unknown": -3.0} if says_otherwise else {"unknown": -0.05, "false": -3.0}
        if asked_sentence in content:
            return YES if sentence(content) else NO
        return {"NOT": -0.05, "The": -3.0} if declines else {"The": -0.05, "NOT": -6.0}

    return first_tokens


# -- a crash in the middle of indexing -------------------------------------------------------------


class SimulatedCrash(RuntimeError):
    """What `crash_after_first_batch` raises: a process dying between two batches of an index run."""


def crash_after_first_batch(done: int, total: int) -> None:
    """An index run's progress hook that crashes it once its first batch is embedded and written."""
    if done > 0:
        raise SimulatedCrash(f"crashed after embedding {done} of {total} chunks")


# -- a scripted OpenAI-compatible LLM server ------------------------------------------------------


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
    def truncated(cls, text: str = "The answer begins") -> Fault:
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

    def env(self) -> dict[str, str]:
        """The settings, as ASSISTANT_* variables, that make an `assistant` command use this server."""
        return {"ASSISTANT_LLM_BASE_URL": self.url, "ASSISTANT_LLM_MODEL": "scripted"}

    def start(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
