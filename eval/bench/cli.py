"""The benchmark's command line: its options, the sections in the order they run, and the run
itself (a report written even when interrupted, everything it started cleaned up)."""

from __future__ import annotations

import argparse
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import ROOT
from .answers import answer_latency_section, first_question_section
from .chroma_server import chroma_server_section
from .embedding import embedding_section
from .indexing import real_index_section, synthetic_corpus_section, synthetic_index_section
from .inputs import load_questions, real_corpus
from .llm import llm_section, model_limits_section
from .machine import machine_section, memory_section
from .measure import CpuMeter, note, r, say
from .report import Report
from .retrieval import retrieval_section
from .state import Context, Run
from .tables import table_section
from .topics import topics_section

REPORT_DIR = ROOT / "eval" / "reports"

SECTIONS: list[Callable[[Run], None]] = [
    machine_section, model_limits_section, synthetic_corpus_section, embedding_section, real_index_section, synthetic_index_section,
    topics_section, retrieval_section, chroma_server_section, llm_section, answer_latency_section, table_section,
    first_question_section, memory_section,
]


def run_sections(args: argparse.Namespace, rep: Report, ctx: Context) -> None:
    state = Run(
        args=args, rep=rep, ctx=ctx, meter=CpuMeter(ctx.child_pids), real=real_corpus(),
        questions=[q["question"] for q in load_questions(args.queries)],
        n_synth=args.n_synthetic if args.n_synthetic is not None else (1000 if args.quick else 10_000),
    )
    rep.snapshot("after imports")
    for section in SECTIONS:
        section(state)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eval.bench",
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
        run_sections(args, rep, ctx)
        rep.data["complete"] = True
    except KeyboardInterrupt:
        say("\nInterrupted: cleaning up and writing a partial report.")
        rep.data["interrupted"] = True
        code = 130
    except Exception as exc:
        rep.data["error"] = f"{type(exc).__name__}: {exc}"
        say(f"\nFAILED: {type(exc).__name__}: {exc}")
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
