"""The chat client: one `LLM` class speaking the OpenAI chat API, and `connect` to the backend the settings choose.

The only module that imports `openai`. Backends: the embedded model (`weights` + `server`),
any OpenAI-compatible server (`ASSISTANT_LLM_BASE_URL`), or OpenAI itself. Every failure of
the API, the connection or the response surfaces as an `assistant.errors` error.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from ..config import Settings, is_loopback
from ..errors import LLMError, LLMTimeoutError, LLMUnavailableError
from ..text import shorten
from .backend import backend_of, openai_model
from .server import LocalServer
from .weights import PACKAGED_MODEL_ALIAS, PACKAGED_MODEL_NAME, Progress, ensure_gguf, say

if TYPE_CHECKING:
    import openai

DEFAULT_REMOTE_CONTEXT = 8192

class LLM:
    """A chat model behind the OpenAI API; all failures raise `assistant.errors.LLMError` subclasses."""

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key: str,
        timeout: float,
        name: str | None = None,
        context_window: int = DEFAULT_REMOTE_CONTEXT,
        max_tokens: int = 256,
        temperature: float = 0.0,
        server: LocalServer | None = None,
        unreachable_hint: str = "Start it or unset ASSISTANT_LLM_BASE_URL to use the embedded model.",
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.name = name or (f"{model} at {base_url}" if base_url else f"{model} (OpenAI)")
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self._server = server
        self._hint = unreachable_hint
        self._where = base_url or "api.openai.com"
        self._no_logprobs = False  # set when the backend turned down a request for log-probabilities
        self._notify = notify or (lambda message: None)
        import openai  # here, not at module level: commands that never generate skip its ~1 s import

        # Environment proxies must not capture loopback traffic to a local server.
        http_client = openai.DefaultHttpxClient(trust_env=False) if is_loopback(urlparse(base_url or "").hostname) else None
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0, http_client=http_client
        )

    @property
    def server(self) -> LocalServer | None:
        """The local server this LLM owns, if any."""
        return self._server

    def _revive(self) -> None:
        """Start the local server again if it died (it was not closed): a crash costs the
        answer it happened in, not every answer after it."""
        server = self._server
        if server is None or not server.crashed:
            return
        server.start()  # on a new port
        self.base_url = self._where = server.url
        self._client.base_url = server.url

    def _restarted_after_sigill(self) -> bool:
        """Whether the local server just died of SIGILL and was started again without llama.cpp's
        extra buffer types (once; see `server`), so the request that killed it can be sent again."""
        server = self._server
        if server is None or not server.died_of_illegal_instruction or not server.use_cpu_fallback():
            return False
        self._notify(
            "The local model crashed with an illegal instruction (SIGILL: its llama.cpp build does not fit this CPU); "
            "restarted it without CPU-specific weight layouts. To repair the build: bash scripts/setup.sh"
        )
        self._revive()
        return True

    def stream_chat(self, messages: list[dict], max_tokens: int | None = None, **options: Any) -> Iterator[str]:
        """Yield the answer's text deltas as they arrive; `options` go to the API (e.g. stop)."""
        streamed = False
        try:
            for delta in self._stream_once(messages, max_tokens, **options):
                streamed = True
                yield delta
        except LLMUnavailableError:
            if streamed or not self._restarted_after_sigill():
                raise
            yield from self._stream_once(messages, max_tokens, **options)

    def _stream_once(self, messages: list[dict], max_tokens: int | None = None, **options: Any) -> Iterator[str]:
        self._revive()
        deadline = time.monotonic() + self.timeout
        try:
            stream = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens or self.max_tokens,
                temperature=self.temperature,
                stream=True,
                **options,
            )
        except Exception as exc:
            raise self._translate(exc) from exc
        got_choice = False
        got_text = False
        finished = False
        try:
            for chunk in stream:
                if time.monotonic() > deadline:
                    raise LLMTimeoutError(self._timeout_message())
                choices = getattr(chunk, "choices", None)
                if choices is None:
                    raise LLMError(f"The LLM at {self._where} sent a malformed stream chunk: {str(chunk)[:200]!r}")
                for choice in choices:
                    got_choice = True
                    finished = finished or bool(choice.finish_reason)
                    text = choice.delta.content if choice.delta is not None else None
                    if text:
                        got_text = True
                        yield text
        except LLMError:
            raise
        except Exception as exc:
            raise self._translate(exc) from exc
        finally:
            # Closing the response tells the server to stop generating for an abandoned stream.
            with contextlib.suppress(Exception):
                stream.close()
        if not got_choice:
            raise LLMError(f"The LLM at {self._where} returned no completion (empty response). Check the server.")
        if not finished:
            # A conforming server ends with a finish_reason; without it the answer was cut off.
            died = self._server.describe_exit(wait=2.0) if self._server is not None else None
            raise LLMUnavailableError(died or f"The LLM at {self._where} ended the answer stream unexpectedly.")
        if not got_text:
            raise LLMError(f"The LLM at {self._where} returned an empty answer.")

    def json_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        """The `response_format` that makes this backend's output follow `schema` (grammar-constrained).

        llama-cpp-python's server takes `{"type": "json_object", "schema": ...}`; OpenAI, vLLM and
        llama.cpp's own server take OpenAI's `{"type": "json_schema", "json_schema": ...}`.
        """
        if self._server is not None:
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}

    def line_format(self, max_chars: int) -> dict[str, Any]:
        """Request options that make the reply one line of at most `max_chars` characters.

        llama-cpp-python's server takes a GBNF grammar, so generation stops there and no decoding
        step goes to structure (a JSON object costs ~6 forced tokens, ~0.3 s on a laptop CPU).
        Other backends stop at the first newline; the caller cuts the line to length."""
        if self._server is not None:
            return {"extra_body": {"grammar": f"root ::= [^\\n]{{1,{max_chars}}}"}}
        return {"stop": ["\n"]}

    def chat(self, messages: list[dict], max_tokens: int | None = None, **options: Any) -> str:
        """The whole answer as one string."""
        # Streamed under the hood: a timed-out streaming request is cancelled by the local
        # server at its next token, while a non-streaming one would run to max_tokens.
        return "".join(self.stream_chat(messages, max_tokens, **options))

    def keep_prefix(self, messages: list[dict]) -> dict[str, Any] | None:
        """Have the embedded model read `messages` once and keep its state on disk, so that any later
        request starting with them (in this or a later process) skips reading them again.

        Returns `{"tokens", "new", "seconds"}`, or None where nothing is kept: another backend (OpenAI,
        vLLM and llama.cpp's own server reuse shared prefixes by themselves) or a server started
        with no disk for kept states."""
        return self._keep_request(messages, dry=False)

    def has_kept(self, messages: list[dict]) -> bool | None:
        """Whether the embedded model has the state after `messages` at hand (kept on disk by
        `keep_prefix`, or in its RAM cache), so a request starting with them reads only the rest.
        Answered without reading anything (a few ms). None where nothing is kept (see `keep_prefix`)."""
        reply = self._keep_request(messages, dry=True)
        return None if reply is None else bool(reply.get("kept"))

    def choice_logprobs(self, messages: list[dict], choices: list[str]) -> dict[str, float] | None:
        """How likely each of `choices` (one-word replies such as "yes" and "no", in any case) is as the
        first word of the model's reply to `messages`: a log-probability per choice.

        The embedded model answers through its own route (see `child`); another backend through the
        OpenAI API's `logprobs` (a choice not among its top 20 first tokens gets less than the 20th, and 20
        below the best choice's). None where the backend gives no log-probabilities."""
        import openai

        self._revive()
        if self._server is not None:
            body = {"model": self.model, "messages": messages, "choices": choices}
            reply = self._post_local("/assistant/choice", body)
            found = reply.get("logprobs") if isinstance(reply, dict) else None
            if not isinstance(found, dict) or set(found) != set(choices):
                raise LLMError(f"The local LLM server sent an unexpected choice reply: {shorten(str(reply))}")
            return {c: float(found[c]) for c in choices}
        if self._no_logprobs:
            return None
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, max_tokens=1, temperature=0.0,  # type: ignore[arg-type]
                logprobs=True, top_logprobs=20,
            )
            first = response.choices[0].logprobs.content[0].top_logprobs  # type: ignore[union-attr,index]
        except (openai.BadRequestError, AttributeError, IndexError, TypeError):
            # Turned down, or a reply without them: the server gives no log-probabilities; asked once, not again.
            self._no_logprobs = True
            return None
        except Exception as exc:
            raise self._translate(exc) from exc
        seen: dict[str, list[float]] = {c.lower(): [] for c in choices}
        for entry in first:
            word = entry.token.strip().lower()
            if word in seen:
                seen[word].append(entry.logprob)
        if not first:
            return None
        found = {c: float(np.logaddexp.reduce(seen[c.lower()])) for c in choices if seen[c.lower()]}
        # A choice outside the top 20 is less likely than the 20th: below it (and well below a choice that is in).
        floor = min(min(e.logprob for e in first) - 1.0, max(found.values(), default=0.0) - 20.0)
        return {c: found.get(c, floor) for c in choices}

    def _keep_request(self, messages: list[dict], dry: bool) -> dict[str, Any] | None:
        """The local server's keep route (see `child`); None where nothing is kept."""
        import openai

        if self._server is None:
            return None
        self._revive()
        try:
            reply = self._post_local("/assistant/keep", {"model": self.model, "messages": messages, "dry": dry})
        except LLMError as exc:
            if isinstance(exc.__cause__, openai.APIStatusError) and exc.__cause__.status_code == 409:
                return None
            raise
        return reply if isinstance(reply, dict) else None

    def _post_local(self, path: str, body: dict[str, Any]) -> Any:
        """A request to one of the local server's own routes (see `child`), sent again once if it killed
        the server with SIGILL."""
        for attempt in (0, 1):
            try:
                return self._client.post(path, cast_to=object, body=body)
            except Exception as exc:
                error = self._translate(exc)
                if attempt == 0 and isinstance(error, LLMUnavailableError) and self._restarted_after_sigill():
                    continue
                raise error from exc
        raise AssertionError("unreachable")

    def _timeout_message(self) -> str:
        return (
            f"The LLM at {self._where} did not answer within {self.timeout:g} s. "
            "Raise ASSISTANT_LLM_TIMEOUT or ask for a shorter answer."
        )

    def _translate(self, exc: BaseException) -> LLMError:
        """One of our errors for an openai/httpx/parsing exception."""
        import httpx
        import openai

        if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
            return LLMTimeoutError(self._timeout_message())
        if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
            died = self._server.describe_exit(wait=2.0) if self._server is not None else None
            if died:
                return LLMUnavailableError(died)
            return LLMUnavailableError(
                f"LLM server at {self._where} is not reachable: {_cause(exc).rstrip('.')}. {self._hint}"
            )
        if isinstance(exc, openai.AuthenticationError):
            return LLMError(
                f"The LLM at {self._where} rejected the API key (HTTP 401). "
                "Set OPENAI_API_KEY or ASSISTANT_LLM_API_KEY to a valid key."
            )
        if isinstance(exc, openai.NotFoundError):
            return LLMError(
                f"The LLM at {self._where} does not know model {self.model!r} or the chat API (HTTP 404). "
                "Check ASSISTANT_LLM_MODEL and ASSISTANT_LLM_BASE_URL (it usually ends in /v1)."
            )
        if isinstance(exc, openai.RateLimitError):
            return LLMError(f"The LLM at {self._where} is rate-limiting requests (HTTP 429); try again later.")
        if isinstance(exc, openai.APIStatusError):
            return LLMError(f"The LLM at {self._where} returned HTTP {exc.status_code}: {_api_message(exc)}")
        if isinstance(exc, openai.APIError):
            return LLMError(f"The LLM at {self._where} failed: {_api_message(exc)}")
        if isinstance(exc, (ValueError, TypeError, AttributeError, KeyError)):
            return LLMError(f"The LLM at {self._where} sent a response that is not a valid chat completion: {shorten(str(exc))}")
        return LLMError(f"The LLM at {self._where} failed: {type(exc).__name__}: {shorten(str(exc))}")

    def close(self) -> None:
        """Release the HTTP client and stop the local server if this LLM owns one."""
        with contextlib.suppress(Exception):
            self._client.close()
        if self._server is not None:
            self._server.stop()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _api_message(exc: openai.APIError) -> str:
    # The server's own words (body.error.message) read better than openai's "Error code: …" wrapper.
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return shorten(inner["message"])
    return shorten(exc.message)


def _cause(exc: BaseException) -> str:
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    return shorten(str(root) or type(root).__name__)


# ---------------------------------------------------------------------------------------
# Connecting to the chosen backend
# ---------------------------------------------------------------------------------------


def connect(settings: Settings, progress: Progress | None = None, notify: Progress | None = None) -> LLM:
    """The LLM chosen by settings; for the local backend this assembles and starts the model.

    `progress` hears the loading steps; `notify` what happens later that a user should know (the local
    server restarted in its CPU fallback after a crash); it defaults to `progress`. Which model:
    `backend_of`.
    """
    common = {
        "timeout": settings.llm_timeout,
        "max_tokens": settings.max_answer_tokens,
        "temperature": settings.temperature,
    }
    backend = backend_of(settings)
    if backend == "openai":
        key = settings.llm_api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise LLMError("ASSISTANT_LLM_BACKEND=openai needs an API key: set OPENAI_API_KEY or ASSISTANT_LLM_API_KEY.")
        return LLM(
            base_url=settings.llm_base_url, model=openai_model(settings), api_key=key,
            unreachable_hint="Check your network connection or ASSISTANT_LLM_BASE_URL.", **common,
        )
    if backend == "server":
        if not settings.llm_base_url:
            raise LLMError("ASSISTANT_LLM_BACKEND=server needs ASSISTANT_LLM_BASE_URL (e.g. http://127.0.0.1:8080/v1).")
        return LLM(
            base_url=settings.llm_base_url, model=settings.llm_model,
            api_key=settings.llm_api_key or "not-needed", **common,
        )

    path = ensure_gguf(settings, progress)
    packaged = settings.gguf_path is None
    label = PACKAGED_MODEL_NAME if packaged else path.stem
    alias = PACKAGED_MODEL_ALIAS if packaged else path.stem
    say(progress, f"Loading {label}…")
    server = LocalServer(path, settings, alias=alias).start()
    say(progress, f"Loading {label}… ({server.load_seconds:.1f} s)")
    try:
        return LLM(
            base_url=server.url, model=alias, api_key="not-needed", name=f"{label} (local, llama.cpp)",
            context_window=settings.llm_context, server=server,
            unreachable_hint=f"The local server may have crashed; see {server.log_path}.", notify=notify or progress,
            **common,
        )
    except BaseException:
        server.stop()
        raise
