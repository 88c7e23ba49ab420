"""Ask across papers: a 6-paper x 2-question table filled on the embedded model, read cold, then
in a new session with the papers kept on disk, then again."""

from __future__ import annotations

import time
from typing import Any

from assistant.api import Assistant
from assistant.table import resolve_papers

from .measure import print_contention, r, say
from .state import Run, new_model_session

TABLE_PAPERS = ["Vegas", "EchoAttention", "ISA", "ARM", "UPipe", "Skill-MoE"]
TABLE_COLUMNS = ["What speedup does it report?", "Which baseline is it compared with?"]


def read_table_instructions(a: Assistant) -> None:
    """Have the model read the table instructions once (kept in its prompt cache), as a table's first
    cell would: the cold figures then measure the papers, not the instructions."""
    a.llm.chat([{"role": "system", "content": a.engine.prompts.table_system.format()},
                {"role": "user", "content": "Ready?"}], max_tokens=1)


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
        rows, _ = run.a_real.topic_rows("KV cache and long-context LLM inference")
        tb["topic_rows_s"] = r(time.perf_counter() - mark, 3)
        tb["topic_rows"] = len(rows)
        read_table_instructions(run.a_real)
        tb["cold"] = timed_table(run.a_real, TABLE_PAPERS, TABLE_COLUMNS)
        # A table reads its rows' whole abstracts only when they are kept; `assistant warm` (or reading
        # ahead while idle) keeps them, as here.
        mark = time.perf_counter()
        for paper in resolve_papers(TABLE_PAPERS, run.a_real.papers):
            run.a_real.tables.keep(paper)
        tb["keep_rows_s"] = r(time.perf_counter() - mark, 3)
        new_model_session(run, lambda: read_table_instructions(run.a_real))  # the papers' rows are kept on disk
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
