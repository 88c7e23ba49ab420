"""The benchmark (`python -m eval.bench`) runs end to end on the product's public seams (a small
run, no model, no server).

It reads the stage timings the product reports itself; a renamed seam fails here instead of
silently measuring nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from assistant.config import PROJECT_ROOT


def test_a_small_benchmark_run_reports_index_stages_and_retrieval_parts(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eval.bench", "--n-synthetic", "20", "--queries", "5", "--embed-texts", "32",
         "--skip-llm", "--skip-server", "--no-fresh-process", "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(next(tmp_path.glob("bench-*.json")).read_text())
    assert report["complete"] is True
    assert report["index"]["real"]["stages"]["embed"] > 0
    for size in ("real", "synthetic"):
        parts = report["retrieval"][size]
        names = ("retrieve", "query_embedding", "dense", "keyword", "fuse", "chroma_text_query")
        assert all(parts[name]["n"] == 5 for name in names)
    assert "ratio retrieve / chroma text query (p50) = " in done.stdout
    assert report["topics"]["real"]["groups"] >= 2 and report["topics"]["10000_jittered"]["papers"] == 10_000
