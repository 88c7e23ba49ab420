#!/usr/bin/env python
"""Performance benchmark of the reading assistant: embedding, indexing, retrieval, Chroma server, LLM, memory.

    .venv/bin/python eval/bench.py                # full run: 10,000 synthetic abstracts
    .venv/bin/python eval/bench.py --quick        # 1,000 synthetic abstracts, to check the set-up
    .venv/bin/python eval/bench.py --skip-llm --skip-server

Prints a report and writes it as JSON to eval/reports/bench-<timestamp>.json. Everything it
builds lives in one temporary folder that is removed at the end; every server it starts is
stopped by pid (also on Ctrl-C). The machine is usually shared, so read ratios measured
within one run (retrieve/bare, indexing/embedding) rather than absolute figures across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_T_IMPORT = time.perf_counter()
import assistant  # noqa: E402,F401  (sets the offline environment before the heavy imports)
import numpy as np  # noqa: E402
from assistant.api import Assistant, parse_cache, reindex  # noqa: E402
from assistant.chunk import chunk_papers  # noqa: E402
from assistant.config import BUNDLED_CORPUS, Settings  # noqa: E402
from assistant.embed import make_embedder  # noqa: E402
from assistant.index import corpus_fingerprint  # noqa: E402
from assistant.load import load_papers  # noqa: E402
from assistant.retrieve import HybridRetriever  # noqa: E402
from assistant.store import Store  # noqa: E402
from assistant.table import resolve_papers  # noqa: E402
from assistant.text import split_sentences  # noqa: E402
from assistant.types import Answer, Evidence  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _T_IMPORT
QUESTIONS_FILE = ROOT / "eval" / "questions.jsonl"
REPORT_DIR = ROOT / "eval" / "reports"
CHROMA_BIN = Path(sys.executable).parent / "chroma"


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------


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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


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


def print_contention(section: dict[str, Any]) -> None:
    c = section.get("contention")
    if c:
        say(
            f"  [shared machine: during these {c['wall_s']:.0f} s this benchmark used {c['benchmark_cores']} cores, "
            f"other processes {c['other_processes_cores']} cores; other LLM servers running: {c['other_llm_servers']}]"
        )


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


# ---------------------------------------------------------------------------------------
# Inputs: real corpus, synthetic corpus, queries
# ---------------------------------------------------------------------------------------


def real_corpus() -> list[Path]:
    paths = sorted(BUNDLED_CORPUS.glob("*.txt"))
    if not paths:
        raise SystemExit(f"No bundled corpus files in {BUNDLED_CORPUS}.")
    return paths


def make_synthetic(real_paths: list[Path], n: int, seed: int, target: Path) -> dict[str, Any]:
    """Write `n` abstracts recombined from the real abstracts' sentences (deterministic for a seed).

    Each synthetic abstract takes the length (in characters) of a randomly drawn real abstract,
    opens with a real opening sentence and continues with randomly drawn real sentences.
    """
    papers = load_papers(real_paths)
    openers: list[str] = []
    body: list[str] = []
    lengths: list[int] = []
    for paper in papers:
        sentences = split_sentences(paper.abstract)
        if not sentences:
            continue
        openers.append(sentences[0])
        body.extend(sentences[1:] or sentences)
        lengths.append(len(paper.abstract))
    rng = random.Random(seed)
    total_chars = 0
    with open(target, "w", encoding="utf-8") as out:
        for i in range(n):
            goal = rng.choice(lengths)
            parts = [rng.choice(openers)]
            size = len(parts[0])
            while size < goal:
                sentence = rng.choice(body)
                parts.append(sentence)
                size += len(sentence) + 1
            abstract = " ".join(parts)
            words = parts[0].split()[:7]
            title = f"S{i + 1:05d} " + " ".join(words).strip(",.;:")
            out.write(json.dumps({"title": title, "abstract": abstract}, ensure_ascii=False) + "\n")
            total_chars += len(abstract)
    return {
        "abstracts": n,
        "seed": seed,
        "mean_chars": round(total_chars / max(n, 1)),
        "real_mean_chars": round(sum(lengths) / max(len(lengths), 1)),
        "file_mib": round(target.stat().st_size / 2**20, 2),
    }


def load_questions(count: int) -> list[dict[str, Any]]:
    """`count` varied single-turn questions, evenly spread over eval/questions.jsonl (all types)."""
    rows = [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    single = [q for q in rows if not q.get("history")]
    if len(single) <= count:
        return single
    step = len(single) / count
    return [single[int(i * step)] for i in range(count)]


# ---------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------


def measure_embedding(embedder: Any, texts: list[str], batch: int) -> dict[str, Any]:
    """texts/s of MiniLM alone on chunk-sized texts, in batches, sorted by length as the indexer does."""
    embedder.encode(texts[:batch])  # warm-up (ONNX session allocations)
    out: dict[str, Any] = {"texts": len(texts), "batch": batch}
    for label, order in (("sorted", sorted(texts, key=len)), ("unsorted", texts)):
        mark = time.perf_counter()
        for start in range(0, len(order), batch):
            embedder.encode(order[start : start + batch])
        seconds = time.perf_counter() - mark
        out[f"{label}_seconds"] = r(seconds, 3)
        out[f"{label}_texts_per_s"] = r(len(order) / seconds, 1)
    out["texts_per_s"] = out["sorted_texts_per_s"]
    counts = embedder.token_counts(texts[:256])
    out["mean_wordpiece_tokens"] = round(sum(counts) / len(counts), 1)
    return out


def progress_printer(label: str) -> Callable[[int, int], None]:
    state = {"start": time.perf_counter(), "next": 0.0}

    def update(done: int, total: int) -> None:
        if total == 0 or done == 0:
            return
        share = done / total
        if share >= state["next"] or done >= total:
            elapsed = time.perf_counter() - state["start"]
            rate = done / elapsed if elapsed > 0 else 0.0
            eta = (total - done) / rate if rate > 0 else float("nan")
            note(f"{label}: {done}/{total} chunks embedded ({rate:.0f}/s, {elapsed:.0f} s elapsed, ~{eta:.0f} s left)")
            state["next"] = share + 0.1

    return update


def measure_build(settings: Settings, paths: list[Path], label: str, embed_rate: float | None) -> dict[str, Any]:
    """A first build, then a re-index with nothing changed; the stage times are the index run's own."""
    mark = time.perf_counter()
    report = reindex(settings, paths, rebuild=False, progress=progress_printer(label))
    wall = time.perf_counter() - mark
    out: dict[str, Any] = {
        "papers": report.papers,
        "chunks": report.chunks,
        "chunks_per_paper": r(report.chunks / max(report.papers, 1), 2),
        "embedded_chunks": report.embedded_chunks,
        "build_seconds": r(report.seconds, 3),
        "wall_seconds": r(wall, 3),
        "chunks_per_s": r(report.embedded_chunks / report.seconds, 1) if report.seconds else None,
    }
    if embed_rate and out["chunks_per_s"]:
        out["ratio_index_to_embedding"] = r(out["chunks_per_s"] / embed_rate, 3)
    out["stages"] = {k: r(v, 3) for k, v in report.stages.items()}
    if report.stages.get("embed"):
        out["embedding_texts_per_s_during_build"] = r(report.embedded_chunks / report.stages["embed"], 1)
        out["embedding_share_of_build"] = r(report.stages["embed"] / report.seconds, 3)
    mark = time.perf_counter()
    again = reindex(settings, paths, rebuild=False)
    out["reindex_unchanged_seconds"] = r(time.perf_counter() - mark, 3)
    out["reindex_unchanged_index_seconds"] = r(again.seconds, 3)
    out["reindex_unchanged_embedded_chunks"] = again.embedded_chunks
    return out


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
    from assistant.retrieve import build_bm25, load_bm25

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


class SameEmbedder:
    """The assistant's own MiniLM as a Chroma embedding function, so that Chroma's text query embeds
    the question exactly as `retrieve()` does. Its name is "default" because Chroma refuses, on
    get_collection, any function whose name differs from the one recorded with the collection
    (Chroma's "default" MiniLM, which is not available offline)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def __call__(self, input: list[str]) -> list[Any]:  # noqa: A002 - Chroma's parameter name
        return list(self.embedder.encode(list(input)))

    @staticmethod
    def name() -> str:
        return "default"

    def is_legacy(self) -> bool:
        return True

    def embed_query(self, input: list[str]) -> list[Any]:  # noqa: A002
        return self(input)


def measure_retrieval(a: Assistant, questions: list[str], k: int = 5) -> dict[str, Any]:
    """Per query, interleaved so that load on the shared machine hits every figure alike. The parts
    of a retrieval (query embedding, dense side, BM25 side, fusion) are the ones retrieve() reports."""
    collection = a.store.active()
    text_collection = a.store.client.get_collection(collection.name, embedding_function=SameEmbedder(a.embedder))
    n = max(a.settings.candidates, k * 3)
    for q in questions[:3]:  # warm-up
        a.retrieve(q, k=k)
        text_collection.query(query_texts=[q], n_results=n)
    parts = ("query_embedding", "dense", "keyword", "fuse")
    times: dict[str, list[float]] = {
        name: [] for name in ("retrieve", *parts, "chroma_text_query", "bare_chroma", "store_query")
    }
    for q in questions:
        spent: dict[str, float] = {}
        mark = time.perf_counter()
        a.retrieve(q, k=k, timings=spent)
        times["retrieve"].append(time.perf_counter() - mark)
        for name in parts:
            times[name].append(spent[name])

        mark = time.perf_counter()
        text_collection.query(query_texts=[q], n_results=n, include=["documents", "metadatas", "distances"])
        times["chroma_text_query"].append(time.perf_counter() - mark)

        vector = a.embedder.get_query_embedding(q)
        mark = time.perf_counter()
        collection.query(query_embeddings=[vector], n_results=n, include=["documents", "metadatas", "distances"])
        times["bare_chroma"].append(time.perf_counter() - mark)

        mark = time.perf_counter()
        a.store.query(vector, n)
        times["store_query"].append(time.perf_counter() - mark)
    out: dict[str, Any] = {"queries": len(questions), "k": k, "candidates": n}
    out.update({name: stats_ms(values) for name, values in times.items()})
    bare = out["bare_chroma"]["p50_ms"]
    out["ratio_retrieve_to_bare_p50"] = r(out["retrieve"]["p50_ms"] / bare, 2) if bare else None
    text = out["chroma_text_query"]["p50_ms"]
    out["ratio_retrieve_to_chroma_text_query_p50"] = r(out["retrieve"]["p50_ms"] / text, 2) if text else None
    # The bare query is handed the vector; Assistant.retrieve must first compute it from text.
    beyond = out["retrieve"]["p50_ms"] - out["query_embedding"]["p50_ms"]
    out["ratio_retrieve_minus_embedding_to_bare_p50"] = r(beyond / bare, 2) if bare else None
    return out


def print_retrieval(res: dict[str, Any], label: str) -> None:
    say(f"  retrieval at {label}: {res['queries']} queries, k={res['k']}, {res['candidates']} candidates per side")
    say(f"    Assistant.retrieve()          {fmt_ms(res['retrieve'])}")
    say(f"    Chroma text query (same model) {fmt_ms(res['chroma_text_query'])}")
    say(f"    bare chromadb query           {fmt_ms(res['bare_chroma'])}")
    say(f"    Store.query                   {fmt_ms(res['store_query'])}")
    say("    its parts, as retrieve() reports them:")
    say(f"      query embedding             {fmt_ms(res['query_embedding'])}")
    say(f"      dense side via llama-index  {fmt_ms(res['dense'])}")
    say(f"      BM25 side                   {fmt_ms(res['keyword'])}")
    say(f"      fusion                      {fmt_ms(res['fuse'])}")
    say(
        f"    ratio retrieve / chroma text query (p50) = {res['ratio_retrieve_to_chroma_text_query_p50']}x "
        "(Chroma embeds the question with the same MiniLM and runs the dense query; retrieve adds BM25 and fusion)"
    )
    say(f"    ratio retrieve p50 / bare chromadb p50 = {res['ratio_retrieve_to_bare_p50']}x")
    say(
        f"    ratio (retrieve p50 - query embedding p50) / bare chromadb p50 = "
        f"{res['ratio_retrieve_minus_embedding_to_bare_p50']}x (the bare query is given the vector)"
    )


def print_build(b: dict[str, Any], label: str) -> None:
    say(
        f"  index build, {label}: {b['papers']} papers -> {b['chunks']} chunks ({b['chunks_per_paper']} per paper), "
        f"{b['build_seconds']:.2f} s build ({b['wall_seconds']:.2f} s wall incl. loading), {b['chunks_per_s']} chunks/s"
    )
    if "ratio_index_to_embedding" in b:
        say(f"    ratio indexing chunks/s / raw embedding texts/s = {b['ratio_index_to_embedding']}")
    st = b.get("stages") or {}
    if st:
        say(
            f"    stages (the index run's own figures): embedding {st['embed']:.2f} s "
            f"({b.get('embedding_texts_per_s_during_build')} texts/s, "
            f"{100 * (b.get('embedding_share_of_build') or 0):.0f}% of the build), Chroma writes {st['write']:.2f} s, "
            f"chunking {st['chunk']:.2f} s, copying unchanged {st['copy']:.2f} s, reading stored hashes {st['read_stored']:.2f} s"
        )
    if label.endswith("synthetic abstracts") and b.get("chunks_per_s"):
        projected = 10_000 * b["chunks_per_paper"] / b["chunks_per_s"]
        b["projected_10k_build_seconds"] = r(projected, 0)
        say(f"    at this rate 10,000 abstracts would take ~{projected / 60:.0f} min to index")
    say(
        f"  re-index with nothing changed: {b['reindex_unchanged_seconds']:.2f} s "
        f"({b['reindex_unchanged_embedded_chunks']} chunks re-embedded; the index check itself "
        f"{b['reindex_unchanged_index_seconds']:.2f} s, the rest is loading the papers)"
    )


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


# ---------------------------------------------------------------------------------------
# Chroma server
# ---------------------------------------------------------------------------------------


class ChromaServer:
    def __init__(self, path: Path, log: Path) -> None:
        self.path = path
        self.log = log
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> float:
        import httpx

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


# ---------------------------------------------------------------------------------------
# LLM
# ---------------------------------------------------------------------------------------


def _chat_request(client: Any, url: str, model: str, messages: list[dict], max_tokens: int) -> tuple[float, dict]:
    mark = time.perf_counter()
    response = client.post(
        url, json={"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0}
    )
    response.raise_for_status()
    return time.perf_counter() - mark, response.json()


def _stream_request(client: Any, url: str, model: str, messages: list[dict], max_tokens: int) -> dict[str, Any]:
    mark = time.perf_counter()
    first = last = None
    pieces = 0
    with client.stream(
        "POST", url,
        json={"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0.0, "stream": True},
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            for choice in chunk.get("choices", []):
                if (choice.get("delta") or {}).get("content"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    pieces += 1
    total = time.perf_counter() - mark
    out: dict[str, Any] = {"tokens": pieces, "total_s": r(total, 3)}
    if first is not None:
        out["first_token_s"] = r(first - mark, 3)
        if pieces > 1 and last is not None and last > first:
            out["generated_tokens_per_s"] = r((pieces - 1) / (last - first), 2)
    return out


def measure_llm_throughput(llm: Any, papers: list[Any]) -> dict[str, Any]:
    """Prompt and generation speed, straight against the server (nonces defeat its prompt cache)."""
    import httpx

    url = llm.base_url.rstrip("/") + "/chat/completions"
    out: dict[str, Any] = {}
    context = ""
    for paper in papers:
        if len(context) > 6000:  # ~1,400 model tokens
            break
        context += paper.text + "\n\n"
    with httpx.Client(trust_env=False, timeout=llm.timeout + 60) as client:
        def system() -> dict[str, str]:
            return {"role": "system", "content": f"Session {uuid.uuid4().hex}. You are a helpful assistant."}

        short_t, short = _chat_request(client, url, llm.model, [system(), {"role": "user", "content": "Say hi."}], 1)
        long_t, long = _chat_request(
            client, url, llm.model,
            [system(), {"role": "user", "content": context + "In one word, what field are these abstracts from?"}], 1,
        )
        ps, pl = short.get("usage", {}).get("prompt_tokens"), long.get("usage", {}).get("prompt_tokens")
        out["short_prompt"] = {"prompt_tokens": ps, "seconds": r(short_t, 3)}
        out["long_prompt"] = {"prompt_tokens": pl, "seconds": r(long_t, 3)}
        if pl:
            out["prompt_tokens_per_s_naive"] = r(pl / long_t, 1)
        if pl and ps and long_t > short_t:
            out["prompt_tokens_per_s"] = r((pl - ps) / (long_t - short_t), 1)
        gen = _stream_request(
            client, url, llm.model,
            [system(), {"role": "user", "content": "Count from 1 to 200, separated by commas, and nothing else."}], 64,
        )
        out["generation"] = gen
        out["generated_tokens_per_s"] = gen.get("generated_tokens_per_s")
    return out


def ask_timed(a: Assistant, question: str, server_pid: int | None) -> dict[str, Any]:
    mark = time.perf_counter()
    first = None
    tokens = 0
    final: Answer | None = None
    for event in a.stream(question):
        if isinstance(event, Answer):
            final = event
        else:
            first = first or time.perf_counter()
            tokens += 1
    total = time.perf_counter() - mark
    out: dict[str, Any] = {
        "question": question,
        "measured_first_token_s": r(first - mark, 3) if first else None,
        "measured_total_s": r(total, 3),
        "draft_pieces": tokens,
    }
    if final is not None:
        out["timings"] = {k: r(v, 3) for k, v in final.timings.items()}
        out["refused"] = final.refused
        out["citations"] = len(final.citations)
        out["retrieval_only"] = final.retrieval_only
        out["answer"] = final.text[:160]
        out["prompt_tokens"] = final.prompt_tokens
        gen = final.timings.get("generate")
        if gen and tokens > 1:
            out["answer_pieces_per_s"] = r(tokens / gen, 2)
    if server_pid:
        out["server_rss_after_mib"] = proc_mem(server_pid)["rss_mib"]
    return out


def print_ask(label: str, row: dict[str, Any]) -> None:
    t = row.get("timings", {})
    say(
        f"    {label:<42} first token {t.get('first_token', float('nan')):6.2f} s | total {t.get('total', float('nan')):6.2f} s"
        f" | retrieve {1000 * t.get('retrieve', float('nan')):6.1f} ms | {row['draft_pieces']:3d} tokens"
        + (f" | server RSS {row['server_rss_after_mib']:.0f} MiB" if row.get("server_rss_after_mib") else "")
        + (f" | prompt ~{row['prompt_tokens']} tok" if row.get("prompt_tokens") else "")
        + (" | REFUSED" if row.get("refused") else "")
    )
    say(f"      Q: {row['question'][:100]}")


# ---------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------


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
            from chromadb.api.client import SharedSystemClient

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


def model_limits_section(run: Run) -> None:
    """What the embedded model can do on this machine, measured first and on its own (no other
    work of the benchmark running): every latency later in the report reads as a ratio to these."""
    if run.args.skip_llm:
        return
    from assistant.llm import LLM, LocalServer, ensure_gguf

    m = run.rep.section("model_limits", "Model limits on this machine (embedded model, straight against its server)")
    settings = Settings(llm_backend="local", llm_base_url=None, llm_kept_states_mb=0)
    server = LocalServer(ensure_gguf(settings), settings).start()
    llm = LLM(base_url=server.url, model=server.alias, api_key="not-needed", timeout=settings.llm_timeout, server=server)
    try:
        tp = measure_llm_throughput(llm, load_papers(real_corpus()))
    finally:
        llm.close()
    cpu = run.rep.data.get("machine", {}).get("cpu_model", "unknown CPU")
    m.update({
        "cpu_model": cpu, "threads": settings.llm_threads, "cpu_fallback": server.cpu_fallback,
        "prefill_tokens_per_s": tp.get("prompt_tokens_per_s"), "decode_tokens_per_s": tp.get("generated_tokens_per_s"),
        "model_load_seconds": r(server.load_seconds, 3),
    })
    say(f"  {cpu}, {settings.llm_threads} threads{' (CPU fallback: no extra buffer types)' if server.cpu_fallback else ''}: "
        f"prefill {m['prefill_tokens_per_s']} tokens/s, decode {m['decode_tokens_per_s']} tokens/s, "
        f"model load {m['model_load_seconds']} s")
    say("  (a 500-token prompt then costs about "
        f"{500 / (m['prefill_tokens_per_s'] or float('inf')):.1f} s to read, and 40 generated tokens "
        f"{40 / (m['decode_tokens_per_s'] or float('inf')):.1f} s: read later latencies against these)")


def synthetic_corpus_section(run: Run) -> None:
    run.synth_path = run.ctx.tmp / f"synthetic_{run.n_synth}.jsonl"
    mark = time.perf_counter()
    info = make_synthetic(run.real, run.n_synth, run.args.seed, run.synth_path)
    info["generate_seconds"] = r(time.perf_counter() - mark, 3)
    run.rep.data["synthetic_corpus"] = info


def embedding_section(run: Run) -> None:
    e = run.rep.section("embedding", "Embedding model alone (MiniLM int8 ONNX)")
    base = embedded_settings(run.ctx.tmp / "unused", run.real)
    with run.meter.measure(e):
        mark = time.perf_counter()
        embedder = make_embedder(base)
        load_s = time.perf_counter() - mark
        chunks = [n.text for n in chunk_papers(load_papers(run.real), base)]
        texts = (chunks * (run.args.embed_texts // max(len(chunks), 1) + 1))[: run.args.embed_texts]
        e.update(measure_embedding(embedder, texts, base.embed_batch_size))
    e["model_load_seconds"] = r(load_s, 3)
    e["real_chunks"] = len(chunks)
    say(
        f"  {e['texts']} chunk-sized texts (~{e.get('mean_wordpiece_tokens', '?')} word pieces each), batch {e['batch']}: "
        f"{e['texts_per_s']} texts/s sorted by length (as the indexer does), {e['unsorted_texts_per_s']} texts/s unsorted"
    )
    say(f"  embedder load (ONNX session + tokenizer + sha256 checks): {load_s:.2f} s")
    print_contention(e)
    run.embed_rate = e["texts_per_s"]


def build_and_open(run: Run, settings: Settings, paths: list[Path], label: str, into: dict[str, Any]) -> Assistant:
    """Index `paths`, then open the index as a user's start-up would, timing both."""
    into.update(measure_build(settings, paths, label, run.embed_rate))
    run.rep.snapshot(f"{label} index built")
    assistant_obj, st = measure_startup(settings)
    run.ctx.keep(assistant_obj)
    st["breakdown"] = startup_breakdown(settings)
    if not run.args.no_fresh_process:
        st["fresh_process"] = fresh_process_startup(settings)
    into["startup"] = st
    return assistant_obj


def real_index_section(run: Run) -> None:
    i = run.rep.section("index", "Index build (embedded Chroma)")
    i["real"] = {}
    with run.meter.measure(i["real"]):
        run.a_real = build_and_open(run, embedded_settings(run.ctx.tmp / "store-real", run.real), run.real, "real", i["real"])
    print_build(i["real"], f"{len(run.real)} files")
    print_startup(i["real"]["startup"], f"{len(run.a_real.papers)}-paper")
    print_contention(i["real"])
    run.rep.snapshot("real index open")


def synthetic_index_section(run: Run) -> None:
    assert run.synth_path is not None
    i = run.rep.data["index"]
    info = run.rep.data["synthetic_corpus"]
    say(
        f"  synthetic corpus: {run.n_synth} abstracts (seed {run.args.seed}), mean {info['mean_chars']} chars "
        f"(real: {info['real_mean_chars']}), {info['file_mib']} MiB, generated in {info['generate_seconds']} s"
    )
    settings = embedded_settings(run.ctx.tmp / "store-synthetic", [run.synth_path])
    mark = time.perf_counter()
    papers = load_papers([run.synth_path])
    load_s = time.perf_counter() - mark
    mark = time.perf_counter()
    chunks = len(chunk_papers(papers, settings))
    chunk_s = time.perf_counter() - mark
    del papers
    projected = chunks / run.embed_rate if run.embed_rate else None
    i["synthetic_preflight"] = {
        "load_seconds": r(load_s, 3), "chunk_seconds": r(chunk_s, 3), "chunks": chunks,
        "projected_embedding_seconds": r(projected, 1),
    }
    say(
        f"  synthetic: loading {load_s:.2f} s, chunking {chunk_s:.2f} s -> {chunks} chunks; "
        f"projected embedding time at the raw rate: {(projected or 0) / 60:.1f} min"
    )
    i["synthetic"] = {}
    with run.meter.measure(i["synthetic"]):
        run.a_syn = build_and_open(run, settings, [run.synth_path], "synthetic", i["synthetic"])
    print_build(i["synthetic"], f"{run.n_synth} synthetic abstracts")
    print_startup(i["synthetic"]["startup"], f"{len(run.a_syn.papers)}-paper")
    print_contention(i["synthetic"])
    run.rep.snapshot("synthetic index open")


def retrieval_section(run: Run) -> None:
    assert run.a_real is not None and run.a_syn is not None
    i = run.rep.data["index"]
    rt = run.rep.section("retrieval", "Retrieval latency (embedded Chroma)")
    with run.meter.measure(rt):
        rt["real"] = measure_retrieval(run.a_real, run.questions)
        rt["synthetic"] = measure_retrieval(run.a_syn, run.questions)
    print_retrieval(rt["real"], f"{len(run.a_real.papers)} papers / {i['real']['chunks']} chunks")
    print_retrieval(rt["synthetic"], f"{len(run.a_syn.papers)} papers / {i['synthetic']['chunks']} chunks")
    print_contention(rt)
    # The synthetic assistant is no longer needed: free its BM25 index and nodes.
    run.ctx.assistants.remove(run.a_syn)
    run.a_syn = None
    run.rep.snapshot("after retrieval")


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


def llm_section(run: Run) -> None:
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    lm = run.rep.section("llm", "Local LLM (llama.cpp server)")
    with run.meter.measure(lm):
        run.server_pid = measure_llm(run.a_real, lm, run.questions)
    print_contention(lm)


DEV_TYPES = ("fact", "method", "paraphrase", "which_paper", "multi_paper", "topic", "comparison", "unanswerable",
             "near_miss", "follow_up", "chinese")


def dev_questions(per_type: int) -> list[dict[str, Any]]:
    """`per_type` questions of every type, spread over each type's questions in eval/questions.jsonl
    (the same ones in every run, so runs compare)."""
    rows = [json.loads(line) for line in QUESTIONS_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    picked: list[dict[str, Any]] = []
    for kind in DEV_TYPES:
        of_kind = [q for q in rows if q["type"] == kind]
        step = max(len(of_kind) // per_type, 1)
        picked += of_kind[::step][:per_type]
    return picked


def timed_events(a: Assistant, question: str, history: list[dict[str, str]]) -> dict[str, Any]:
    """What a user waits for, measured where a user sees it: the papers being read (`Evidence`),
    the first word of the answer, the whole answer; with the size of the prompt the model read."""
    mark = time.perf_counter()
    evidence_s = first_s = None
    final: Answer | None = None
    for event in a.events(question, history=history):
        now = time.perf_counter() - mark
        if isinstance(event, Evidence):
            evidence_s = evidence_s if evidence_s is not None else now  # the first papers on screen
        elif isinstance(event, str):
            first_s = first_s if first_s is not None else now
        else:
            final = event
    assert final is not None
    return {
        "evidence_s": r(evidence_s, 3), "first_token_s": r(first_s, 3), "total_s": r(time.perf_counter() - mark, 3),
        "prompt_tokens": final.prompt_tokens, "status": final.status,
        "condense_s": r(final.timings.get("condense"), 3),
    }


def seconds_stats(values: list[float | None]) -> dict[str, Any]:
    got = [v for v in values if v is not None]
    return {"n": len(got), "p50_s": r(pct(got, 50), 3) if got else None, "p95_s": r(pct(got, 95), 3) if got else None}


def fmt_s(stats: dict[str, Any]) -> str:
    return f"p50 {stats['p50_s']:.2f} s, p95 {stats['p95_s']:.2f} s (n={stats['n']})" if stats["n"] else "n/a"


def new_model_session(run: Run, warm_up: Callable[[], Any]) -> None:
    """Stop the model server and start a new one, as a new session meets it: nothing in its RAM,
    the kept states on disk. `warm_up` has it read its fixed instructions; the memory section reads
    the new server's peak."""
    assert run.a_real is not None
    run.a_real.close()
    warm_up()
    run.server_pid = run.a_real.llm.server.pid if run.a_real.llm.server is not None else run.server_pid


def answer_latency_section(run: Run) -> None:
    """Time to evidence, to the first token and to the whole answer over a fixed dev set of every type."""
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    al = run.rep.section("answer_latency", "Answers as a user waits for them (dev set, every question type)")
    questions = dev_questions(run.args.dev_per_type)
    def ask_all() -> list[dict[str, Any]]:
        assert run.a_real is not None
        return [timed_events(run.a_real, q["question"], q.get("history") or []) | {"id": q["id"], "type": q["type"]}
                for q in questions]

    with run.meter.measure(al):
        first = ask_all()
        # Each question's first paper is now on disk, kept when it was read above (or by `assistant warm`).
        new_model_session(run, lambda: run.a_real.warm_up(background=False))
        rows = ask_all()
    for row in rows:
        note(f"{row['id']} {row['type']}: evidence {row['evidence_s']} s, first token {row['first_token_s']} s, "
             f"total {row['total_s']} s, prompt {row['prompt_tokens']} tokens")
    al["questions"], al["questions_first_reading"] = rows, first
    say("  in a new session, each question's first paper kept on disk (read once before, or by `assistant warm`):")
    say(f"  {'type':<13} {'n':>2}  {'evidence p50':>12}  {'first token p50':>15}  {'answer p50':>10}  {'prompt tokens':>13}")
    for kind in DEV_TYPES:
        of_kind = [x for x in rows if x["type"] == kind]
        if not of_kind:
            continue
        ev, ft, tot = (seconds_stats([x[key] for x in of_kind]) for key in ("evidence_s", "first_token_s", "total_s"))
        tokens = [x["prompt_tokens"] for x in of_kind if x["prompt_tokens"]]
        say(
            f"  {kind:<13} {len(of_kind):>2}  {ev['p50_s'] if ev['n'] else '–':>12}  "
            f"{ft['p50_s'] if ft['n'] else '–':>15}  {tot['p50_s']:>10}  "
            f"{round(sum(tokens) / len(tokens)) if tokens else '–':>13}"
        )
    single = [x for x in rows if x["type"] not in ("follow_up", "chinese")]
    rewritten = [x for x in rows if x["type"] in ("follow_up", "chinese")]
    al["evidence"] = seconds_stats([x["evidence_s"] for x in rows])
    al["first_token_single_turn"] = seconds_stats([x["first_token_s"] for x in single])
    al["first_token_follow_up_and_chinese"] = seconds_stats([x["first_token_s"] for x in rewritten])
    al["answer"] = seconds_stats([x["total_s"] for x in rows])
    al["first_reading"] = {
        "first_token_single_turn": seconds_stats([x["first_token_s"] for x in first if x["type"] not in ("follow_up", "chinese")]),
        "first_token_follow_up_and_chinese": seconds_stats([x["first_token_s"] for x in first if x["type"] in ("follow_up", "chinese")]),
        "answer": seconds_stats([x["total_s"] for x in first]),
    }
    with_prompt = [x["prompt_tokens"] for x in rows if x["prompt_tokens"]]
    al["mean_prompt_tokens"] = round(sum(with_prompt) / len(with_prompt)) if with_prompt else None
    say(f"  time to evidence (papers on screen):          {fmt_s(al['evidence'])}")
    say(f"  time to first token, single-turn questions:   {fmt_s(al['first_token_single_turn'])}")
    say(f"  time to first token, follow-ups and Chinese:  {fmt_s(al['first_token_follow_up_and_chinese'])}")
    say(f"  whole answer:                                 {fmt_s(al['answer'])}")
    fr = al["first_reading"]
    say(f"  the same questions when their papers were read for the first time: first token single-turn "
        f"{fmt_s(fr['first_token_single_turn'])}; follow-ups and Chinese {fmt_s(fr['first_token_follow_up_and_chinese'])}; "
        f"whole answer {fmt_s(fr['answer'])}")
    say(f"  prompt per answer: {al['mean_prompt_tokens']} tokens on average (tiktoken count; the instructions and the "
        "first paper's abstract among them come from the kept state)")
    print_contention(al)


def first_question_section(run: Run) -> None:
    """The first question after start-up, as `assistant serve` meets it: a fresh assistant loads the
    model in the background and reads the fixed instructions; the question comes once it is ready."""
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    fq = run.rep.section("first_question", "The first question after start-up (serve: warm start)")
    settings = run.a_real.settings
    if run.server_pid:
        run.server_memory = proc_mem(run.server_pid)
    run.a_real.close()  # its model server must not share the cores with the new one
    questions = [q for q in dev_questions(3) if q["type"] == "fact"]
    with run.meter.measure(fq):
        mark = time.perf_counter()
        fresh = run.ctx.keep(Assistant.from_settings(settings))
        opened = time.perf_counter() - mark
        thread = fresh.warm_up()
        assert thread is not None
        thread.join()
        ready = time.perf_counter() - mark
        first = timed_events(fresh, questions[0]["question"], [])
        second = timed_events(fresh, questions[1]["question"], [])
    fq.update({"open_s": r(opened, 3), "ready_s": r(ready, 3), "warm_error": fresh.warm_error,
               "first": first, "second": second})
    if first["first_token_s"] and second["first_token_s"]:
        fq["first_minus_second_s"] = r(first["first_token_s"] - second["first_token_s"], 3)
    say(f"  open {opened:.2f} s; model loaded and the instructions read: ready {ready:.2f} s after start")
    say(f"  first question: first token {first['first_token_s']} s, answer {first['total_s']} s "
        f"({first['prompt_tokens']} prompt tokens)")
    say(f"  next question:  first token {second['first_token_s']} s, answer {second['total_s']} s "
        f"({second['prompt_tokens']} prompt tokens)")
    if "first_minus_second_s" in fq:
        say(f"  first question's first token minus the next one's: {fq['first_minus_second_s']:+.2f} s")
    print_contention(fq)
    fresh.close()


TABLE_PAPERS = ["Vegas", "EchoAttention", "ISA", "ARM", "UPipe", "Skill-MoE"]
TABLE_COLUMNS = ["What speedup does it report?", "Which baseline is it compared with?"]


def timed_table(a: Assistant, papers: list[str], columns: list[str]) -> dict[str, Any]:
    """Fill one table through `Assistant.table_events`: seconds to the first cell and to the whole table."""
    mark = time.perf_counter()
    first = None
    table = None
    for event in a.table_events(columns, papers=papers):
        if first is None and type(event).__name__ == "Cell":
            first = time.perf_counter() - mark
        if type(event).__name__ == "Table":
            table = event
    assert table is not None
    cells = [c for line in table.cells for c in line]
    return {"first_cell_s": r(first, 3), "total_s": r(time.perf_counter() - mark, 3), "cells": len(cells),
            "stated": sum(c.status == "stated" for c in cells), "failed": sum(c.status == "failed" for c in cells)}


def table_section(run: Run) -> None:
    """A 6-paper x 2-question table on the embedded model: read cold, then again (the papers' prompts cached)."""
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    tb = run.rep.section("table", "Ask across papers: a 6-paper x 2-question table")
    with run.meter.measure(tb):
        mark = time.perf_counter()
        rows, _ = run.a_real.tables.topic_rows("KV cache and long-context LLM inference")
        tb["topic_rows_s"] = r(time.perf_counter() - mark, 3)
        tb["topic_rows"] = len(rows)
        run.a_real.tables.warm_up()
        tb["cold"] = timed_table(run.a_real, TABLE_PAPERS, TABLE_COLUMNS)
        # A table reads its rows' whole abstracts only when they are kept; `assistant warm` (or reading
        # ahead while idle) keeps them, as here.
        mark = time.perf_counter()
        for paper in resolve_papers(TABLE_PAPERS, run.a_real.papers):
            run.a_real.tables.keep(paper)
        tb["keep_rows_s"] = r(time.perf_counter() - mark, 3)
        new_model_session(run, run.a_real.tables.warm_up)  # the papers' rows are kept on disk
        tb["kept"] = timed_table(run.a_real, TABLE_PAPERS, TABLE_COLUMNS)
        tb["again"] = timed_table(run.a_real, TABLE_PAPERS, TABLE_COLUMNS)
    say(f"  rows by topic: {tb['topic_rows']} papers in {tb['topic_rows_s']} s (retrieval, topic evidence, the cross-encoder and the model's odds for the likely ones)")
    say(f"  then their rows kept, as `assistant warm` does: {tb['keep_rows_s']} s for {len(TABLE_PAPERS)} papers")
    for key, label in (("cold", "papers read for the first time (the sentences closest to the columns)"),
                       ("kept", "a new session, the papers kept on disk (read before, or `assistant warm`)"),
                       ("again", "the same table again in that session")):
        t = tb[key]
        say(f"  {label}: first cell {t['first_cell_s']} s, whole table {t['total_s']} s "
            f"({t['stated']} of {t['cells']} cells stated, {t['failed']} failed)")
    print_contention(tb)


def topics_section(run: Run) -> None:
    """Grouping the collection into topics, from the stored vectors, at the real and the synthetic size
    (and at 10,000 papers: jittered copies of the synthetic vectors when the synthetic index is smaller)."""
    import numpy as np

    from assistant.topics import cluster, group_papers, label_groups, paper_matrix

    assert run.a_real is not None and run.a_syn is not None
    tp = run.rep.section("topics", "Topics of the collection (k-means + class-based TF-IDF labels)")
    for label, a in (("real", run.a_real), ("synthetic", run.a_syn)):
        mark = time.perf_counter()
        vectors = a.store.paper_vectors()
        read_s = time.perf_counter() - mark
        mark = time.perf_counter()
        groups = group_papers(a.papers, vectors)
        tp[label] = {"papers": len(a.papers), "groups": len(groups), "read_vectors_s": r(read_s, 3),
                     "group_s": r(time.perf_counter() - mark, 3)}
        say(f"  {len(a.papers)} papers: {len(groups)} topics in {tp[label]['group_s']} s "
            f"(+ {read_s:.2f} s reading the stored vectors); largest: {groups[0].label!r}")
    if len(run.a_syn.papers) < 10_000:
        kept, matrix = paper_matrix(run.a_syn.papers, run.a_syn.store.paper_vectors())
        rng = np.random.default_rng(run.args.seed)
        reps = -(-10_000 // len(kept))
        big = np.repeat(matrix, reps, axis=0)[:10_000] + rng.normal(0, 0.02, (10_000, matrix.shape[1])).astype(np.float32)
        big /= np.linalg.norm(big, axis=1, keepdims=True)
        texts = ([p.text for p in kept] * reps)[:10_000]
        mark = time.perf_counter()
        labels = cluster(big, run.args.seed)
        label_groups(texts, labels)
        tp["10000_jittered"] = {"papers": 10_000, "groups": len(set(labels.tolist())), "group_s": r(time.perf_counter() - mark, 3)}
        say(f"  10,000 papers (jittered copies of the synthetic vectors): {tp['10000_jittered']['groups']} topics in "
            f"{tp['10000_jittered']['group_s']} s")


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


SECTIONS: list[Callable[[Run], None]] = [
    machine_section, model_limits_section, synthetic_corpus_section, embedding_section, real_index_section, synthetic_index_section,
    topics_section, retrieval_section, chroma_server_section, llm_section, answer_latency_section, table_section,
    first_question_section, memory_section,
]


def run(args: argparse.Namespace, rep: Report, ctx: Context) -> None:
    state = Run(
        args=args, rep=rep, ctx=ctx, meter=CpuMeter(ctx.child_pids), real=real_corpus(),
        questions=[q["question"] for q in load_questions(args.queries)],
        n_synth=args.n_synthetic if args.n_synthetic is not None else (1000 if args.quick else 10_000),
    )
    rep.snapshot("after imports")
    for section in SECTIONS:
        section(state)


def measure_llm(a: Assistant, lm: dict[str, Any], questions: list[str]) -> int | None:
    """Model load, TTFT through assistant.stream (cold, new, repeated), raw prompt/generation speed."""
    mark = time.perf_counter()
    llm = a.llm
    connect_s = time.perf_counter() - mark
    server = getattr(llm, "server", None)
    server_pid = server.pid if server is not None else None
    lm.update({
        "name": llm.name,
        "connect_seconds": r(connect_s, 3),
        "model_load_seconds": r(server.load_seconds, 3) if server is not None else None,
        "server_pid": server_pid,
        "server_rss_after_load_mib": proc_mem(server_pid)["rss_mib"] if server_pid else None,
    })
    say(
        f"  {llm.name}: model load {lm['model_load_seconds']} s (connect incl. checks {connect_s:.2f} s), "
        f"server pid {server_pid}, RSS after load {lm['server_rss_after_load_mib']} MiB"
    )

    def ask(question: str, label: str) -> dict[str, Any]:
        row = ask_timed(a, question, server_pid) | {"label": label}
        print_ask(label, row)
        return row

    pool = [q for q in load_questions(200) if q.get("type") == "fact"] or [{"question": q} for q in questions]
    picks = [pool[0]["question"], pool[len(pool) // 3]["question"], pool[2 * len(pool) // 3]["question"]]
    fourth = pool[len(pool) // 2]["question"] if len(pool) > 3 else questions[-1]
    say("  time to first token through assistant.stream (k=5, context papers in the prompt):")
    asks = [ask(picks[0], "question 1 (cold: nothing cached)")]
    asks += [ask(q, f"question {n} (new; same instruction prefix)") for n, q in enumerate(picks[1:], start=2)]
    asks.append(ask(picks[0], "question 1 repeated (after 2 others)"))

    say("  throughput, straight against the server (a unique nonce first, so nothing comes from its cache):")
    tp = measure_llm_throughput(llm, a.papers)
    lm["throughput"] = tp
    say(
        f"    prompt: {tp['long_prompt']['prompt_tokens']} tokens in {tp['long_prompt']['seconds']:.2f} s vs "
        f"{tp['short_prompt']['prompt_tokens']} tokens in {tp['short_prompt']['seconds']:.2f} s (max_tokens=1) "
        f"-> {tp.get('prompt_tokens_per_s')} prompt tokens/s (naive {tp.get('prompt_tokens_per_s_naive')})"
    )
    g = tp["generation"]
    say(
        f"    generation: {g['tokens']} tokens, first after {g.get('first_token_s')} s, total {g['total_s']:.2f} s "
        f"-> {tp.get('generated_tokens_per_s')} generated tokens/s"
    )
    if server_pid:
        tp["server_rss_after_mib"] = proc_mem(server_pid)["rss_mib"]
    asks.append(ask(fourth, "question 4 (new, after unrelated prompts)"))
    lm["questions"] = asks
    cold = asks[0].get("timings", {}).get("first_token")
    warm = [x.get("timings", {}).get("first_token") for x in asks[1:3]]
    again = asks[3].get("timings", {}).get("first_token")
    if cold and again:
        lm["ttft_repeat_over_cold"] = r(again / cold, 3)
        say(
            f"  ttft: cold {cold:.2f} s, new questions {', '.join(f'{w:.2f}' for w in warm if w)} s, "
            f"repeated {again:.2f} s (ratio repeated/cold {lm['ttft_repeat_over_cold']}); "
            f"answer totals {', '.join(str(x.get('timings', {}).get('total')) for x in asks)} s"
        )
    if server_pid:
        lm["server_memory"] = proc_mem(server_pid)
        say(
            "  server RSS after load and each request: "
            + " -> ".join(
                str(x) for x in [lm["server_rss_after_load_mib"]] + [q.get("server_rss_after_mib") for q in asks[:4]]
                + [tp.get("server_rss_after_mib"), asks[4].get("server_rss_after_mib")]
            )
            + " MiB"
        )
    return server_pid


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval/bench.py",
        description=(
            "Performance benchmark of the reading assistant: machine, MiniLM embedding throughput, index build "
            "(57 real + N synthetic abstracts), re-index and start-up, retrieval latency (embedded and Chroma server), "
            "local LLM load / prompt and generation speed / time to first token, and peak memory. Prints a report "
            "and writes it as JSON to eval/reports/bench-<timestamp>.json."
        ),
        epilog="On a shared machine compare ratios within one run (e.g. retrieve/bare p50), not absolute times.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small run to check the set-up: 1,000 synthetic abstracts")
    parser.add_argument(
        "--n-synthetic", type=int, default=None, metavar="N",
        help="synthetic abstracts to index (default 10,000; 1,000 with --quick)",
    )
    parser.add_argument("--skip-llm", action="store_true", help="skip the local LLM section (no model load)")
    parser.add_argument("--skip-server", action="store_true", help="skip the Chroma server-mode section")
    parser.add_argument("--queries", type=int, default=50, help="retrieval queries (from eval/questions.jsonl)")
    parser.add_argument(
        "--dev-per-type", type=int, default=2, metavar="N",
        help="questions of each type for the answer-latency section (11 types)",
    )
    parser.add_argument("--embed-texts", type=int, default=1024, help="texts for the embedding-throughput test")
    parser.add_argument("--seed", type=int, default=2026, help="seed of the synthetic corpus")
    parser.add_argument(
        "--no-fresh-process", action="store_true", help="skip timing start-up in a fresh interpreter (import + open)"
    )
    parser.add_argument("--report-dir", type=Path, default=REPORT_DIR, help="where the JSON report is written")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.n_synthetic is not None and args.n_synthetic < 1:
        raise SystemExit("--n-synthetic must be at least 1")
    if args.quick:
        args.embed_texts = min(args.embed_texts, 512)

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    rep = Report(args)
    ctx = Context()
    started = time.perf_counter()
    code = 0
    say(f"Benchmark of the reading assistant, {time.strftime('%Y-%m-%d %H:%M:%S')} (temp folder {ctx.tmp})")
    try:
        run(args, rep, ctx)
        rep.data["complete"] = True
    except KeyboardInterrupt:
        say("\nInterrupted: cleaning up and writing a partial report.")
        rep.data["interrupted"] = True
        code = 130
    except Exception as exc:
        rep.data["error"] = f"{type(exc).__name__}: {exc}"
        say(f"\nFAILED: {type(exc).__name__}: {exc}")
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the clean-up
        try:
            for line in ctx.cleanup():
                note(line)
            rep.data["wall_seconds"] = r(time.perf_counter() - started, 1)
            path = rep.write(args.report_dir)
            say()
            say(f"Wall time {rep.data['wall_seconds']:.1f} s. Report written to {path}")
        finally:
            signal.signal(signal.SIGINT, previous)
    return code


if __name__ == "__main__":
    sys.exit(main())
