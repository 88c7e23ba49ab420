"""Score the papers' labels against eval/labels.jsonl, a hand-made list of the names a reader would
accept for each bundled paper (its authors' short name, its expansion, or a plain noun phrase).

A label is accepted when it, or its name part ("SDG" of "SDG: Stein Diffusion Guidance"), is one of
the accepted names (case and punctuation aside), or when its description shares at least half of its
content words with an accepted phrase (and is not cut off: a label ending in "…" never is). Both the
labels the model wrote (kept beside the index by `assistant warm`) and the derived titles are scored,
so the line shows what the labels add.

    .venv/bin/python eval/score_labels.py [--index-dir DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant import Assistant, Settings  # noqa: E402
from assistant.evaluation.dataset import paper_key, read_jsonl  # noqa: E402
from assistant.wording import stems  # noqa: E402

HERE = Path(__file__).resolve().parent
OVERLAP = 0.5


def _plain(text: str) -> str:
    return re.sub(r"[^\w]+", " ", text.lower()).strip()


def accepted(label: str, accept: list[str]) -> bool:
    """Whether a reader would accept `label`, given the names they accept for the paper."""
    if not label or "…" in label:
        return False
    name, _, description = label.partition(": ")
    wanted = {_plain(a) for a in accept}
    if _plain(label) in wanted or _plain(name) in wanted or (description and _plain(description) in wanted):
        return True
    own = set(stems(description or label))
    for phrase in accept:
        theirs = set(stems(phrase))
        if own and theirs and len(own & theirs) / len(own | theirs) >= OVERLAP:
            return True
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index-dir", type=Path, help="the index whose labels to score (default: the settings')")
    parser.add_argument("--show", action="store_true", help="print every paper's label and derived title")
    args = parser.parse_args()
    settings = Settings(**({"index_dir": args.index_dir} if args.index_dir else {}))
    hand = {paper_key(r["source"], r["ordinal"]): r for _, r in read_jsonl(HERE / "labels.jsonl", {"source", "ordinal"})}
    with Assistant.from_settings(settings) as a:
        papers = [p for p in a.papers if p.id in hand]
    written = [p for p in papers if p.display]
    label_ok = sum(accepted(p.shown, [hand[p.id]["label"], *hand[p.id]["accept"]]) for p in papers)
    title_ok = sum(accepted(p.title, [hand[p.id]["label"], *hand[p.id]["accept"]]) for p in papers)
    written_ok = sum(accepted(p.display, [hand[p.id]["label"], *hand[p.id]["accept"]]) for p in written)
    if args.show:
        for p in papers:
            mark = "ok" if accepted(p.shown, [hand[p.id]["label"], *hand[p.id]["accept"]]) else "--"
            print(f"{mark} {p.shown[:60]:60} | derived: {p.title[:40]:40} | hand: {hand[p.id]['label']}")
    print(f"labels a reader would accept: {label_ok}/{len(papers)} shown "
          f"({len(written)} written by the model, {written_ok} of them accepted); derived titles alone: {title_ok}/{len(papers)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
