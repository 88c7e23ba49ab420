"""Wording: the question as words, and the names and numbers it relies on.

Stems of content words (PyStemmer's English stemmer, stop words left out), the specific names a
question relies on ("SGLang", "Llama-3"), whether a name or number occurs in an abstract, the papers a
question names, and the ways a model words a refusal. Cheap signals over words: the judge weighs them
beside the model's judgements (see `judge`); none of them decides a reply by itself.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import Stemmer

from .cite import has_number, numbers_in
from .text import NOT_NAMES
from .types import Passage

_STEM = Stemmer.Stemmer("english")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9^]*(?:[-'][A-Za-z0-9]+)*")

# Function words, question words and the generic vocabulary of questions about papers: never a
# name and never what a question asks for.
STOPWORDS = frozenset(
    """a an the and or but if then than so of in on at to for from by with without within into onto over under
    about above below between through during after before as per via vs versus up down out off again also just only
    very really quite more most less least much many few some any all each every both either neither no not nor
    is are was were be been being am do does did doing done have has had having can could will would shall should
    may might must need needs i me my we our us you your he she it its they them their this that these those there
    here what which who whom whose when where why how whether one ones thing things something anything stuff
    paper papers work works study studies article articles authors author researchers method methods approach
    approaches technique techniques model models framework system proposed propose proposes new novel use used
    using uses get got gets give gives given report reports reported show shows shown find found finds say says
    said tell explain describe remember read recall think know like kind sort type way exactly roughly approximately
    around actual actually main key specific particular overall please thanks hi hey ok okay basically anyone
    someone collection corpus conference icml abstract abstracts mention mentioned mentions state stated achieve
    achieves achieved reach reaches reached reaching obtain obtains obtained""".split()
)

# Words that turn a statement into its opposite: kept where stop words are dropped.
NEGATIONS = frozenset({"not", "no", "never", "without", "neither", "nor", "cannot", "fails", "fail"})

# Ways a model says it cannot answer ("The abstract does not mention the batch size").
DECLINES = re.compile(
    r"\b(?:do(?:es)? not (?:contain|provide|mention|specify|state|include|say|give|report)|no (?:information|mention)|"
    r"(?:cannot|can't|unable to) (?:answer|determine|find|be determined)|not (?:mentioned|specified|provided|stated|given))\b",
    re.IGNORECASE,
)


def sanitize(question: str) -> str:
    """The question as words: HTML tags, terminal colour codes and control characters removed."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", " ", question)  # ANSI escape sequences ("\x1b[31m")
    text = re.sub(r"\[[0-9;]{1,8}m", " ", text)  # the same with the escape character lost
    text = re.sub(r"<[^<>]{1,200}>", " ", text)  # HTML tags
    text = html.unescape(text)
    text = "".join(c if c.isprintable() or c in "\n\t" else " " for c in text)
    return re.sub(r"[ \t]+", " ", text).strip()


def stems(text: str) -> list[str]:
    """Stems of the content words of `text` (stop words left out), in order; a hyphenated word
    also gives its parts ("cross-dataset": "cross-dataset", "cross", "dataset")."""
    words = []
    for word in _WORD.findall(text):
        word = word.lower()
        words.append(word)
        if "-" in word:
            words.extend(part for part in word.split("-") if part)
    return [s for w, s in zip(words, _STEM.stemWords(words)) if w not in STOPWORDS and len(w) > 1]


# -- names the question relies on ---------------------------------------------------------------

_NAME_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z][A-Za-z0-9^.]*(?:-[A-Za-z0-9]+)*)(?![A-Za-z0-9_-])")


def question_names(question: str) -> list[str]:
    """Specific names a question relies on ("SGLang", "Llama-3", "TruthfulQA"), never question words.

    A name has a capital inside it, a digit, or is capitalised in the middle of a sentence; the
    first word of each sentence and common words are never names.
    """
    names = []
    for sentence in re.split(r"(?<=[.?!:;])\s+|\n+", question):
        for position, match in enumerate(_NAME_TOKEN.finditer(sentence)):
            token = match.group(1).rstrip(".")
            if not token or token.lower() in STOPWORDS or len(token) < 2:
                continue
            inner_capitals = sum(c.isupper() for c in token[1:])
            digit = any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
            capitalised = token[0].isupper() and position > 0
            if inner_capitals or digit or (capitalised and token.lower() not in _COMMON_CAPITALISED):
                names.append(token)
    return list(dict.fromkeys(names))


# Words users capitalise mid-sentence that are not names of anything in an abstract.
_COMMON_CAPITALISED = frozenset({"i", "english", "chinese", "please", "thanks", "ok", "ai", "llm", "llms", "gpu", "gpus"})


def written(term: str, haystack: str) -> bool:
    """Whether a name or number appears in `haystack` (lower-case text) as the question writes it."""
    if any(c.isdigit() for c in term) and not any(c.isalpha() for c in term):
        return has_number(haystack, term)
    lowered = term.lower().replace("^", "")
    return lowered in haystack or lowered.rstrip("s") in haystack


def mentioned(term: str, haystack: str) -> bool:
    """Whether a name or number appears in `haystack` (lower-case text), acronyms spelled out too."""
    if written(term, haystack):
        return True
    letters = term[:-1] if term.endswith("s") and term[:-1].isupper() else term
    if letters.isupper() and 2 <= len(letters) <= 6:  # "LLM" -> "large language models"
        spelled = r"[\s-]+".join(rf"{re.escape(c.lower())}\w*" for c in letters)
        return re.search(rf"\b{spelled}", haystack) is not None
    return False


def generic(name: str) -> bool:
    """A capitalised word many abstracts share ("GPUs", "LLM-written", "GPT-style"): it names no paper."""
    parts = [p for p in re.split(r"-", name) if p]
    return all(p in NOT_NAMES or p.rstrip("s") in NOT_NAMES or p.upper() in {"GPT", "LLM", "GPU", "CPU", "API"}
               or p.islower() for p in parts)


def unknown_specifics(question: str, texts: Sequence[str], strict: bool = True) -> list[str]:
    """Names and numbers of `question` that appear in none of `texts` (case-insensitive).

    A hyphenated name is known when each of its parts is ("SCM-GRPO"). With `strict` False,
    generic capitalised words ("GPUs", "GPT-style") are not required to appear.
    """
    haystack = " ".join(texts).lower().replace("^", "").replace(",", "")

    def known(name: str) -> bool:
        if mentioned(name, haystack) or (not strict and generic(name)):
            return True
        parts = [p for p in name.split("-") if len(p) > 1]
        return len(parts) > 1 and all(mentioned(p, haystack) or p.islower() for p in parts)

    names = [t for t in question_names(question) if not known(t)]
    return names + [n for n in sorted(numbers_in(question)) if not has_number(haystack, n)]


def named_papers(question: str, passages: Sequence[Passage]) -> list[Passage]:
    """Passages whose paper the question names: by its title ("What batch size does Vegas use?") or
    by a name only its abstract uses ("the Robin model"), the most clearly named first."""
    lowered = question.lower()
    names = question_names(question)
    texts = {p.paper.id: p.paper.text.lower() for p in passages}
    scores: dict[str, float] = {}
    for passage in passages:
        title = passage.paper.title.lower()
        score = 0.0
        if len(title) >= 2 and "…" not in title and re.search(rf"(?<![\w-]){re.escape(title)}(?![\w-])", lowered):
            score += 2
        for name in names:
            if generic(name):
                continue  # "GPU", "LLM": common to many abstracts, they name no paper
            # As written: an acronym spelled out as any words with its initials names no paper ("RLHF"
            # found in "resolution, local heterogeneous features", "DPO" in "dimensional problem of").
            holders = [pid for pid, text in texts.items() if written(name, text)]
            if passage.paper.id in holders and len(holders) == 1:
                score += 1  # a name only this abstract uses
        if score:
            scores[passage.paper.id] = score
    return sorted((p for p in passages if p.paper.id in scores), key=lambda p: -scores[p.paper.id])

