"""Shared measuring helpers of the benchmark: printing, rounding and percentiles, process memory,
and the CPU meter that tells how busy other processes kept the shared machine during a section."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np


def say(text: str = "") -> None:
    print(text, flush=True)


def note(text: str) -> None:
    """Progress for long phases (stderr, so the report on stdout stays clean)."""
    print(f"  … {text}", file=sys.stderr, flush=True)


def r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def stats_ms(values: list[float]) -> dict[str, float | int | None]:
    """p50/p95/mean in milliseconds of durations given in seconds."""
    if not values:
        return {"n": 0, "p50_ms": None, "p95_ms": None, "mean_ms": None}
    return {
        "n": len(values),
        "p50_ms": r(pct(values, 50) * 1000, 2),
        "p95_ms": r(pct(values, 95) * 1000, 2),
        "mean_ms": r(sum(values) / len(values) * 1000, 2),
    }


def fmt_ms(s: dict[str, Any]) -> str:
    if not s.get("n"):
        return "n/a"
    return f"p50 {s['p50_ms']:8.2f} ms   p95 {s['p95_ms']:8.2f} ms   (n={s['n']})"


def seconds_stats(values: list[float | None]) -> dict[str, Any]:
    got = [v for v in values if v is not None]
    return {"n": len(got), "p50_s": r(pct(got, 50), 3) if got else None, "p95_s": r(pct(got, 95), 3) if got else None}


def fmt_s(stats: dict[str, Any]) -> str:
    return f"p50 {stats['p50_s']:.2f} s, p95 {stats['p95_s']:.2f} s (n={stats['n']})" if stats["n"] else "n/a"


def proc_mem(pid: int | str = "self") -> dict[str, float | None]:
    """VmRSS and VmHWM (peak RSS) of a process in MiB, from /proc/<pid>/status."""
    out: dict[str, float | None] = {"rss_mib": None, "hwm_mib": None}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_mib"] = round(int(line.split()[1]) / 1024, 1)
            elif line.startswith("VmHWM:"):
                out["hwm_mib"] = round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return out


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _machine_busy_s() -> float:
    """CPU-seconds the whole machine has been busy (all cores; idle and iowait excluded)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK


def _process_cpu_s(pid: int | str) -> float:
    try:
        parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        # utime, stime, cutime, cstime are fields 14-17 of stat; after the ")" they start at index 11.
        return sum(int(x) for x in parts[11:15]) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def other_llm_servers(ours: list[int]) -> int:
    """Running llama.cpp servers (plain or this project's wrapper) that are not this benchmark's."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            if b"llama_cpp.server" in cmdline or b"assistant.llm.child" in cmdline:
                count += 1
    return count


class CpuMeter:
    """How busy *other* processes kept the machine during a section (the machine is shared)."""

    def __init__(self, ours: Callable[[], list[int]]) -> None:
        self.ours = ours

    def _own(self) -> float:
        return _process_cpu_s("self") + sum(_process_cpu_s(pid) for pid in self.ours())

    @contextlib.contextmanager
    def measure(self, into: dict[str, Any]) -> Iterator[None]:
        wall0, busy0, own0 = time.perf_counter(), _machine_busy_s(), self._own()
        try:
            yield
        finally:
            wall = time.perf_counter() - wall0
            busy, own = _machine_busy_s() - busy0, self._own() - own0
            into["contention"] = {
                "wall_s": r(wall, 2),
                "benchmark_cores": r(own / wall, 2) if wall else None,
                "other_processes_cores": r(max(busy - own, 0.0) / wall, 2) if wall else None,
                "other_llm_servers": other_llm_servers(self.ours()),
            }


def print_contention(section: dict[str, Any]) -> None:
    c = section.get("contention")
    if c:
        say(
            f"  [shared machine: during these {c['wall_s']:.0f} s this benchmark used {c['benchmark_cores']} cores, "
            f"other processes {c['other_processes_cores']} cores; other LLM servers running: {c['other_llm_servers']}]"
        )
