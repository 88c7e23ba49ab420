"""Command line: a thin layer over the Python API (`assistant --help`).

One module per group of subcommands: `papers` (index, papers, retrieve), `ask` (ask, chat),
`table`, `serve` (warm, serve) and `evaluate` (eval); `common` holds what they share, with
`settings_from_args`, the one place flags become a `Settings`. Settings come from `ASSISTANT_*`
environment variables and the flags (every setting has one); errors are turned into one readable
line and a non-zero exit code here, in `main`, and nowhere else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import AssistantError
from . import ask, evaluate, papers, serve, table
from .common import Parser, add_setting_flags, settings_from_args
from .serve import cmd_serve

__all__ = ["build_parser", "cmd_serve", "main", "settings_from_args"]

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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    for group in (papers, ask, table, serve, evaluate):
        group.add_commands(sub, common)
    for command in sub.choices.values():
        add_setting_flags(command)
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
