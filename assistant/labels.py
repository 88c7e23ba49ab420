"""Labels: a name for each paper the way its authors would say it, written by the model and checked.

The abstracts come without titles; `load.derive_title` names a paper by rule, which often cuts a
sentence or picks a word from the method's parts. The model reads each paper anyway (`warm`, reading
ahead); asked then for the paper's name and a short description (JSON, grammar-constrained), it writes
"SDG" / "Stein Diffusion Guidance". A label is kept only if it holds against the abstract: a name must
occur in it verbatim, a description must be a short noun phrase (not a sentence, not cut off) most
of whose words the abstract uses. Labels are kept beside the index by the hash of the abstract, so a
paper keeps its label across rebuilds and a changed abstract is labelled again; until a paper has
one, its derived title is shown. Labels are display only: prompts, name matching and the index keep
the derived title, so a label changes no answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LLMError
from .types import Paper
from .wording import STOPWORDS, stems

FILE_NAME = "labels.json"
LABEL_TOKENS = 64
NAME_MAX_CHARS, NAME_MAX_WORDS = 40, 4
DESCRIPTION_WORDS = (2, 9)
DESCRIPTION_MAX_CHARS = 90
# Share of the description's content words the abstract must use (the rest may be the model's own
# plain words for what the abstract says: "identification" for "identify").
GROUNDED_SHARE = 0.5
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": NAME_MAX_CHARS},
        "description": {"type": "string", "maxLength": DESCRIPTION_MAX_CHARS},
    },
    "required": ["name", "description"],
    "additionalProperties": False,
}
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Verdict:
    """A written label and whether it holds: `label` is what is shown ("" if nothing holds)."""

    label: str
    name: str
    description: str
    rejected: tuple[str, ...] = ()


def paper_hash(paper: Paper) -> str:
    return hashlib.sha256(paper.abstract.encode("utf-8")).hexdigest()[:16]


def check(name: str, description: str, text: str) -> Verdict:
    """The label that holds against `text` (the abstract): "name: description", either part alone, or
    nothing; what was rejected, in words."""
    name, description = " ".join(name.split()).strip(" .,;:\"'"), " ".join(description.split()).strip(" ,;:\"'")
    rejected = []
    if name and (len(name.split()) > NAME_MAX_WORDS or name not in text):
        rejected.append(f"the name {name!r} is not written so in the abstract")
        name = ""
    elif name and " " not in name and re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", text):
        rejected.append(f"the name {name!r} is an ordinary word of the abstract")  # "Diffusion", "Grounding"
        name = ""
    if description:
        problem = _description_problem(description, text)
        if problem:
            rejected.append(f"the description {description!r} {problem}")
            description = ""
    return Verdict(compose(name, description), name, description, tuple(rejected))


def compose(name: str, description: str) -> str:
    """"SDG: Stein Diffusion Guidance"; either part alone when the other is missing or repeats it."""
    if name and description:
        return description if description.lower().startswith(name.lower()) else f"{name}: {description}"
    return name or description


def expands(phrase: str, short: str) -> bool:
    """Whether `phrase` spells out `short`: the capitals of the short name are, in order, initials of
    the phrase's words ("Synchronized Successive Rejects" and "SySRs"; not "Adaptive MoE upcycling"
    and "Gumbel-Softmax")."""
    initials = iter(w[0].upper() for w in re.split(r"[\s-]+", phrase) if w)
    capitals = [c for c in short if c.isupper()]
    return bool(capitals) and all(any(c == i for i in initials) for c in capitals)


def derived_name(paper: Paper) -> str:
    """The paper's derived title when it is a name the abstract uses ("SySRs"), else ""."""
    title = paper.title
    return title if " " not in title and "…" not in title and title in paper.text else ""


def _description_problem(description: str, text: str) -> str:
    words = description.split()
    low, high = DESCRIPTION_WORDS
    if not low <= len(words) <= high:
        return f"has {len(words)} words (a label has {low} to {high})"
    if re.search(r"[.!?;]\s|[.!?;]$|…", description):
        return "is a sentence, not a noun phrase"
    if words[0].lower() in {"we", "this", "our", "in", "it"}:
        return "reads as a sentence"
    if words[-1].lower() in STOPWORDS:
        return "is cut off"
    own = stems(description)
    used = set(stems(text))
    if own and sum(s in used for s in own) / len(own) < GROUNDED_SHARE:
        return "uses words the abstract does not"
    return ""


class LabelBook:
    """The labels kept beside an index: `labels.json`, by the hash of each abstract."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / FILE_NAME
        self._entries: dict[str, dict[str, Any]] = self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: labels are written again, the derived titles shown meanwhile
        return data if isinstance(data, dict) else {}

    def has(self, paper: Paper) -> bool:
        return paper_hash(paper) in self._entries

    def label(self, paper: Paper) -> str:
        """The kept label; where the model gave a description but no name, the name the rule found
        in the abstract leads it (the model often writes "Synchronized Successive Rejects" alone)."""
        entry = self._entries.get(paper_hash(paper)) or {}
        name, description = str(entry.get("name") or ""), str(entry.get("description") or "")
        short = derived_name(paper)
        if description and not name:
            return compose(short, description)
        if " " in name and short and expands(name, short):  # "Synchronized Successive Rejects" -> "SySRs: ..."
            return compose(short, name)
        return str(entry.get("label") or "")

    def put(self, paper: Paper, verdict: Verdict, model: str) -> None:
        self._entries[paper_hash(paper)] = {"label": verdict.label, "name": verdict.name,
                                            "description": verdict.description,
                                            "rejected": list(verdict.rejected), "model": model}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._entries, indent=1, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.path)

    def apply(self, papers: list[Paper]) -> list[Paper]:
        """The papers, each showing its kept label (its derived title where it has none)."""
        return [dataclasses.replace(p, display=label) if (label := self.label(p)) else p for p in papers]


class Labeler:
    """Asks the model for a paper's label right after its abstract (whose reading is kept, so this costs
    only the short reply), checks it and keeps it in the book."""

    def __init__(self, book: LabelBook, prompt: str, about: Callable[[Paper], Callable[[str], Messages]],
                 llm: Callable[[], Any]) -> None:
        self.book = book
        self.prompt = prompt
        self.about = about
        self.llm = llm

    def write(self, paper: Paper) -> Verdict | None:
        """The paper's label, asked once (None when it was asked before)."""
        if self.book.has(paper):
            return None
        llm = self.llm()
        reply = llm.chat(self.about(paper)(self.prompt), max_tokens=LABEL_TOKENS,
                         response_format=llm.json_format(SCHEMA))
        try:
            data = json.loads(reply)
        except ValueError as exc:
            raise LLMError(f"The model's label for {paper.title} was not JSON: {reply[:80]!r}") from exc
        verdict = check(str(data.get("name") or ""), str(data.get("description") or ""), paper.text)
        self.book.put(paper, verdict, getattr(llm, "model", ""))
        return verdict
