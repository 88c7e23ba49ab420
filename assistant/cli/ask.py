"""The answering commands: `assistant ask` (one question, answered with cited papers) and
`assistant chat` (an interactive conversation in the terminal)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import AssistantError
from ..text import clean_markup
from ..types import Evidence
from .common import open_assistant, settings_from_args


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
    assistant = open_assistant(settings_from_args(args))
    try:
        final = _run_question(assistant, args.question, [], args)
    finally:
        assistant.close()
    return 3 if final.llm_failed else 0


def cmd_chat(args: argparse.Namespace) -> int:
    assistant = open_assistant(settings_from_args(args))
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


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `ask` and `chat`, which share the retrieval flags of a question."""
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
