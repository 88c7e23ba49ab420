"""What one benchmark run shares between its sections (inputs, report, what earlier sections
produced) and what it must clean up (temp folder, assistants and their model servers, the
Chroma server)."""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant.api import Assistant
from assistant.config import Settings
from chromadb.api.client import SharedSystemClient

from .measure import CpuMeter
from .report import Report

if TYPE_CHECKING:
    from .chroma_process import ChromaServer


def llm_server_of(a: Assistant) -> Any:
    """The local model server `a` started, if it has started one (never starts it)."""
    llm = a.llm_loaded
    return llm.server if llm is not None else None


class Context:
    """Everything that must be cleaned up: temp folder, assistants (LLM servers), Chroma server."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="assistant-bench-"))
        self.assistants: list[Assistant] = []
        self.chroma: ChromaServer | None = None

    def child_pids(self) -> list[int]:
        pids = [self.chroma.pid] if self.chroma is not None and self.chroma.pid else []
        for a in self.assistants:
            server = llm_server_of(a)
            if server is not None and server.pid:
                pids.append(server.pid)
        return pids

    def keep(self, a: Assistant) -> Assistant:
        self.assistants.append(a)
        return a

    def cleanup(self) -> list[str]:
        done = []
        for a in self.assistants:
            with contextlib.suppress(Exception):
                server = llm_server_of(a)
                a.close()
                if server is not None:
                    done.append(f"stopped LLM server pid {server.pid}")
        if self.chroma is not None and self.chroma.pid:
            self.chroma.stop()
            done.append(f"stopped Chroma server pid {self.chroma.pid}")
        with contextlib.suppress(Exception):
            SharedSystemClient.clear_system_cache()
        shutil.rmtree(self.tmp, ignore_errors=True)
        done.append(f"removed {self.tmp}")
        return done


def embedded_settings(folder: Path, corpus: list[Path]) -> Settings:
    # The model's kept prompt states live in the run's temp folder: the run starts with no paper
    # read before, whatever the user's cache holds, and leaves none behind.
    return Settings(index_dir=folder, corpus=corpus, chroma_host=None, collection="papers",
                    llm_kept_states_dir=folder.parent / "kept-states")


@dataclass
class Run:
    """What the sections of one benchmark run share: its inputs, the report, what to clean up,
    and what earlier sections produced for later ones."""

    args: argparse.Namespace
    rep: Report
    ctx: Context
    meter: CpuMeter
    real: list[Path]
    questions: list[str]
    n_synth: int
    embed_rate: float | None = None
    a_real: Assistant | None = None
    a_syn: Assistant | None = None
    synth_path: Path | None = None
    server_pid: int | None = None
    server_memory: dict[str, float | None] | None = None  # the LLM server's, taken before it was stopped


def new_model_session(run: Run, warm_up: Callable[[], Any]) -> None:
    """Stop the model server and start a new one, as a new session meets it: nothing in its RAM,
    the kept states on disk. `warm_up` has it read its fixed instructions; the memory section reads
    the new server's peak."""
    assert run.a_real is not None
    run.a_real.close()
    warm_up()
    run.server_pid = run.a_real.llm.server.pid if run.a_real.llm.server is not None else run.server_pid
