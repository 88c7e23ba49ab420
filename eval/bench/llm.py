"""The local language model: its limits on this machine (prompt and generation speed straight
against its server, measured first and alone), then model load, time to first token through
`Assistant.stream` and the server's memory."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
from assistant.api import Assistant
from assistant.config import Settings
from assistant.load import load_papers
from assistant.types import Answer

from .inputs import load_questions, real_corpus
from .measure import print_contention, proc_mem, r, say
from .state import Run


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


def model_limits_section(run: Run) -> None:
    """What the embedded model can do on this machine, measured first and on its own (no other
    work of the benchmark running): every latency later in the report reads as a ratio to these."""
    if run.args.skip_llm:
        return
    # Imported here: a run with --skip-llm never loads the model's client.
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


def llm_section(run: Run) -> None:
    if run.args.skip_llm:
        return
    assert run.a_real is not None
    lm = run.rep.section("llm", "Local LLM (llama.cpp server)")
    with run.meter.measure(lm):
        run.server_pid = measure_llm(run.a_real, lm, run.questions)
    print_contention(lm)
