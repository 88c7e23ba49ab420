"""The collection's commands: `assistant index` (build or update the index), `assistant papers`
(list the papers, or their topics) and `assistant retrieve` (rank papers for a question, no LLM)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .common import open_assistant, progress_bar, settings_from_args


def cmd_index(args: argparse.Namespace) -> int:
    from ..api import reindex

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
    assistant = open_assistant(settings_from_args(args))
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
    assistant = open_assistant(settings_from_args(args))
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


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `index`, `papers` and `retrieve`."""
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
