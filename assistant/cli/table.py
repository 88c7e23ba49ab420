"""`assistant table`: the same questions asked of many papers, one row per paper, one column per
question, a quote in every cell; printed as Markdown or written as CSV / Markdown files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..text import shorten
from .common import add_paper_choice, open_assistant, settings_from_args, split_commas


def _write(text: str, target: str) -> None:
    """Write `text` to a file, or to standard output for "-"."""
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text, encoding="utf-8")
        print(f"Wrote {target}", file=sys.stderr)


def cmd_table(args: argparse.Namespace) -> int:
    """`assistant table`: ask the column questions of every chosen paper; print (or write) the table."""
    from tqdm import tqdm

    from ..table import check_columns, to_csv, to_markdown
    from ..types import Cell, Row, Table

    if not (args.topic or args.papers or args.source):
        print("error: say which papers: --topic TEXT, --papers ID[,ID…] or --source FILE", file=sys.stderr)
        return 2
    settings = settings_from_args(args)
    columns = check_columns(args.column, settings.max_question_tokens)  # as the table asks them (blank ones dropped)
    assistant = open_assistant(settings)
    bar = None
    table = None
    rows: list[Any] = []
    try:
        events = assistant.table_events(columns, papers=split_commas(args.papers) or None, topic=args.topic,
                                        source=args.source)
        if args.topic and not args.papers:
            print(f"Choosing the papers on “{shorten(args.topic, 80)}”…", file=sys.stderr)
        for event in events:
            if isinstance(event, Row):
                # The bar starts with the rows, before the first cell is filled, so its count and
                # rate include that cell; each row adds its cells to the total.
                rows.append(event)
                if bar is None:
                    bar = tqdm(total=len(columns), unit="cell", desc="Filling the table", file=sys.stderr)
                else:
                    bar.total = len(rows) * len(columns)
                    bar.refresh()
            elif isinstance(event, Cell) and bar is not None:
                bar.update(1)
            elif isinstance(event, Table):
                table = event
    finally:
        if bar is not None:
            bar.close()
        assistant.close()
    assert table is not None
    for notice in table.notices:
        print(f"note: {notice}", file=sys.stderr)
    if table.related:
        print("Possibly related (not rows): " + "; ".join(f"{r.paper.shown} ({r.paper.label})" for r in table.related),
              file=sys.stderr)
    if not table.rows:
        print("No table: try a broader topic, or pick papers from `assistant papers --topics`.", file=sys.stderr)
        return 1
    if args.csv:
        _write(to_csv(table), args.csv)
    if args.markdown:
        _write(to_markdown(table), args.markdown)
    if args.json:
        print(json.dumps(table.to_json(), indent=1, ensure_ascii=False))
    elif not (args.csv == "-" or args.markdown == "-"):
        print(to_markdown(table), end="")
    filled = sum(c.status == "stated" for line in table.cells for c in line)
    rows, columns = len(table.rows), len(table.columns)
    print(f"{rows} paper{'' if rows == 1 else 's'} x {columns} question{'' if columns == 1 else 's'}: {filled} "
          f"cell{'' if filled == 1 else 's'} answered from the abstracts, the rest not stated, "
          f"in {table.timings.get('total', 0):.1f} s.", file=sys.stderr)
    failed = any(c.status == "failed" for line in table.cells for c in line)
    return 3 if failed else 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `table`."""
    p = sub.add_parser(
        "table", parents=[common], help="ask the same questions of many papers: a table with a quote in every cell",
        description="One row per paper (chosen by --topic, --papers or --source), one column per -c question. Each "
        "cell is a short answer with the verbatim sentence of the abstract it comes from, or 'not stated in the "
        "abstract'. Prints a Markdown table; --csv / --markdown write files ('-' for standard output). "
        "Exit code 3: the LLM failed for some cells.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='example:\n  assistant table --topic "KV cache" -c "What speedup does it report?" -c "Compared with what?" --csv kv.csv',
    )
    p.add_argument("-c", "--column", action="append", required=True, metavar="QUESTION",
                   help="a column question, asked of every paper (repeat for more columns)")
    rows = p.add_mutually_exclusive_group()
    rows.add_argument("--topic", help="the papers on this topic (found like a 'which papers are about …' question)")
    add_paper_choice(rows)
    p.add_argument("--csv", metavar="FILE", help="write the table as CSV (answer and quote columns per question)")
    p.add_argument("--markdown", metavar="FILE", help="write the table as Markdown, with the quotes under it")
    p.add_argument("--json", action="store_true", help="print the whole Table as JSON")
    p.set_defaults(run=cmd_table)
