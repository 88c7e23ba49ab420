"""The benchmark's report: sections of results, printed as they come, with memory snapshots by
stage, saved as JSON at the end."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from .measure import proc_mem, say


class Report:
    """Sections of results, printed as they come and saved as JSON."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.data: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "arguments": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "complete": False,
        }
        self.memory: list[dict[str, Any]] = []
        self.data["memory_snapshots"] = self.memory

    def section(self, name: str, title: str) -> dict[str, Any]:
        say()
        say(f"== {title} " + "=" * max(0, 74 - len(title)))
        self.data[name] = {}
        return self.data[name]

    def snapshot(self, stage: str, extra_pids: dict[str, int | None] | None = None) -> None:
        row: dict[str, Any] = {"stage": stage, "bench": proc_mem()}
        for label, pid in (extra_pids or {}).items():
            if pid:
                row[label] = proc_mem(pid)
        self.memory.append(row)

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(self.data, indent=1, ensure_ascii=False, default=str) + "\n")
        return path
