"""Slots: whether a text carries what a question asks for (`intent` reads what that is).

Whether a sentence or an answer carries the asked slot (a number, a count, a dataset, a baseline, a
name) and says the focus in the question's words ("batch size"), with a small table of how
measurements are worded; whether an answer only restates its question; and, in words, what an
abstract that cannot answer does not give. Hand-written: no library tells whether a text answers the
asked slot. These are word rules, fitted on the project's questions: the judge takes what they find as
features beside the model's judgements, with weights fitted on data and checked on questions written
by others (see `judge`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .cite import numbers_in
from .evidence import Sentences
from .intent import CHANGE_VERBS, Intent, Slot
from .text import HAN, without_markers
from .wording import _STEM, generic, question_names, stems

# A measured quantity and the words abstracts use for it: "how much faster" is answered by a
# "speedup" or an "×", "how much memory" by "memory" or "GB". A generic table of measurement
# vocabulary, not of any paper.
MEASURES: dict[str, tuple[str, ...]] = {
    "fast": ("speedup", "speed", "faster", "throughput", "latency", "×", "accelerat", "time", "wall-clock", "efficien"),
    "speed": ("speedup", "speed", "faster", "throughput", "latency", "×", "accelerat"),
    "slow": ("latency", "overhead", "slower", "time"),
    "quick": ("speedup", "faster", "time", "latency"),
    "cheap": ("cost", "cheaper", "efficien", "saving", "budget", "reduc", "fewer"),
    "cost": ("cost", "cheaper", "budget", "saving", "expens", "reduc"),
    "save": ("saving", "reduc", "lower", "cost", "fewer", "less"),
    "small": ("reduc", "smaller", "fewer", "compress", "parameter", "size", "memory", "lower"),
    "big": ("parameter", "size", "larger", "scale", "billion", "million"),
    "larg": ("parameter", "size", "larger", "scale", "billion", "million", "length", "long"),
    "long": ("length", "long", "context", "token", "time", "horizon"),
    "memori": ("memory", "gb", "activation", "footprint"),
    "better": ("outperform", "improv", "better", "gain", "surpass", "exceed", "higher", "state-of-the-art", "sota"),
    "good": ("outperform", "improv", "better", "gain", "accuracy", "perform"),
    "accur": ("accuracy", "accurate", "error", "correct", "auroc", "f1", "score"),
    "improv": ("improv", "gain", "outperform", "better", "increas", "boost", "higher", "reduc"),
    "gain": ("improv", "gain", "outperform", "better", "increas", "boost"),
    "reduc": ("reduc", "lower", "fewer", "less", "decreas", "cut", "sav", "compress"),
    "lower": ("reduc", "lower", "fewer", "less", "decreas"),
    "cut": ("reduc", "lower", "fewer", "less", "decreas", "cut"),
    "beat": ("outperform", "better", "surpass", "exceed", "over", "than", "improv"),
    "outperform": ("outperform", "better", "surpass", "exceed", "over", "than", "improv"),
    "perform": ("perform", "accuracy", "score", "outperform", "result"),
    "error": ("error", "mae", "rmse", "loss", "accuracy"),
    "score": ("score", "accuracy", "auroc", "f1", "metric", "rate"),
    "speedup": ("speedup", "faster", "×", "throughput", "latency", "accelerat"),
    "higher": ("higher", "improv", "increas", "better", "outperform", "gain", "more", "boost"),
    "more": ("more", "higher", "improv", "increas", "better", "gain"),
    "less": ("less", "lower", "fewer", "reduc", "decreas"),
    "worse": ("worse", "lower", "degrad", "drop", "fail"),
    "faster": ("speedup", "faster", "speed", "throughput", "latency", "×", "accelerat", "time"),
    "effici": ("efficien", "speedup", "faster", "cost", "memory", "throughput", "fewer"),
    "scale": ("scale", "size", "parameter", "billion", "million", "famil", r"re:\b\d+(?:\.\d+)?\s?[mbk]\b"),
    "size": ("size", "parameter", "billion", "million", r"re:\b\d+(?:\.\d+)?\s?[mbk]\b"),
    # "by what factor", "how many times": abstracts write the multiple ("2.8×", "3-fold", "three times").
    "factor": ("×", "fold", "times", "factor", "speedup", r"re:\b\d+(?:\.\d+)?x\b"),
    "time": ("×", "fold", "times", "speedup", "faster", "time", "latency", "hour", "second", "minute"),
    # Everyday words for a change in a figure: "how big a jump", "what kind of boost", "a drop in error".
    "jump": ("improv", "gain", "increas", "higher", "boost", "better", "outperform", "×", "%"),
    "boost": ("improv", "gain", "increas", "higher", "boost", "better", "outperform", "×", "%"),
    "increas": ("improv", "gain", "increas", "higher", "boost", "more", "×", "%"),
    "drop": ("reduc", "lower", "fewer", "less", "decreas", "drop", "cut", "%"),
    "decreas": ("reduc", "lower", "fewer", "less", "decreas", "drop", "cut", "%"),
}
_MEASURE_FAMILIES = {_STEM.stemWord(k): v for k, v in MEASURES.items()}
_COUNT_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "dozen",
                "hundred", "thousand", "million", "billion", "single", "several", "multiple", "both")
_COMPARISON_WORDS = re.compile(
    r"\b(?:than|over|outperform\w*|surpass\w*|compared|comparison|relative to|against|baselines?|beats?|"
    r"exceed\w*|versus|vs\.?|state-of-the-art|sota|prior|previous|existing|improv\w*)\b", re.IGNORECASE)
_DATASET_WORDS = re.compile(r"\b(?:datasets?|benchmarks?|corpus|corpora|suites?|tasks?|data)\b", re.IGNORECASE)


# -- what an abstract that cannot answer does not give ---------------------------------------------


_ADJECTIVES = frozenset("large big fast long far often high low small accurate well quickly good".split())
_SLOT_PHRASES = {
    "number": "give that figure", "count": "give that count", "dataset": "say which datasets are used",
    "baseline": "say what it is compared against", "name": "give that name",
}


# Slots whose focus names a thing ("batch size", "GPUs", "failure modes"). A comparison's or a how
# question's focus is whatever words its frame left ("s difference Adam SGD", "remembered pieces"),
# and a focus that opens with a verb of change is the verb and the next word ("beat other", "reduce
# peak"): in a reply those read as garbled, the slot's own phrase ("give that figure") does not. Read
# on the focus of the three question sets' 273 questions that have one (the evaluation README,
# "Constants").
_NAMED_SLOTS = ("number", "count", "name", "dataset", "baseline", "other")


def asked_for(intent: Intent) -> str:
    """What an abstract that cannot answer does not do, in words ("give the batch size")."""
    focus = intent.focus
    if focus.lower() in _ADJECTIVES:
        return f"say how {focus}"
    if focus and " " not in focus and focus.lower().endswith("er") and _STEM.stemWord(focus.lower()) in _MEASURE_FAMILIES:
        return f"say how much {focus}"  # "faster", "higher"
    words = focus.lower().split()
    if intent.slot not in _NAMED_SLOTS or (words and (words[0] in CHANGE_VERBS or " ".join(words[:2]) in CHANGE_VERBS)):
        focus = ""
    if focus and intent.slot == "count":
        return f"give the number of {focus}"
    if focus and intent.slot == "name":
        return f"name the {focus}"
    if focus:
        return f"give the {focus}"
    return _SLOT_PHRASES.get(intent.slot, "answer that question")


# -- does the evidence hold what is asked for ----------------------------------------------------


# What a model writes for a paper it does not name ("Source reports ..."): not content.
# Words an answer uses to point at a paper instead of saying something: "source", and the verbs of
# "... is described / discussed / covered in source [1]".
_PLACEHOLDERS = frozenset(("sourc", "yes", "describ", "discuss", "cover", "address", "mention", "explain", "detail"))


def adds_nothing(answer: str, question: str) -> bool:
    """Whether every content word and figure of `answer` is already in `question`.

    Such an answer restates the question ("Seven LLM judges were analysed in the study [1]" to
    "Which seven LLM judges were analysed ...?", "replaces normalizing flows ... [1]" to "Which
    paper replaces normalizing flows ...?"): whatever it cites, it tells the reader nothing.
    """
    text = without_markers(answer)
    asked = {s.rstrip("s") for s in [*stems(question), *_PLACEHOLDERS]}  # "LLM" asked, "LLMs" answered
    figures = numbers_in(question)
    # A Chinese answer's content is in its characters, which `stems` does not see: "帧块相似性冗余"
    # answers "哪一种冗余" although its only Latin words (EchoAttention, DiT) are the question's.
    new_han = set(_HAN_CONTENT.findall(text)) - set(question)
    if len(new_han) >= 2:
        return False
    return all(s.rstrip("s") in asked for s in stems(text)) and numbers_in(text) <= figures


_HAN_CONTENT = re.compile(HAN.pattern + r"(?<![的了是在和与及也都有一这那个为将把被])")


def has_slot(slot: Slot, text: str) -> bool:
    """Whether a sentence (or an answer) could carry the asked slot at all."""
    text = without_markers(text)
    if slot == "number":
        return bool(numbers_in(text)) or bool(re.search(r"\d|×|%", text))
    if slot == "count":
        return bool(re.search(r"\d", text)) or bool(re.search(r"\b(?:%s)\b" % "|".join(_COUNT_WORDS), text, re.I))
    if slot == "baseline":
        return bool(_COMPARISON_WORDS.search(text))
    if slot == "dataset":
        return bool(_DATASET_WORDS.search(text)) or bool(re.search(r"\b[A-Z][A-Za-z0-9]*[A-Z0-9][A-Za-z0-9-]*\b", text))
    return True


# Words that name a kind of measurement rather than what is measured: "regret rate" asks for the
# regret, "simulation data" for the simulations. They count only when nothing else is asked.
_GENERIC_ATTRIBUTES = frozenset(_STEM.stemWords(
    "rate rates ratio score scores size sizes data results result performance time times setting settings".split()
))


# A count and the (up to four) words after it; a lookahead, so "ten models and four theories" sees both.
_COUNTED = re.compile(r"(?:\b\d[\d,.]*\b|\b(?:%s)\b)(?=((?:\s+[\w-]+){1,4}))" % "|".join(_COUNT_WORDS), re.IGNORECASE)


def states(intent: Intent, text: str) -> bool:
    """Whether an answer states what was asked: the slot (a number for "how many") and, when the
    question has a focus, its words ("how many value-labeled texts" needs texts, not components)."""
    if not has_slot(intent.slot, text):
        return False
    text_stems = set(stems(text))
    terms = focus_terms(intent.focus)
    if not all(covered(t, text_stems, text) for t in terms):
        return False
    return intent.slot != "count" or not terms or counts_of(terms, text)


def counts_of(terms: Sequence[str], text: str) -> bool:
    """Whether a count in `text` counts the asked thing: a number or count word followed, within four
    words, by a focus word ("seven LLM judges", "10 variables"). "How many value-labeled texts" is
    not answered by "three components" in a sentence that also speaks of texts."""
    text = without_markers(text)
    for match in _COUNTED.finditer(text):
        words = match.group(1)
        if any(covered(t, set(stems(words)), words) for t in terms):
            return True
    return False


# Words that name the kind of thing asked for; a sentence that names one ("HoVer") need not say it.
_SLOT_NOUNS = frozenset(_STEM.stemWords("dataset datasets benchmark benchmarks data corpus task tasks".split()))


def focus_terms(focus: str) -> list[str]:
    """The stems of the focus that must be found (measurement words stand for their family)."""
    terms = [t for t in dict.fromkeys(stems(focus)) if t not in _SLOT_NOUNS]
    specific = [t for t in terms if t not in _GENERIC_ATTRIBUTES]
    return specific or terms


def covered(term: str, sentence_stems: set[str], text: str) -> bool:
    """Whether one focus stem is said by a sentence: the word itself, or its measurement family."""
    if term in sentence_stems:
        return True
    family = _MEASURE_FAMILIES.get(term)
    if family:
        lowered = text.lower()
        return any(re.search(word[3:], lowered) if word.startswith("re:") else word in lowered for word in family)
    # A plural or a compound written differently ("GPUs" / "GPU", "pre-training" / "pretraining").
    return any(s.startswith(term) or term.startswith(s) for s in sentence_stems if min(len(s), len(term)) >= 4)


def focus_sentences(intent: Intent, sentences: Sentences, question: str = "") -> list[int]:
    """Indices of the sentences that say the focus (every focus stem) and can carry the slot (for a
    count, a count of the focus).

    For a name or a dataset the sentence must hold a name the question does not already give
    ("which base LLM ... SCM-GRPO?" is not answered by a sentence naming only SCM-GRPO).
    """
    terms = focus_terms(intent.focus)
    asked = {n.lower() for n in question_names(question)} | {sentences.paper.title.lower()}
    found = []
    for i, clean in enumerate(sentences.clean):
        if terms and not all(covered(t, sentences.stems[i], clean) for t in terms):
            continue
        if not has_slot(intent.slot, clean) or (intent.slot == "count" and terms and not counts_of(terms, clean)):
            continue
        if intent.slot in ("name", "dataset") and not [n for n in question_names(clean) if n.lower() not in asked
                                                        and not generic(n)]:
            continue
        found.append(i)
    return found


def missing_focus(intent: Intent, sentences: Sentences) -> list[str]:
    """Focus words the whole abstract never says (in any wording of their measurement family)."""
    text = " ".join(sentences.clean)
    return [t for t in focus_terms(intent.focus) if not covered(t, sentences.all_stems, text)]

