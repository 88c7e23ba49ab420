"""Load papers: parse corpus files (paper-list .txt or .jsonl) into `Paper` values.

A `.txt` paper list has a title line, then one abstract per non-empty line. A `.jsonl`
file has one object per line with `abstract` (required), `title`, `authors`, `url`, `venue`.
A paper's id is derived from its file name and 1-based position, so ids survive rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, StrictStr, ValidationError

from . import text as text_rules
from .errors import CorpusError
from .text import NOT_NAMES, clean_markup, split_sentences
from .types import Paper

MAX_FILE_BYTES = 200 * 1024 * 1024

_TRIGGER = re.compile(
    r"\b(?:propose|proposes|introduce|introduces|present|presents|develop|develops|called|named|dubbed|termed|coined)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<![\w-])([A-Z][A-Za-z0-9^]*(?:-[A-Za-z0-9]+)*)(?![\w-])")


_DEFINED = re.compile(r"(?:[\w-]+\s+){1,6}\(([A-Z][A-Za-z0-9-]{1,12})\)")


def _looks_like_name(token: str) -> bool:
    if token in NOT_NAMES or len(token) < 2:
        return False
    capitals = sum(c.isupper() for c in token)
    return capitals >= 2 or any(c.isdigit() for c in token) or "-" in token or token[1:].islower()


def derive_title(text: str) -> str:
    """A short human label: the method the abstract names, else a gist of what it proposes.

    Hand-written (no library names methods in abstracts): in the first "we propose /
    introduce" sentence, name-like tokens ("Vegas", "SySRs", "Dem-HEC") compete; recurring
    in the abstract, coming first, and being a short form in parentheses right after the
    verb all count.
    """
    sentences = split_sentences(text)
    counts = Counter(m.group(1) for m in _NAME.finditer(text))
    for sentence in sentences:
        trigger = _TRIGGER.search(sentence)
        if not trigger:
            continue
        tail = sentence[trigger.end():]
        scores: dict[str, float] = {}
        for match in _NAME.finditer(tail):
            token = match.group(1)
            if token in scores or not _looks_like_name(token) or (token[1:].islower() and counts[token] < 2):
                continue
            # "(SySRs)" right after "we propose Synchronized Successive Rejects" names the method;
            # a parenthesised term far from the verb usually names a concept it uses.
            early = len(tail[: match.start()].split()) <= 12
            in_parens = tail[max(0, match.start() - 1): match.start()] == "(" and tail[match.end(): match.end() + 1] == ")"
            scores[token] = 3 * (early and in_parens) + min(counts[token], 2) - 0.6 * len(scores)
        if scores:
            return max(scores, key=lambda token: scores[token])
    # No "we propose X": a short form the abstract defines ("Stein Diffusion Guidance (SDG)") and
    # uses again names what it is about better than a gist of its first sentence.
    # Only when it is the one such short form: with several ("GFT", "WBB", "GBB") they name
    # concepts the paper works with, not the paper.
    defined = {m.group(1) for m in _DEFINED.finditer(text) if _looks_like_name(m.group(1)) and counts[m.group(1)] >= 2}
    if len(defined) == 1:
        return defined.pop()
    for sentence in sentences:
        trigger = _TRIGGER.search(sentence)
        if trigger:
            gist = re.sub(r"^(?:a|an|the|two|our)\s+", "", sentence[trigger.end():].strip(" ,:"), flags=re.IGNORECASE)
            break
    else:
        gist = sentences[0] if sentences else text
    words = re.sub(r"[^\w\s-]", "", gist).split()
    title = " ".join(words[:8]) + ("…" if len(words) > 8 else "")
    return title[:1].upper() + title[1:]


def paper_id(source: str, ordinal: int) -> str:
    """Stable id from file name and position: readable prefix plus a short hash."""
    digest = hashlib.sha1(f"{source}#{ordinal}".encode()).hexdigest()[:8]
    stem = re.sub(r"[^A-Za-z0-9]+", "-", Path(source).stem)[:12].strip("-")
    return f"{stem}-{ordinal:03d}-{digest}"


def make_paper(source: str, ordinal: int, abstract: str, title: str = "", **extra: str) -> Paper:
    text = clean_markup(abstract)
    return Paper(
        id=paper_id(source, ordinal),
        source=source,
        ordinal=ordinal,
        title=clean_markup(title) if title else derive_title(text),
        abstract=abstract,
        text=text,
        **extra,
    )


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise CorpusError(f"{path}: no such corpus file. Check the path or run `assistant papers` to list what is indexed.")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise CorpusError(f"{path}: file is larger than {MAX_FILE_BYTES // 2**20} MB; split it into smaller files.")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise CorpusError(f"{path}: looks like a binary file, not a text paper list.")
    return data


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusError(f"{path}, line {line}: not valid UTF-8 text. Re-save the file as UTF-8.") from exc


def _load_txt(path: Path, raw: str) -> list[Paper]:
    lines = raw.splitlines()
    # The title line names the list (e.g. the conference): kept as each paper's venue.
    venue = " ".join(lines[0].split()) if lines else ""
    papers: list[Paper] = []
    for number, line in enumerate(lines[1:], start=2):
        abstract = line.strip()
        if not abstract:
            continue
        if len(abstract.split()) < 5:
            raise CorpusError(
                f"{path}, line {number}: '{abstract[:60]}' is too short to be an abstract "
                "(expected a title line, then one abstract per line)."
            )
        papers.append(make_paper(path.name, len(papers) + 1, abstract, **({"venue": venue} if venue else {})))
    return papers


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("blank")
    return text


class JsonlPaper(BaseModel):
    """One line of a .jsonl corpus: a non-empty `abstract` string; `title`, `authors` (a string or a
    list of names), `url` and `venue` are kept as text when given; other keys are ignored."""

    abstract: Annotated[StrictStr, AfterValidator(_not_blank)]
    title: Any = None
    authors: Any = None
    url: Any = None
    venue: Any = None


def _load_jsonl(path: Path, raw: str) -> list[Paper]:
    papers: list[Paper] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:  # the standard library's parser: the message quotes its words for a syntax error
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}, line {number}: invalid JSON ({exc.msg}).") from exc
        try:
            paper = JsonlPaper.model_validate(record)
        except ValidationError as exc:
            if exc.errors()[0]["type"] == "model_type":
                raise CorpusError(f"{path}, line {number}: expected a JSON object with an 'abstract' field.") from exc
            raise CorpusError(f"{path}, line {number}: no 'abstract' (every line needs a non-empty 'abstract' string).") from exc
        extra = {key: str(value) for key in ("authors", "url", "venue") if (value := getattr(paper, key))}
        if isinstance(paper.authors, list):
            extra["authors"] = ", ".join(map(str, paper.authors))
        papers.append(make_paper(path.name, len(papers) + 1, " ".join(paper.abstract.split()), str(paper.title or ""), **extra))
    return papers


# Start-up reuses the parse (markup cleaning, titles) of an unchanged file. The key covers the source
# of this module and of the text rules it applies, so any change to the parsing rules invalidates
# every cached parse.
_PARSER_KEY = hashlib.sha1(Path(__file__).read_bytes() + Path(text_rules.__file__).read_bytes()).hexdigest()
_CACHE_FILES_KEPT = 64


def _parse(path: Path, data: bytes) -> list[Paper]:
    raw = _decode(path, data)
    papers = _load_jsonl(path, raw) if path.suffix.lower() == ".jsonl" else _load_txt(path, raw)
    if not papers:
        raise CorpusError(f"{path}: contains no abstracts (expected a title line, then one abstract per line).")
    return papers


def load_file(path: Path, cache_dir: Path | None = None) -> list[Paper]:
    """Parse one corpus file; raises CorpusError naming the file and line on bad input.

    With `cache_dir`, the parse of a file whose name and bytes were seen before is reused.
    """
    path = Path(path)
    data = _read_bytes(path)
    if cache_dir is None:
        return _parse(path, data)
    key = hashlib.sha1(f"{_PARSER_KEY}\x1f{path.name}\x1f".encode() + data).hexdigest()
    cached = Path(cache_dir) / f"{key}.json"
    try:
        return [Paper(**fields) for fields in json.loads(cached.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        pass  # not cached yet, or unreadable: parse it
    papers = _parse(path, data)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps([asdict(paper) for paper in papers], ensure_ascii=False), encoding="utf-8")
        partial.replace(cached)
        for old in sorted(cached.parent.glob("*.json"), key=lambda p: p.stat().st_mtime)[:-_CACHE_FILES_KEPT]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache only costs parsing again next time
    return papers


def load_papers(paths: Iterable[Path], cache_dir: Path | None = None) -> list[Paper]:
    """Parse every corpus file, in the order given; file names must be unique."""
    papers: list[Paper] = []
    seen: set[str] = set()
    for path in paths:
        path = Path(path)
        if path.name in seen:
            raise CorpusError(f"{path}: another corpus file has the same name; paper ids derive from file names.")
        seen.add(path.name)
        papers.extend(load_file(path, cache_dir))
    if not papers:
        raise CorpusError("No corpus files given. Pass paper lists (.txt or .jsonl) to `assistant index`.")
    return papers
