"""`assistant eval`: run the evaluation set (or, with --tables, the table set) through the
assistant, write a report folder, print its table, and optionally gate on or refresh the baseline."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .common import open_assistant, settings_from_args, split_commas


def cmd_eval(args: argparse.Namespace) -> int:
    """`assistant eval`: run, report, print the table, and optionally gate or refresh the baseline."""
    from tqdm import tqdm

    from ..evaluation import (
        baseline_section, check, comparison_table, format_table, load_questions, run_eval, select_questions, summarize,
        write_report,
    )

    if args.tables:
        return _eval_tables(args)
    baseline_path = Path(args.baseline)
    mode = "retrieval-only" if args.retrieval_only else "full"
    baseline = json.loads(baseline_path.read_text(encoding="utf-8")) if baseline_path.is_file() else None
    ids, types = split_commas(args.ids), split_commas(args.types)
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
    assistant = open_assistant(settings)
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

    from ..evaluation.tables import format_tables_summary, load_tables, run_tables, summarize_tables, write_tables_report

    try:
        items = load_tables(args.tables_path)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assistant = open_assistant(settings_from_args(args))
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


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `eval`."""
    # The evaluation set's paths and types are light constants; the harness loads when `eval` runs.
    from ..evaluation.dataset import BASELINE_PATH, QUESTIONS_PATH, REPORTS_DIR, TYPES
    from ..evaluation.tables import TABLES_PATH

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
