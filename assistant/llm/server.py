"""The local model's server process: a private `llama_cpp.server` on a free loopback port.

`LocalServer(model_path, settings).start()` launches `python -m assistant.llm.child` (see there
for why not `llama_cpp.server` directly), waits until it answers, and supervises it: the child
is stopped at exit, on SIGTERM and, on Linux, by the kernel if this process dies; when it dies
on its own, `describe_exit` says how, in one sentence naming its log file.

A llama.cpp built with `-march=native` on an Intel CPU with AMX holds AMX kernels that GCC 12
miscompiles: the server dies with SIGILL on its first real prompt (`scripts/setup.sh` builds without
them). `use_cpu_fallback` restarts such a server without llama.cpp's extra buffer types, which keeps
those kernels unused, and remembers that for this build of the library.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import LLMUnavailableError
from ..text import shorten
from .weights import PACKAGED_MODEL_ALIAS

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


def kept_states_dir(settings: Settings, model_path: Path) -> Path:
    """Where the local server keeps prompt states: one folder per model file and llama.cpp version
    (a state is only valid for the model and the library that wrote it)."""
    try:
        size = Path(model_path).stat().st_size
    except OSError:
        size = 0
    version = _llama_cpp_version()
    root = settings.llm_kept_states_dir or Path(settings.cache_dir) / "prompt-states"
    return Path(root).expanduser() / f"{Path(model_path).stem}-{size}{_VERSION_MARK}{version}"


_VERSION_MARK = "-llama_cpp-"


def drop_outdated_states(folder: Path) -> list[Path]:
    """Remove the kept states of the same model file written by other llama.cpp versions (a state
    only loads in the version that wrote it); states of other model files stay. The folders removed."""
    stem = folder.name.rsplit(_VERSION_MARK, 1)[0]
    dropped = []
    for other in folder.parent.glob(f"{glob.escape(stem)}{_VERSION_MARK}*"):
        if other != folder and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
            dropped.append(other)
    return dropped


def _cpu_fallback_marker(settings: Settings) -> Path | None:
    """The file that says this build of llama.cpp's CPU library died of SIGILL here (named after the
    library files' size and time, so a rebuild by `scripts/setup.sh` starts afresh); None without
    llama-cpp-python."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.origin:
        return None
    libraries = sorted(Path(spec.origin).parent.glob("lib/lib*.so*"))
    identity = "|".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in libraries if p.is_file())
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path(settings.cache_dir).expanduser() / "llama-cpu-fallback" / digest


def _llama_cpp_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return "unknown"


class LocalServer:
    """A private `llama_cpp.server` subprocess (via `assistant.llm.child`) on a free loopback port.

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
        self.kept_states_mb = settings.llm_kept_states_mb if settings.llm_prompt_cache_mb else 0
        self.kept_dir = kept_states_dir(settings, self.model_path)
        self.start_timeout = settings.llm_start_timeout
        self.log_path = Path(settings.cache_dir).expanduser() / "llama-server.log"
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.load_seconds: float | None = None
        self._log_offset = 0
        self._started_at = 0.0
        self._stopped = False
        self._fallback_marker = _cpu_fallback_marker(settings)
        # Without llama.cpp's extra buffer types: set after this build of the library died of SIGILL.
        self.cpu_fallback = self._fallback_marker is not None and self._fallback_marker.exists()

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

    @property
    def crashed(self) -> bool:
        """It was started and has ended without being stopped (a crash or a kill)."""
        return self.process is not None and not self._stopped and not self.running

    @property
    def died_of_illegal_instruction(self) -> bool:
        """It crashed with SIGILL: its llama.cpp build uses an instruction this CPU cannot run."""
        return self.crashed and self.process is not None and self.process.returncode == -signal.SIGILL

    def use_cpu_fallback(self) -> bool:
        """After a death by SIGILL: from now on, start without llama.cpp's extra buffer types (whose
        AMX kernels are the usual cause), also in later processes using the same library build.
        False if the server already ran that way (nothing left to try)."""
        if self.cpu_fallback:
            return False
        self.cpu_fallback = True
        if self._fallback_marker is not None:
            with contextlib.suppress(OSError):
                self._fallback_marker.parent.mkdir(parents=True, exist_ok=True)
                self._fallback_marker.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')} SIGILL with {self.model_path}\n")
        return True

    def command(self, port: int) -> list[str]:
        return [
            # llama_cpp.server, with a prompt cache whose memory its size limit bounds (see there).
            sys.executable, "-m", "assistant.llm.child",
            # States of prompt prefixes kept on disk for later processes (see there).
            *(["--keep_dir", str(self.kept_dir), "--keep_mb", str(self.kept_states_mb)] if self.kept_states_mb else []),
            "--model", str(self.model_path),
            "--model_alias", self.alias,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.context),
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            *(["--no_extra_bufts"] if self.cpu_fallback else []),
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
        if self.kept_states_mb:
            drop_outdated_states(self.kept_dir)
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
                return ": " + shorten(line.strip(), 200)
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
