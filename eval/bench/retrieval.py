"""Retrieval latency: `Assistant.retrieve` and its parts against Chroma's own text query and a
bare Chroma query, per question, at the real and the synthetic size."""

from __future__ import annotations

import time
from typing import Any

from assistant.api import Assistant

from .measure import fmt_ms, print_contention, r, say, stats_ms
from .state import Run


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
        name: [] for name in ("retrieve", *parts, "chroma_text_query", "bare_chroma")
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
