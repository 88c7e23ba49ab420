"""The long-running commands: `assistant warm` (the model reads every paper once and keeps that
reading on disk) and `assistant serve` (the chat UI in the browser)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .common import add_paper_choice, open_assistant, settings_from_args, split_commas


def cmd_warm(args: argparse.Namespace) -> int:
    """`assistant warm`: have the model read each paper once and keep that reading on disk; it names
    each paper as it reads it (`labels`)."""
    from tqdm import tqdm

    settings = settings_from_args(args)
    assistant = open_assistant(settings)
    started = time.perf_counter()
    count = labelled = 0
    try:
        chosen = [p.id for p in assistant.papers_of(split_commas(args.papers) or None, args.source)]
        with tqdm(total=len(chosen), unit="paper", desc="Reading the papers", file=sys.stderr) as bar:
            for paper in assistant.keep_papers(papers=chosen or None, source=args.source):
                count += 1
                labelled += bool(paper.display)
                bar.update(1)
        unkept = assistant.unkept(chosen) if count else []  # count > 0: `chosen` names every paper read
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
    about = "them" if not unkept else f"the {count - len(unkept)} still kept"
    print(f"Read {count} paper{'' if count == 1 else 's'} in {time.perf_counter() - started:.0f} s. Questions and tables about {about} now read "
          f"only their own words. Kept states: {size:.0f} MB in {folder} (limit {settings.llm_kept_states_mb} MB, "
          "ASSISTANT_LLM_KEPT_STATES_MB).", file=sys.stderr)
    if unkept:
        # Kept states are removed oldest first once the limit is reached: papers read early lose theirs.
        needed = size / max(count - len(unkept), 1) * count * 1.25
        print(f"warning: {len(unkept)} of {count} papers did not stay kept within the limit (first: {unkept[0].shown}). "
              "Questions about them read the whole abstract again, and topic lists weigh them without the model. "
              f"Set ASSISTANT_LLM_KEPT_STATES_MB to about {needed:.0f} and run `assistant warm` again.", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from ..ui import serve

    serve(settings_from_args(args), host=args.host, port=args.port)
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `warm` and `serve`."""
    p = sub.add_parser(
        "warm", parents=[common], help="have the model read every paper once, so questions and tables start at once",
        description="The embedded model reads each paper's abstract (as it opens a question about the paper and a "
        "table row of it) and keeps its state on disk (~26 MB a paper, within ASSISTANT_LLM_KEPT_STATES_MB). Later "
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
