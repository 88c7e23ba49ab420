"""Chroma in server mode: a `chroma run` started on a free local port, the bundled abstracts
indexed, opened and queried through it over HTTP, then the server stopped by pid."""

from __future__ import annotations

from assistant.config import Settings

from .chroma_process import CHROMA_BIN, ChromaServer
from .indexing import measure_build, print_build
from .measure import print_contention, proc_mem, r, say
from .retrieval import measure_retrieval, print_retrieval
from .startup import measure_startup, print_startup, startup_breakdown
from .state import Run


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
