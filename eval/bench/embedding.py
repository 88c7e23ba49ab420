"""The embedding model alone: MiniLM's throughput on chunk-sized texts, the rate the index build
is read against."""

from __future__ import annotations

import time
from typing import Any

from assistant.chunk import chunk_papers
from assistant.embed import make_embedder
from assistant.load import load_papers

from .measure import print_contention, r, say
from .state import Run, embedded_settings


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
    # Word pieces as the model reads them (its own tokenizer: after truncation, without padding).
    counts = [sum(e.attention_mask) for e in embedder._tokenizer.encode_batch(texts[:256])]
    out["mean_wordpiece_tokens"] = round(sum(counts) / len(counts), 1)
    return out


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
