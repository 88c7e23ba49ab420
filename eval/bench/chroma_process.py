"""A Chroma server process for the benchmark: `chroma run` on a free loopback port, stopped by pid."""

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

CHROMA_BIN = Path(sys.executable).parent / "chroma"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChromaServer:
    """A `chroma run` process on a free loopback port, stopped by its pid."""

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
