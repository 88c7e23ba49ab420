"""Index build on embedded Chroma: the real corpus and a synthetic one (generated first), each
built, re-indexed with nothing changed, then opened as a user's start-up would."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assistant.api import Assistant, reindex
from assistant.chunk import chunk_papers
from assistant.config import Settings
from assistant.load import load_papers

from .inputs import make_synthetic
from .measure import note, print_contention, r, say
from .startup import fresh_process_startup, measure_startup, print_startup, startup_breakdown
from .state import Run, embedded_settings


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


def synthetic_corpus_section(run: Run) -> None:
    run.synth_path = run.ctx.tmp / f"synthetic_{run.n_synth}.jsonl"
    mark = time.perf_counter()
    info = make_synthetic(run.real, run.n_synth, run.args.seed, run.synth_path)
    info["generate_seconds"] = r(time.perf_counter() - mark, 3)
    run.rep.data["synthetic_corpus"] = info


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
