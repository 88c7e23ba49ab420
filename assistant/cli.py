"""Command line: a thin layer over the Python API (`assistant --help`).

Settings come from `ASSISTANT_*` environment variables and the flags below; errors are
turned into one readable line and a non-zero exit code here, and nowhere else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Settings
from .errors import AssistantError
from .text import clean_markup

EXAMPLES = """examples:
  assistant index                      build or update the index of the bundled ICML 2026 abstracts
  assistant index my_papers.jsonl --rebuild
  assistant papers                     list the indexed papers
  assistant retrieve "Which method reaches 5M tokens of context?"
  assistant ask "What speedup does Vegas achieve over vLLM?"
  assistant chat                       interactive chat in the terminal
  assistant serve                      the chat UI on http://127.0.0.1:7860
  assistant eval --retrieval-only --check   the grounding eval against its baseline
environment: every setting is also an ASSISTANT_* variable, e.g. ASSISTANT_CHROMA_HOST,
ASSISTANT_LLM_BASE_URL, ASSISTANT_LLM_MODEL (see README)."""


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("index_dir", "chroma_host", "chroma_port"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def _progress_bar() -> Callable[[int, int], None]:
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

    return Assistant.from_settings(settings, notify=lambda m: print(m, file=sys.stderr), progress=_progress_bar())


def cmd_index(args: argparse.Namespace) -> int:
    from .api import reindex

    report = reindex(_settings(args), [Path(p) for p in args.paths] or None, args.rebuild, progress=_progress_bar())
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
    assistant = _open(_settings(args))
    if args.json:
        print(json.dumps([{k: getattr(p, k) for k in ("id", "title", "source", "ordinal")} for p in assistant.papers], indent=1))
        return 0
    width = min(50, max(len(p.title) for p in assistant.papers))
    for paper in assistant.papers:
        print(f"{paper.id:28} {paper.title[:width]:{width}}  {paper.source} #{paper.ordinal}")
    print(f"{len(assistant.papers)} papers", file=sys.stderr)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    assistant = _open(_settings(args))
    hits = assistant.retrieve(args.question, k=args.k, source=args.source)
    if args.json:
        rows = [
            {"rank": i, "id": h.paper.id, "title": h.paper.title, "source": h.paper.source, "ordinal": h.paper.ordinal,
             "score": h.score, "dense": h.dense_score, "bm25": h.keyword_score, "text": h.text}
            for i, h in enumerate(hits, 1)
        ]
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return 0
    for rank, hit in enumerate(hits, 1):
        print(f"{rank}. {hit.paper.title}  ({hit.paper.source} #{hit.paper.ordinal})  score {hit.score:.3f}")
        print(f"   {hit.text[:240]}{'…' if len(hit.text) > 240 else ''}")
    return 0


def _answer_dict(answer: Any) -> dict[str, Any]:
    data = answer.to_dict()
    for passage in data["passages"]:
        passage["paper"].pop("abstract", None)  # the cleaned text is enough in JSON output
    return data


def _print_answer(answer: Any, out: Any = sys.stdout) -> None:
    print(answer.text, file=out)
    for notice in answer.notices:
        print(f"note: {notice}", file=out)
    if answer.citations:
        print("\nSources:", file=out)
        for citation in answer.citations:
            paper = citation.paper
            print(f"  [{citation.marker}] {paper.title} ({paper.source} #{paper.ordinal})", file=out)
            passages = [span.text for span in citation.spans] or [citation.quote]
            print("      " + " … ".join(f'"{clean_markup(text)}"' for text in passages), file=out)
    elif answer.refused or answer.retrieval_only:
        print("\nClosest papers:", file=out)
        for passage in answer.passages[:5]:
            print(f"  - {passage.paper.title} ({passage.paper.source} #{passage.paper.ordinal})", file=out)
    if answer.flagged:
        print("\nNot supported by the abstracts (left uncited or removed):", file=out)
        for sentence in answer.flagged:
            print(f"  - {sentence}", file=out)


def _run_question(assistant: Any, question: str, history: list[dict[str, str]], args: argparse.Namespace) -> Any:
    """Stream the draft (dimmed, on a terminal), then print the verified answer."""
    show_draft = sys.stdout.isatty() and not getattr(args, "json", False)
    final = None
    for event in assistant.stream(question, history=history, k=args.k, source=args.source):
        if isinstance(event, str):
            if show_draft:
                print(f"\033[2m{event}\033[0m", end="", flush=True)
        else:
            final = event
    if show_draft:
        print("\n")
    timings = final.timings
    if getattr(args, "json", False):
        print(json.dumps(_answer_dict(final), indent=1, ensure_ascii=False))
    else:
        _print_answer(final)
        if "first_token" in timings:
            print(f"\n({assistant.llm.name}: first token {timings['first_token']:.1f} s, "
                  f"answer {timings['total']:.1f} s)", file=sys.stderr)
    return final


def cmd_ask(args: argparse.Namespace) -> int:
    assistant = _open(_settings(args))
    try:
        final = _run_question(assistant, args.question, [], args)
    finally:
        assistant.close()
    return 3 if final.retrieval_only else 0


def cmd_chat(args: argparse.Namespace) -> int:
    assistant = _open(_settings(args))
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="assistant",
        description="A reading assistant for research papers: answers questions about a paper collection, "
        "citing the paper behind every claim. Works offline with embedded models.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--index-dir", type=Path, help="folder of the embedded Chroma store (default: index/store)")
    common.add_argument("--chroma-host", help="use a Chroma server at this host instead of the embedded store")
    common.add_argument("--chroma-port", type=int, help="port of the Chroma server (default 8000)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", parents=[common], help="build or update the index", description="Chunk, embed and store "
                       "the corpus. Only new or changed papers are embedded; --rebuild starts from scratch.")
    p.add_argument("paths", nargs="*", help="corpus files (.txt paper lists or .jsonl); default: the current corpus")
    p.add_argument("--rebuild", action="store_true", help="rebuild from scratch (the old index stays usable until done)")
    p.set_defaults(run=cmd_index)

    p = sub.add_parser("papers", parents=[common], help="list the indexed papers (id, title, source)")
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

    from . import evaluation, ui  # registered here; their heavy imports happen only when run

    ui.add_cli(sub, common)
    evaluation.add_cli(sub, common)
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
