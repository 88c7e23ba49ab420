"""Chroma in server mode: a `chroma run` started on a free local port, the bundled abstracts
indexed, opened and queried through it over HTTP, then the server stopped by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from assistant.config import Settings

from .indexing import measure_build, print_build
from .measure import print_contention, proc_mem, r, say
from .retrieval import measure_retrieval, print_retrieval
from .startup import measure_startup, print_startup, startup_breakdown
from .state import Run

CHROMA_BIN = Path(sys.executable).parent / "chroma"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChromaServer:
    def __init__(self, path: Path, log: Path) -> None:
        self.path = path
        self.log = log
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> float:
        mark = time.perf_counter()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [str(CHROMA_BIN), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the benchmark, which stops the server itself
            )
        url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
        with httpx.Client(trust_env=False, timeout=1.0) as client:
            while time.perf_counter() - mark < timeout:
                if self.process.poll() is not None:
                    raise RuntimeError(f"chroma run exited with code {self.process.returncode}; see {self.log}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        return time.perf_counter() - mark
                time.sleep(0.1)
        raise RuntimeError(f"chroma run did not answer within {timeout} s; see {self.log}")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()


def chroma_server_section(run: Run) -> None:
    if run.args.skip_server:
        return
    cs = run.rep.section("chroma_server", "Chroma in server mode (chroma run, 57 abstracts)")
    if not CHROMA_BIN.exists():
        cs["error"] = f"{CHROMA_BIN} not found"
        say(f"  skipped: {cs['error']}")
        return
    ctx = run.ctx
    with run.meter.measure(cs):
        ctx.chroma = ChromaServer(ctx.tmp / "chroma-server", ctx.tmp / "chroma-server.log")
        cs["server_start_seconds"] = r(ctx.chroma.start(), 3)
        cs["pid"] = ctx.chroma.pid
        say(f"  chroma run pid {ctx.chroma.pid} on 127.0.0.1:{ctx.chroma.port}, up in {cs['server_start_seconds']:.2f} s")
        settings = Settings(corpus=run.real, chroma_host="127.0.0.1", chroma_port=ctx.chroma.port, collection="papers")
        cs["build"] = measure_build(settings, run.real, "server", run.embed_rate)
        print_build(cs["build"], f"{len(run.real)} files via HTTP")
        a_srv, st = measure_startup(settings)
        st["breakdown"] = startup_breakdown(settings)
        cs["startup"] = st
        print_startup(st, "server")
        cs["retrieval"] = measure_retrieval(a_srv, run.questions)
        print_retrieval(cs["retrieval"], "57 papers on the server")
        cs["server_memory"] = proc_mem(ctx.chroma.pid)
        del a_srv
    say(f"  chroma server peak RSS {cs['server_memory']['hwm_mib']} MiB")
    print_contention(cs)
    ctx.chroma.stop()
    say(f"  stopped chroma run pid {ctx.chroma.pid}")
