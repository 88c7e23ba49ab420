"""The machine the run measures on: hardware, versions and load at the start, and the peak memory
of the benchmark and its model server at the end."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path

from . import IMPORT_SECONDS
from .measure import loadavg, other_llm_servers, proc_mem, r, say
from .state import Run


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_section(run: Run) -> None:
    m = run.rep.section("machine", "Machine")
    cpu_model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
        platform.processor() or "unknown",
    )
    mem_total = next(
        (int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), 0
    )
    m.update({
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "ram_gib": round(mem_total / 2**20, 1),
        "cpu_model": cpu_model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {
            d: version(d)
            for d in ("chromadb", "llama-index-core", "onnxruntime", "llama-index-retrievers-bm25", "bm25s",
                      "llama-index-vector-stores-chroma", "llama_cpp_python", "tokenizers", "numpy")
        },
        "loadavg_start": loadavg(),
        "other_llm_servers_at_start": other_llm_servers([]),
        "import_seconds": r(IMPORT_SECONDS, 3),
        "synthetic_abstracts": run.n_synth,
        "queries": len(run.questions),
    })
    say(f"  CPU: {cpu_model}; {m['cores']} cores ({m['usable_cores']} usable); RAM {m['ram_gib']} GiB")
    say(f"  Python {m['python']} on {m['platform']}")
    say("  " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()))
    say(
        f"  load average at start: {m['loadavg_start']}; other llama.cpp servers running: "
        f"{m['other_llm_servers_at_start']} (shared machine: compare ratios within this run)"
    )
    say(f"  importing the assistant package took {IMPORT_SECONDS:.2f} s")


def memory_section(run: Run) -> None:
    mem = run.rep.section("memory", "Peak memory (VmHWM)")
    own = proc_mem()
    srv = run.server_memory or (proc_mem(run.server_pid) if run.server_pid else {"rss_mib": None, "hwm_mib": None})
    mem.update({"bench_process": own, "llm_server": srv})
    total = (own["hwm_mib"] or 0) + (srv["hwm_mib"] or 0)
    mem["assistant_total_peak_mib"] = round(total, 1)
    run.rep.snapshot("end", {"llm_server": run.server_pid})
    say(f"  this process: peak {own['hwm_mib']} MiB (now {own['rss_mib']} MiB; the peak includes the synthetic indexing)")
    if run.server_pid:
        when = "when it was stopped" if run.server_memory else "now"
        say(f"  llama.cpp server child (pid {run.server_pid}): peak {srv['hwm_mib']} MiB ({when} {srv['rss_mib']} MiB)")
    say(f"  peak RSS of the whole assistant (this process + LLM server): {total:.0f} MiB")
    say("  RSS of this process by stage: " + "; ".join(
        f"{s['stage']} {s['bench']['rss_mib']}" for s in run.rep.memory
    ) + " MiB")
    run.rep.data["machine"]["loadavg_end"] = loadavg()
