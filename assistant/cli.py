"""Command line: a thin layer over the Python API (`assistant --help`).

Every subcommand lives here (index, papers, retrieve, ask, chat, table, serve, eval), and
`settings_from_args` is the one place flags become a `Settings`. Settings come from
`ASSISTANT_*` environment variables and the flags below; errors are turned into one readable
line and a non-zero exit code here, and nowhere else.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Settings
from .errors import AssistantError
from .text import clean_markup, shorten
from .types import Evidence

EXAMPLES = """examples:
  assistant index                      build or update the index of the bundled ICML 2026 abstracts
  assistant index my_papers.jsonl --rebuild
  assistant papers                     list the indexed papers
  assistant retrieve "Which method reaches 5M tokens of context?"
  assistant ask "What speedup does Vegas achieve over vLLM?"
  assistant chat                       interactive chat in the terminal
  assistant table --topic "KV cache" -c "What speedup?" -c "Compared with what?"
                                       one question per column, one paper per row, a quote per cell
  assistant warm                       the model reads every paper once: later questions and tables start at once
  assistant serve                      the chat UI on http://127.0.0.1:7860
  assistant eval --retrieval-only --check   the grounding eval against its baseline
environment: every setting is also an ASSISTANT_* variable, e.g. ASSISTANT_CHROMA_HOST,
ASSISTANT_LLM_BASE_URL, ASSISTANT_LLM_MODEL (see README)."""


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings of one command: `ASSISTANT_*` variables, overridden by the flags given."""
    overrides: dict[str, Any] = {}
    for name in ("index_dir", "chroma_host", "chroma_port"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def progress_bar() -> Callable[[int, int], None]:
    from tqdm import tqdm

    bar: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in bar:
            bar["bar"] = tqdm(total=total, unit="chunk", desc="Embedding", file=sys.stderr, disable=total == 0)
        bar["bar"].n = done
        bar["bar"].refresh()
        if done >= total:
            bar["bar"].close()

    return update


def _open(settings: Settings) -> Any:
    from .api import Assistant

    return Assistant.from_settings(settings, notify=lambda m: print(m, file=sys.stderr), progress=progress_bar())


def cmd_index(args: argparse.Namespace) -> int:
    from .api import reindex

    report = reindex(settings_from_args(args), [Path(p) for p in args.paths] or None, args.rebuild, progress=progress_bar())
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"Indexed {report.papers} papers, {report.chunks} chunks "
        f"({report.embedded_papers} papers / {report.embedded_chunks} chunks embedded, "
        f"{report.deleted_chunks} stale chunks removed) in {report.seconds:.1f} s."
    )
    return 0


def cmd_papers(args: argparse.Namespace) -> int:
    assistant = _open(settings_from_args(args))
    if args.topics:
        groups = assistant.topic_groups()
        if args.json:
            print(json.dumps([{"label": g.label, "terms": list(g.terms), "papers": [p.to_json() for p in g.papers]}
                              for g in groups], indent=1, ensure_ascii=False))
            return 0
        for group in groups:
            print(f"\n{group.label} ({len(group.papers)} papers)")
            for paper in group.papers:
                print(f"  {paper.id:28} {paper.shown[:60]}")
        print(f"\n{len(groups)} topics; a table from one: assistant table --papers ID,ID,… -c QUESTION", file=sys.stderr)
        return 0
    if args.json:
        print(json.dumps([p.to_json() for p in assistant.papers], indent=1, ensure_ascii=False))
        return 0
    width = min(50, max(len(p.shown) for p in assistant.papers))
    for paper in assistant.papers:
        print(f"{paper.id:28} {paper.shown[:width]:{width}}  {paper.label}")
    print(f"{len(assistant.papers)} papers", file=sys.stderr)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    assistant = _open(settings_from_args(args))
    hits = assistant.retrieve(args.question, k=args.k, source=args.source)
    if args.json:
        rows = [
            {"rank": i, "paper": h.paper.to_json(), "score": h.score, "dense_score": h.dense_score,
             "keyword_score": h.keyword_score, "text": h.text}
            for i, h in enumerate(hits, 1)
        ]
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return 0
    for rank, hit in enumerate(hits, 1):
        print(f"{rank}. {hit.paper.shown}  ({hit.paper.label})  score {hit.score:.3f}")
        print(f"   {hit.text[:240]}{'…' if len(hit.text) > 240 else ''}")
    return 0


def _print_answer(answer: Any, out: Any = sys.stdout) -> None:
    print(answer.text, file=out)
    for notice in answer.notices:
        print(f"note: {notice}", file=out)
    if answer.citations:
        print("\nSources:", file=out)
        for citation in answer.citations:
            paper = citation.paper
            print(f"  [{citation.marker}] {paper.shown} ({paper.label})", file=out)
            passages = [span.text for span in citation.spans] or [citation.quote]
            print("      " + " … ".join(f'"{clean_markup(text)}"' for text in passages), file=out)
    elif answer.status in ("not_in_abstracts", "llm_failed", "retrieval_only"):
        print("\nClosest papers:", file=out)
        for passage in answer.passages[:5]:
            print(f"  - {passage.paper.shown} ({passage.paper.label})", file=out)
    if answer.related:
        print("\nPossibly related:", file=out)
        for citation in answer.related:
            print(f"  - {citation.paper.shown} ({citation.paper.label}): \"{clean_markup(citation.quote)}\"", file=out)
    if answer.flagged:
        print("\nNot supported by the abstracts (left uncited or removed):", file=out)
        for sentence in answer.flagged:
            print(f"  - {sentence}", file=out)


def _run_question(assistant: Any, question: str, history: list[dict[str, str]], args: argparse.Namespace) -> Any:
    """Say which papers are being read, stream the draft (dimmed, on a terminal), then print the
    verified answer."""
    as_json = getattr(args, "json", False)
    show_draft = sys.stdout.isatty() and not as_json
    final = None
    shown: set[str] = set()  # a Chinese question naming a paper has it shown before the others
    for event in assistant.events(question, history=history, k=args.k, source=args.source):
        if isinstance(event, Evidence):
            new = [p.paper.shown for p in event.passages if p.paper.id not in shown]
            if not as_json and new:
                print(f"{'Also reading' if shown else 'Reading'}: {', '.join(new)}", file=sys.stderr, flush=True)
            shown.update(p.paper.id for p in event.passages)
        elif isinstance(event, str):
            if show_draft:
                print(f"\033[2m{event}\033[0m", end="", flush=True)
        else:
            final = event
    if show_draft:
        print("\n")
    timings = final.timings
    if getattr(args, "json", False):
        print(json.dumps(final.to_json(), indent=1, ensure_ascii=False))
    else:
        _print_answer(final)
        if "first_token" in timings:
            print(f"\n({assistant.llm.name}: first token {timings['first_token']:.1f} s, "
                  f"answer {timings['total']:.1f} s)", file=sys.stderr)
    return final


def cmd_ask(args: argparse.Namespace) -> int:
    assistant = _open(settings_from_args(args))
    try:
        final = _run_question(assistant, args.question, [], args)
    finally:
        assistant.close()
    return 3 if final.llm_failed else 0


def cmd_chat(args: argparse.Namespace) -> int:
    assistant = _open(settings_from_args(args))
    assistant.warm_up(report=False)  # loads while the first question is typed
    assistant.read_ahead()  # and reads papers ahead (kept on disk) while nobody is asking
    history: list[dict[str, str]] = []
    print("Ask about the papers. Commands: /new starts a new conversation, /quit (or Ctrl-D) leaves.", file=sys.stderr)
    try:
        while True:
            try:
                question = input("\nyou> ").strip()
            except EOFError:
                print(file=sys.stderr)
                return 0
            if not question:
                continue
            if question in ("/quit", "/exit"):
                return 0
            if question == "/new":
                history.clear()
                print("(new conversation)", file=sys.stderr)
                continue
            try:
                final = _run_question(assistant, question, history, args)
            except AssistantError as exc:  # one bad question must not end the session
                print(f"error: {exc}", file=sys.stderr)
                continue
            history += [{"role": "user", "content": question}, {"role": "assistant", "content": final.text}]
    finally:
        assistant.close()


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

    from .table import check_columns, to_csv, to_markdown
    from .types import Cell, Row, Table

    if not (args.topic or args.papers or args.source):
        print("error: say which papers: --topic TEXT, --papers ID[,ID…] or --source FILE", file=sys.stderr)
        return 2
    settings = settings_from_args(args)
    columns = check_columns(args.column, settings.max_question_tokens)  # as the table asks them (blank ones dropped)
    assistant = _open(settings)
    bar = None
    table = None
    rows: list[Any] = []
    try:
        events = assistant.table_events(columns, papers=_split(args.papers) or None, topic=args.topic,
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
    print(f"{len(table.rows)} papers x {len(table.columns)} questions: {filled} cells answered from the abstracts, "
          f"the rest not stated, in {table.timings.get('total', 0):.1f} s.", file=sys.stderr)
    failed = any(c.status == "failed" for line in table.cells for c in line)
    return 3 if failed else 0


def add_paper_choice(group: Any, default: str = "") -> None:
    """The --papers / --source options of the commands that work on chosen papers."""
    group.add_argument("--papers", help=f"comma-separated paper ids or titles (see `assistant papers`){default}")
    group.add_argument("--source", help="every paper of this corpus file")


def cmd_warm(args: argparse.Namespace) -> int:
    """`assistant warm`: have the model read each paper once and keep that reading on disk; it names
    each paper as it reads it (`labels`)."""
    from tqdm import tqdm

    settings = settings_from_args(args)
    assistant = _open(settings)
    started = time.perf_counter()
    count = labelled = 0
    try:
        chosen = [p.id for p in assistant.papers_of(_split(args.papers) or None, args.source)]
        with tqdm(total=len(chosen), unit="paper", desc="Reading the papers", file=sys.stderr) as bar:
            for paper in assistant.keep_papers(papers=chosen or None, source=args.source):
                count += 1
                labelled += bool(paper.display)
                bar.update(1)
        print(f"{labelled} of {count} papers have a name the model wrote and the abstract bears out "
              "(`assistant papers` lists them); the others keep their derived titles.", file=sys.stderr)
        server = getattr(assistant.llm_loaded, "server", None)
    finally:
        assistant.close()
    if server is None or not settings.llm_kept_states_mb:
        print("Nothing is kept with this LLM backend (only the embedded model keeps its readings).", file=sys.stderr)
        return 0
    folder = server.kept_dir
    size = sum(f.stat().st_size for f in folder.glob("*.npz")) / (1 << 20)
    print(f"Read {count} paper{'' if count == 1 else 's'} in {time.perf_counter() - started:.0f} s. Questions and tables about them now read "
          f"only their own words. Kept states: {size:.0f} MB in {folder} (limit {settings.llm_kept_states_mb} MB, "
          "ASSISTANT_LLM_KEPT_STATES_MB).", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .ui import serve

    serve(settings_from_args(args), host=args.host, port=args.port)
    return 0


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def cmd_eval(args: argparse.Namespace) -> int:
    """`assistant eval`: run, report, print the table, and optionally gate or refresh the baseline."""
    from tqdm import tqdm

    from .api import Assistant
    from .evaluation import (
        baseline_section, check, comparison_table, format_table, load_questions, run_eval, select_questions, summarize,
        write_report,
    )

    if args.tables:
        return _eval_tables(args)
    baseline_path = Path(args.baseline)
    mode = "retrieval-only" if args.retrieval_only else "full"
    baseline = json.loads(baseline_path.read_text(encoding="utf-8")) if baseline_path.is_file() else None
    ids, types = _split(args.ids), _split(args.types)
    if args.check and not (ids or types or args.limit):
        if not baseline or mode not in baseline:
            print(f"error: {baseline_path} has no '{mode}' baseline to check against", file=sys.stderr)
            return 2
        ids = list(baseline[mode]["ids"])  # gate on exactly the baseline's questions
    try:
        questions = select_questions(load_questions(args.questions), ids, types, args.limit)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not questions:
        print("error: no questions selected", file=sys.stderr)
        return 2

    settings = settings_from_args(args)
    started = time.perf_counter()
    assistant = Assistant.from_settings(settings, notify=lambda m: print(m, file=sys.stderr), progress=progress_bar())
    try:
        if not args.retrieval_only:
            print("Starting the language model…", file=sys.stderr)
        bar = tqdm(total=len(questions), unit="q", desc=f"Evaluating ({mode})", file=sys.stderr)

        def progress(done: int, total: int) -> None:
            bar.update(done - bar.n)

        results = run_eval(assistant, questions, retrieval_only=args.retrieval_only, progress=progress)
        bar.close()
        meta: dict[str, Any] = {"wall_seconds": round(time.perf_counter() - started, 1)}
        if not args.retrieval_only:
            meta["llm"] = getattr(assistant.llm, "name", settings.llm_model)
            if "llm_start" in assistant.timings:
                meta["llm_start_seconds"] = round(assistant.timings["llm_start"], 1)
    finally:
        assistant.close()

    summary = summarize(results, settings, meta)
    folder = write_report(results, summary, args.out)
    print(format_table(summary))
    print(f"\n{len(questions)} questions in {summary['wall_seconds']:.0f} s; report: {folder}", file=sys.stderr)

    status = 0
    if args.check:
        if not baseline:
            print(f"error: no baseline at {baseline_path}", file=sys.stderr)
            return 2
        try:
            regressions = check(summary, baseline)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"\nBaseline ({baseline_path}) vs now, all questions:\n" + comparison_table(summary, baseline))
        if regressions:
            print(f"\nREGRESSION: {len(regressions)} metric(s) fell beyond tolerance:")
            for line in regressions:
                print(f"  - {line}")
            status = 1
        else:
            print("\nNo metric fell beyond tolerance.")
    if args.write_baseline:
        updated = dict(baseline or {})
        updated.setdefault("note", "Figures measured by `assistant eval`; see the README next to this file. Refresh deliberately "
                                   "with --write-baseline.")
        updated[mode] = baseline_section(summary, (baseline or {}).get(mode))
        baseline_path.write_text(json.dumps(updated, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"Wrote the '{mode}' baseline to {baseline_path}", file=sys.stderr)
    return status


def _eval_tables(args: argparse.Namespace) -> int:
    """`assistant eval --tables`: the table set's rows (and, unless --retrieval-only, its cells)."""
    from tqdm import tqdm

    from .api import Assistant
    from .evaluation.tables import format_tables_summary, load_tables, run_tables, summarize_tables, write_tables_report

    try:
        items = load_tables(args.tables_path)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assistant = Assistant.from_settings(settings_from_args(args), notify=lambda m: print(m, file=sys.stderr),
                                        progress=progress_bar())
    try:
        bar = tqdm(total=len(items), unit="topic", desc="Evaluating tables", file=sys.stderr)
        results = run_tables(assistant, items, cells=not args.retrieval_only,
                             progress=lambda done, total: bar.update(done - bar.n))
        bar.close()
    finally:
        assistant.close()
    summary = summarize_tables(results)
    folder = write_tables_report(results, summary, args.out)
    print(format_tables_summary(summary))
    print(f"\nreport: {folder}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="assistant",
        description="A reading assistant for research papers: answers questions about a paper collection, "
        "citing the paper behind every claim. Works offline with embedded models.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--index-dir", type=Path, help="folder of the embedded Chroma store (default: ~/.local/share/icml-assistant/store)")
    common.add_argument("--chroma-host", help="use a Chroma server at this host instead of the embedded store")
    common.add_argument("--chroma-port", type=int, help="port of the Chroma server (default 8000)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", parents=[common], help="build or update the index", description="Chunk, embed and store "
                       "the corpus. Only new or changed papers are embedded; --rebuild starts from scratch.")
    p.add_argument("paths", nargs="*", help="corpus files (.txt paper lists or .jsonl); default: the current corpus")
    p.add_argument("--rebuild", action="store_true", help="rebuild from scratch (the old index stays usable until done)")
    p.set_defaults(run=cmd_index)

    p = sub.add_parser("papers", parents=[common], help="list the indexed papers (id, title, source)")
    p.add_argument("--topics", action="store_true", help="group the papers into topics (clusters of their embeddings)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=cmd_papers)

    p = sub.add_parser("retrieve", parents=[common], help="rank papers for a question (no LLM)")
    p.add_argument("question")
    p.add_argument("-k", "--k", type=int, default=5, help="number of papers (default 5)")
    p.add_argument("--source", help="only papers from this corpus file name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=cmd_retrieve)

    answering = argparse.ArgumentParser(add_help=False, parents=[common])
    answering.add_argument("-k", "--k", type=int, default=None, help="papers retrieved (default 5)")
    answering.add_argument("--source", help="only papers from this corpus file name")
    p = sub.add_parser("ask", parents=[answering], help="answer one question with cited papers",
                       description="Answer a question from the abstracts; every sentence cites its paper. "
                       "Uses the embedded local model unless ASSISTANT_LLM_BASE_URL / ASSISTANT_LLM_BACKEND say otherwise. "
                       "Exit code 3: the LLM failed and only the retrieved papers are shown.")
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="print the whole Answer as JSON")
    p.set_defaults(run=cmd_ask)

    p = sub.add_parser("chat", parents=[answering], help="interactive terminal chat with history")
    p.set_defaults(run=cmd_chat)

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

    p = sub.add_parser(
        "warm", parents=[common], help="have the model read every paper once, so questions and tables start at once",
        description="The embedded model reads each paper's abstract (as it opens a question about the paper and a "
        "table row of it) and keeps its state on disk (~25 MB a paper, within ASSISTANT_LLM_KEPT_STATES_MB). Later "
        "questions and tables about these papers, in any later session, read only their own words. Papers are also "
        "kept the first time they are asked about; this does it ahead, about 5 s a paper on a laptop CPU. As it reads a paper the model also names it (\"SDG: Stein "
        "Diffusion Guidance\"); a name the abstract bears out is shown in place of the derived title.",
    )
    add_paper_choice(p.add_mutually_exclusive_group(), default=" (default: every paper)")
    p.set_defaults(run=cmd_warm)

    p = sub.add_parser(
        "serve", parents=[common], help="start the chat UI in the browser",
        description="Serve the chat UI (Gradio) on http://HOST:PORT. It binds to 127.0.0.1 by default; any other "
        "address requires ASSISTANT_USERNAME and ASSISTANT_PASSWORD. Nothing is shared or sent elsewhere.",
    )
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1, or ASSISTANT_HOST)")
    p.add_argument("--port", type=int, default=None, help="port (default 7860, or ASSISTANT_PORT)")
    p.set_defaults(run=cmd_serve)

    # The evaluation set's paths and types are light constants; the harness loads when `eval` runs.
    from .evaluation.dataset import BASELINE_PATH, QUESTIONS_PATH, REPORTS_DIR, TYPES
    from .evaluation.tables import TABLES_PATH

    p = sub.add_parser(
        "eval", parents=[common], help=f"measure retrieval and answer quality on {QUESTIONS_PATH.name}",
        description=f"Run the evaluation set ({QUESTIONS_PATH}) through the assistant and write a report folder "
        f"under {REPORTS_DIR} (results.jsonl, summary.json, summary.md, plots). The LLM backend comes from "
        "ASSISTANT_LLM_* variables.",
    )
    p.add_argument("--retrieval-only", action="store_true", help="rank papers only, no LLM (runs in seconds)")
    p.add_argument("--limit", type=int, help="only the first N selected questions")
    p.add_argument("--types", help=f"comma-separated question types ({','.join(TYPES)})")
    p.add_argument("--ids", help="comma-separated question ids, e.g. q001,q028")
    p.add_argument("--check", action="store_true", help="exit 1 when a metric fell below the baseline beyond tolerance "
                   "(without --ids/--types/--limit: runs the baseline's questions)")
    p.add_argument("--baseline", type=Path, default=BASELINE_PATH, help=f"baseline file (default {BASELINE_PATH})")
    p.add_argument("--write-baseline", action="store_true", help="store this run's figures as the baseline for its mode")
    p.add_argument("--out", type=Path, default=REPORTS_DIR, help=f"reports folder (default {REPORTS_DIR})")
    p.add_argument("--questions", type=Path, default=QUESTIONS_PATH, help=f"evaluation set (default {QUESTIONS_PATH})")
    p.add_argument("--tables", action="store_true", help=f"evaluate tables instead ({TABLES_PATH.name}): topic rows "
                   "against their gold papers and, unless --retrieval-only, every cell against its gold facts")
    p.add_argument("--tables-path", type=Path, default=TABLES_PATH, help=f"table set (default {TABLES_PATH})")
    p.set_defaults(run=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except AssistantError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early: not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
