"""Start-up on an existing index: `Assistant.from_settings` timed as a whole, stage by stage, and
in a fresh interpreter as a user's first command meets it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from assistant.api import Assistant
from assistant.config import Settings
from assistant.embed import make_embedder
from assistant.index import corpus_fingerprint
from assistant.load import load_papers
from assistant.opening import parse_cache
from assistant.retrieve import HybridRetriever, build_bm25, load_bm25
from assistant.store import Store

from . import ROOT
from .measure import r, say


def measure_startup(settings: Settings) -> tuple[Assistant, dict[str, Any]]:
    """Assistant.from_settings on an existing index (twice: first, then with warm caches)."""
    messages: list[str] = []
    runs = []
    assistant_obj = None
    for _ in range(2):
        assistant_obj = None
        mark = time.perf_counter()
        assistant_obj = Assistant.from_settings(settings, notify=messages.append)
        runs.append(time.perf_counter() - mark)
    assert assistant_obj is not None
    out = {
        "first_seconds": r(runs[0], 3),
        "second_seconds": r(runs[1], 3),
        "re_embedded": any("ndex" in m and ("Building" in m or "changed" in m) for m in messages),
        "notices": list(messages),
    }
    return assistant_obj, out


def startup_breakdown(settings: Settings) -> dict[str, float | None]:
    """Where Assistant.from_settings spends its time (each stage timed on its own), and what
    reading every chunk back from Chroma to build BM25 would cost (start-up loads it instead)."""
    out: dict[str, float | None] = {}
    mark = time.perf_counter()
    store = Store(settings)
    out["open_store_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    papers = load_papers(settings.corpus, parse_cache(settings))
    out["load_papers_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    corpus_fingerprint(papers, settings)
    out["fingerprint_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    store.info()
    out["store_info_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    embedder = make_embedder(settings)
    out["make_embedder_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    load_bm25(settings, store)
    out["load_saved_bm25_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    HybridRetriever(settings, store, embedder, {p.id: p for p in papers})
    out["retriever_total_s"] = time.perf_counter() - mark
    # Avoided at start-up: parsing the corpus files, and reading every chunk from Chroma to build BM25.
    mark = time.perf_counter()
    load_papers(settings.corpus)
    out["avoided_parse_papers_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    nodes = store.nodes()
    out["avoided_read_all_chunks_s"] = time.perf_counter() - mark
    mark = time.perf_counter()
    build_bm25(nodes, settings)
    out["avoided_bm25_build_s"] = time.perf_counter() - mark
    return {k: r(v, 3) for k, v in out.items()}


def fresh_process_startup(settings: Settings) -> dict[str, Any]:
    """Import + Assistant.from_settings in a new interpreter, as a user's first command sees it."""
    code = (
        "import json,time,sys;t=time.perf_counter();import assistant;from assistant import Assistant,Settings;"
        "i=time.perf_counter()-t;s=Settings.model_validate_json(sys.argv[1]);"
        "m=time.perf_counter();a=Assistant.from_settings(s);o=time.perf_counter()-m;"
        "print(json.dumps({'import_s':i,'from_settings_s':o,'total_s':time.perf_counter()-t}))"
    )
    mark = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, settings.model_dump_json()],
        capture_output=True, text=True, timeout=1800, cwd=str(ROOT),
    )
    wall = time.perf_counter() - mark
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {k: r(v, 3) for k, v in got.items()} | {"process_wall_s": r(wall, 3)}


def print_startup(s: dict[str, Any], label: str) -> None:
    say(
        f"  Assistant.from_settings on the existing {label} index: {s['first_seconds']:.2f} s "
        f"(again: {s['second_seconds']:.2f} s); re-embedded: {'YES' if s['re_embedded'] else 'no'}"
    )
    if "breakdown" in s:
        b = s["breakdown"]
        say(
            "    breakdown: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in b.items() if v is not None)
        )
    if "fresh_process" in s:
        f = s["fresh_process"]
        if "error" in f:
            say(f"    fresh process: failed: {f['error']}")
        else:
            say(
                f"    fresh process: import {f['import_s']:.2f} s + from_settings {f['from_settings_s']:.2f} s "
                f"= {f['total_s']:.2f} s ({f['process_wall_s']:.2f} s wall)"
            )
