"""Decide: between retrieval and the answer, what the evidence supports.

Retrieval finds papers; this stage decides what to do with them, from evidence at the level
of sentences:
- it reads what the question asks for (`Intent`: a fact, which paper, every paper on a topic,
  a comparison; and the asked slot: a number, a count, a dataset, a baseline, a name, yes/no,
  a mechanism) and the asked-for thing in the question's own words (the focus: "batch size");
- it scores every sentence of the retrieved abstracts against the question (`ScoredSentence`, with
  stable ids `<paper id>:<sentence index>`);
- before the model is called it decides: refuse (nothing relevant), a near miss (the paper is
  found but its abstract does not give the asked detail: say what it does say, cited), a topic
  list (every candidate paper whose own sentence supports the topic), or answer from chosen
  sentences;
- after the model drafts it checks that the answer carries the asked slot (a number for "how
  many"), so that a sentence about the thing without the figure is never presented as the answer.

Hand-written: no library reads the asked slot of a question. The rules are generic English
question forms ("how many", "which dataset", "compared with what") and a small table of how
measurements are worded; none of them names a paper or a question of the evaluation set.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import Stemmer

from .cite import Source, has_number, numbers_in, sentence_pairs
from .text import HAN, NOT_NAMES
from .types import Paper, Passage

Encode = Callable[[list[str]], np.ndarray]
Kind = Literal["fact", "which_paper", "topic", "comparison"]
Slot = Literal["number", "count", "dataset", "baseline", "name", "yes_no", "mechanism", "paper", "papers", "other"]
Action = Literal["answer", "near_miss", "refuse"]

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


# -- what the question asks for ------------------------------------------------------------------


@dataclass(frozen=True)
class Intent:
    """What a question asks for: its kind, the asked slot, and the asked-for thing in its words."""

    kind: Kind
    slot: Slot
    focus: str = ""
    topic: str = ""  # topic questions: the topic without the "which papers are about" frame


_DASH_ANYTHING = r"\s[-\u2013\u2014:,]\s*anything\b"  # "X - anything in here on that?"
_TOPIC = re.compile(
    r"\b(?:which|what|any|list|show|find|name|are there|all|other|some|several)\s+(?:[\w-]+\s+){0,2}?"
    r"(?:papers|works|studies|articles|methods|approaches|publications)\b"
    r"|\b(?:is there|are there|which|what|any)\s+(?:any\s+)?(?:[\w-]+\s+)?(?:work|research)\b(?!\s+(?:that|which|where)\b)"
    r"|\b(?:papers|studies|articles|publications)\s+(?:on|about|that|which|dealing|looking|related|in|address\w*|"
    r"tackl\w*|use|using|with)\b"
    # "what in this collection is about X", "anything on X?", "X - anything in here on that?", "protein folding papers?"
    r"|\bwhat\s+in\s+(?:this|the)\s+(?:collection|corpus|list)\b"
    r"|(?:^|[?.!]\s+|\b(?:is there|are there|and)\s+)anything\s+(?:on|about|in here|here)\b"
    rf"|{_DASH_ANYTHING}"
    r"|^(?!(?:what|which|how|why|who|when|where|do|does|did|is|are|can|could|should)\b)[\w\s/+-]{2,50}?\s+papers\s*\??$",
    re.IGNORECASE,
)
_TOPIC_FRAME = re.compile(
    r"^.*?\b(?:papers|works|work|studies|articles|methods|approaches|publications|research|anything|"
    r"in (?:this|the) (?:collection|corpus|list))\b"
    r"(?:\s+(?:in|of)\s+(?:this|the)\s+(?:collection|corpus|conference|list))?(?:\s+is\s+there)?"
    r"(?:\s+(?:are|is|were|that|which|does|do)\b)*\s*(?:about|on|related to|dealing with|deal with|address(?:es)?|"
    r"look(?:s|ing)? at|study|studies|tackle|tackles|focus(?:es)? on|work on|use|using|apply|applying|propose|"
    r"in|with|for|concern(?:ing)?|regarding|covering|cover)?\s*",
    re.IGNORECASE,
)
# The frame at the end: "X - anything in here on that?", "protein folding papers?"
_TOPIC_TAIL = re.compile(
    rf"(?:{_DASH_ANYTHING}.*|[?.!]\s+anything(?:\s+(?:in\s+)?here)?(?:\s+on\s+(?:that|this))?\s*\??"
    r"|\s+papers\s*\??)$",
    re.IGNORECASE,
)
# What the frame leaves of a second verb ("use or analyse GRPO") and a leading article.
_TOPIC_LEAD = re.compile(r"^(?:(?:or|and|and/or)\s+[\w-]+\s+(?=\S))?(?:(?:a|an|the)\s+(?=\S))?", re.IGNORECASE)
_COMPARE = re.compile(
    r"\b(?:differ|differs|difference|differences|different from|contrast|versus|vs\.?|similarities|in common)\b"
    r"|^\s*compare\b|\bcompar\w* between\b|\bhow do\b.+\band\b.+\b(?:relate|compare)\b"
    r"|\b(?:both|two papers)\b.+\beach(?: one| of them)?\b|\btwo papers\b",
    re.IGNORECASE,
)
_WHICH_PAPER = re.compile(
    r"\b(?:which|what)\s+(?:paper|work|study|article)\b(?!s)"
    r"|\bwhich\s+(?:method|one|approach|model|technique|framework|system)\b(?!s)"
    r"|^(?:so\s+|and\s+|also\s+)?(?:is|was|are)\s+there\s+(?:a|an|any|some)?\b"
    r"|\b(?:has|have|did)\s+(?:someone|anyone|anybody|somebody)\b"
    r"|\b(?:is|was)\s+there\s+(?:a|any|some)?\s*(?:paper|work|method|study|research)\b"
    r"|\bwhich one\b|\bwhat(?:'s| is| was) (?:it|that|the (?:paper|method)) called\b|\bname of (?:the|that) "
    r"(?:paper|method)\b|\bany (?:paper|work|study)\b|\bi (?:remember|recall|read|saw)\b.*\b(?:paper|one)\b",
    re.IGNORECASE,
)
_YES_NO = re.compile(r"^(?:[\w-]+,\s*)?(?:does|do|did|is|are|was|were|can|could|has|have|had|will|would|should)\b", re.IGNORECASE)
_MECHANISM = re.compile(r"\b(?:how (?:does|do|did|is|are|was|were|can)|why|what does .+ do\b|what is the idea|explain|"
                        r"in what way|what (?:is|are) the (?:main )?(?:idea|components?|mechanisms?|steps?|insight))",
                        re.IGNORECASE)
_NOT_AUX = r"(?!(?:does|do|did|is|are|was|were)\b)"
_EMBEDDED_HOW = re.compile(
    r"(?<=[a-z] )(?<!\band )(?<!\bor )(?:on|of|about|than|tell|know|compute|computes|computing|measure|measures|"
    r"estimate|estimates|see|show|shows|decide|determine|determines|control|controls|track|tracks)\s+how (?:much|many)\b",
    re.IGNORECASE,
)
_NUMBER_Q = re.compile(
    r"\bhow (?:much|large|big|fast|long|far|often|high|low|small|many times|accurate|well)\b|\bby how much\b|"
    r"\bwhat (?:percentage|percent|fraction|proportion|share|ratio|factor|speed-?up|accuracy|score|rate|value|number)\b|"
    r"\bto what (?:extent|degree)\b|\bwhat is the (?:size|speed-?up|accuracy|score|rate|error|gain|improvement)\b",
    re.IGNORECASE,
)
_MEASURE_NOUNS = re.compile(
    r"\b(?:speed-?ups?|accuracy|auroc|auc|f1|score|scores|rate|error|errors|gain|gains|improvement|reduction|"
    r"percentage|latency|throughput|memory|cost|size|length|ratio|regret|bound|parameters?|iou|dice|bleu|"
    r"perplexity|return|reward|win rate|success rate|times|factor|coefficients?|correlation|runtime|"
    r"wall-clock(?: time| runtime)?|temperature|learning rate|batch size|budget|threshold|epsilon)\b",
    re.IGNORECASE,
)
# "Which correlation coefficient", "which success rate": a figure, although asked with "which".
_WHICH_FIGURE = re.compile(r"\bwhich (?:[\w-]+ )?(?:coefficients?|correlation|scores?|ratio|factor|percentage|"
                           r"(?:success|error|win|fix) rate)\b", re.IGNORECASE)
_DATASET_Q = re.compile(r"\b(?:which|what|on what|on which|name the)\s+(?:\w+\s+)?(?:datasets?|benchmarks?|data|corpora|"
                        r"corpus|environments?)\b", re.IGNORECASE)
_BASELINE_Q = re.compile(
    r"\b(?:compared (?:to|with) what|against (?:what|which|whom)|over what|than what|which baselines?|"
    r"what baselines?|what (?:does it|do they) (?:beat|outperform|compare)|(?:beat|outperform)s? (?:what|which)|"
    r"relative to what|what .{0,30}(?:compare|compared) (?:to|with|against)|which (?:existing )?(?:approaches|methods) "
    r"does it (?:position|compare))", re.IGNORECASE)
# "Which base LLM", "what OCR engine", "which GPU": the answer is the name of a thing.
_ENTITY_Q = re.compile(
    r"\b(?:which|what)\s+(?:specific\s+|exact\s+|particular\s+)?(?:[\w-]+\s+){0,2}?(?:llms?|language models?|"
    r"models?|engines?|algorithms?|architectures?|optimi[sz]ers?|gpus?|hardware|librar(?:y|ies)|backbones?|"
    r"encoders?|solvers?|judges?|simulators?|tools?|networks?|baselines?|methods?|bit-widths?|precisions?)\b"
    r"(?!\s+(?:of|in)\s+(?:this|the)\s+(?:collection|corpus))",
    re.IGNORECASE,
)
_NAME_Q = re.compile(r"\bwhat(?:'s| is| was| are) (?:it|its|the method|the model|the approach|that|this) (?:called|named)"
                     r"|\b(?:name|acronym) of\b|\bwhat (?:is|was) the name\b", re.IGNORECASE)
_FOCUS_AFTER = re.compile(
    r"\b(?:what|which)\s+((?:[\w-]+\s+){0,3}?[\w-]+)(?:\s+(?:in|per)\s+(?:[\w-]+\s+){0,2}?[\w-]+)?\s+"
    r"(?:does|do|did|is|are|was|were|has|have|had|can|could|would|will|should)\b", re.IGNORECASE)
_NUMBER_OF = re.compile(r"\b(?:number|amount|count)\s+of\s+((?:[\w-]+\s+){0,2}?[\w-]+)(?=\s+(?:in|of|for|on|used|does|did|is|are|was|were|that|they|it)\b|[?.!,]|$)",
                        re.IGNORECASE)
_FOCUS_OF = re.compile(r"\bwhat(?:'s| is| was| are| were)\s+(?:the\s+)?((?:[\w-]+\s+){0,4}?[\w-]+)\s+"
                       r"(?:(?:of|for|in|on|that|used|they|it|when|does|do|did|at|with|between|per)\b|"
                       r"(?=(?-i:[A-Z])[\w-]*\s+(?:reports?|uses?|achieves?|gets?|reaches?|obtains?|shows?)\b))",
                       re.IGNORECASE)
_HOW_MANY = re.compile(r"\bhow many\s+((?:[\w-]+\s+){0,3}?[\w-]+)(?=\s+(?:does|do|did|is|are|was|were|were|has|have|"
                       r"had|can|could|in|of|for|on|they|it|the|were|did)\b|[?.!,]|$)", re.IGNORECASE)
_HOW_MUCH = re.compile(r"\bhow (much|many times)\s+(?:(more|less|better|worse)\s+)?(%s[\w-]+(?: %s[\w-]+)?)?"
                       % (_NOT_AUX, _NOT_AUX), re.IGNORECASE)
# "How much does it save in annotation?", "how much can the method reduce latency?": what changes,
# and in what (the verb and its object), when no noun follows "how much".
_HOW_MUCH_VERB = re.compile(
    r"\bhow much\s+(?:does|do|did|can|could|will|would|is|are)\s+(?:[\w-]+\s+){1,3}?"
    r"(save|reduce|cut|improve|lower|increase|gain|shrink|boost|compress|outperform|accelerate|speed up|beat)s?\b"
    r"(?:\s+(?:in|on|of|the|its|their)\b)*\s*([\w-]+)?", re.IGNORECASE)
_HOW_ADJ = re.compile(r"\bhow (large|big|fast|long|far|often|high|low|small|accurate|well|quickly|good)\b", re.IGNORECASE)
# "how large a speedup", "how big an improvement in accuracy": the noun is what is asked, not the adjective.
_HOW_ADJ_A = re.compile(r"\bhow (?:large|big|much of|high|small|strong|substantial|significant) an? ((?:[\w-]+ (?=in |of ))?[\w-]+)",
                        re.IGNORECASE)
_BY_HOW_MUCH = re.compile(r"\b([\w-]+)\s+(?:\w+\s+){0,4}?by how much\b|\bby how much\s+(?:\w+\s+){0,3}?([\w-]+)",
                          re.IGNORECASE)


# Words that qualify what is asked without being it: "the largest number of", "the average".
_QUALIFIERS = frozenset(
    """number amount value values range level degree largest smallest highest lowest best worst biggest maximum
    minimum max min average mean median total exact final typical overall reported main kind type sort
    first last top whole entire much two three four five six seven eight nine ten several various""".split()
)


def _clean_focus(phrase: str) -> str:
    # "kinds of cues", "the two mechanisms": the plural of a qualifier qualifies too.
    words = [w for w in re.findall(r"[\w-]+", phrase) if not {w.lower(), w.lower().removesuffix("s")} & (STOPWORDS | _QUALIFIERS)]
    return " ".join(words)


# "哪篇论文 / 哪些工作 / 哪一项研究": a which-paper question in Chinese. Its English rewrite is often
# a bare search phrase ("Sparse attention in video editing research") that no longer asks "which".
_WHICH_PAPER_ZH = re.compile(r"哪一?篇|哪些(?:论文|文章|工作|研究)|哪一?[个项份](?:论文|文章|工作|研究)")


def read_question(question: str, original: str = "") -> Intent:
    """The kind of question, its asked slot and focus. `question` is English (callers pass the
    English query); `original` is the question as typed, read for a Chinese "which paper"."""
    q = " ".join(question.split())
    if _WHICH_PAPER_ZH.search(original) and not _WHICH_PAPER.search(q):
        q = f"Which paper is about {q.rstrip(' ?.!')}?"
    opening = _WHICH_PAPER.match(q.lower().lstrip("¿ "))
    if _COMPARE.search(q) and not _TOPIC.search(q) and not opening:
        return Intent("comparison", "mechanism", _clean_focus(q))
    # "Is there work on X? How many variables does it handle?", "Which approaches does it compare
    # against?": a detail of one paper, not a list of papers.
    asks_of_one = re.search(r"\b(?:it|its)\b", q, re.IGNORECASE)
    if _TOPIC.search(q) and not re.search(r"\bwhich (?:paper|one)\b", q, re.IGNORECASE) and not asks_of_one:
        tail = _TOPIC_TAIL.search(q)
        if tail:
            topic = q[: tail.start()].strip(" ?.!")
        else:
            topic = _TOPIC_FRAME.sub("", q, count=1).strip(" ?.!") if _TOPIC_FRAME.match(q) else q
        topic = _TOPIC_LEAD.sub("", topic, count=1)
        return Intent("topic", "papers", "", topic or q)
    which = bool(_WHICH_PAPER.search(q))
    # "... depends on how many requests show up", "tell how much to trust": an embedded clause
    # describes the paper; it does not ask for a figure.
    asked = _EMBEDDED_HOW.sub(" ", q)
    slot: Slot
    if _BASELINE_Q.search(q):
        slot = "baseline"
    elif _YES_NO.match(q) and not re.search(r"[.?!]\s+\S", q.rstrip(" ?.!")):
        # One sentence that opens with "does / is / can": it asks whether, not how much.
        slot = "yes_no" if not which else "paper"
    elif re.search(r"\bhow many\b|\b(?:what|the|total|largest|smallest|maximum|minimum)(?: is| was| are)?(?: the)? number of\b", asked, re.IGNORECASE) \
            and not re.search(r"how many times", asked, re.I):
        slot = "count"
    elif _DATASET_Q.search(q):
        slot = "dataset"
    elif _NAME_Q.search(q) or (_ENTITY_Q.search(q) and not which):
        slot = "name"
    elif _NUMBER_Q.search(asked) or _WHICH_FIGURE.search(q) or re.search(r"\bwhat(?:'s| is| was| are| were)? (?:the )?(?:%s[\w-]+ ){0,3}?%s"
                                          % (_NOT_AUX, _MEASURE_NOUNS.pattern), q, re.IGNORECASE):
        slot = "number"
    elif _YES_NO.match(q) or re.search(r"[.?!]\s*(?:does|do|did|is|are|was|were|can)\b", q, re.IGNORECASE):
        slot = "yes_no" if not which else "paper"
    elif _MECHANISM.search(q):
        slot = "mechanism"
    else:
        slot = "paper" if which else "other"
    return Intent("which_paper" if which and slot in ("paper", "other", "mechanism") else "fact", slot, _focus(q, slot))


# -- follow-ups ------------------------------------------------------------------------------------

# Words that point back into the conversation: "it", "they", "that method", "those neurons", "the
# approach". A demonstrative counts after a verb or preposition or at the start ("with that
# framework", "When do those neurons"), not as a conjunction ("a paper that uses ..."); "the
# approach" counts unless a description follows ("the paper on count data").
_POINTS_BACK = re.compile(
    r"\b(?:it|its|itself|they|them|their|theirs|themselves)\b"
    r"|(?:^|[.?!,;:]\s*|\b(?:of|for|in|on|with|about|by|from|to|under|behind|does|do|did|was|is|are|were|when|where|"
    r"how|and|use|uses|used|using)\s+)(?:this|that|these|those|the same)\s+(?!(?:is|are|was|were|does|do|did|has|have)\b)[\w-]+"
    r"|\bthe (?:paper|work|study|method|approach|model|framework|technique|algorithm|authors|system|idea|proposal)\b"
    r"(?!\s+(?:on|about|that|which|where|for|from|in|with|called|named|by|of|proposing|using|studying)\b)",
    re.IGNORECASE,
)


# A sentence that asks for a paper binds its own "it" ("which paper prunes trees, and how much does
# it save?"); one that brings a new subject binds the "it" of the sentences after it.
_ASKS_PAPER = re.compile(
    r"\b(?:which|what)\s+(?:paper|work|study|article|one)\b|\b(?:has|have|did)\s+(?:someone|anyone)\b"
    r"|\b(?:is|are)\s+there\s+(?:a|an|any|some)?\s*(?:papers?|works?|research|stud(?:y|ies)|methods?)\b",
    re.IGNORECASE,
)
ELLIPTICAL_WORDS = 3  # a follow-up of fewer content words that names nothing has no subject of its own
_NEW_SUBJECT = re.compile(r"\b(?:is|are|was|were)\s+there\s+(?:a|an|any|some)\b", re.IGNORECASE)


def refers_back(question: str) -> bool:
    """Whether a follow-up leans on the conversation for what it is about ("How did they evaluate
    it?"), rather than bringing its own subject ("Which paper prunes tree ensembles, and by how much
    does it compress them?", "Is there a neural operator for subsurface flow? What does it learn
    from?", "What does ReWA stand for?"). A short one that names nothing ("And the speedup?")
    leans on the conversation too. Such a follow-up is searched for together with the
    conversation; any other is searched for as typed (no model call to rewrite it)."""
    q = " ".join(question.split())
    if len(stems(q)) < ELLIPTICAL_WORDS and not question_names(q):
        return True  # "And the speedup?", "What about memory?": the subject is the conversation's
    introduced = False
    for sentence in re.split(r"(?<=[.?!:])\s+", q):
        if _POINTS_BACK.search(sentence):
            return not (introduced or _ASKS_PAPER.search(sentence))
        introduced = introduced or bool(_WHICH_PAPER.search(sentence) or _NEW_SUBJECT.search(sentence))
    return False


TURN_CHARS = 600  # of an earlier message, read with a follow-up (by the search, or by the model's rewrite)
FOLLOW_UP_ANSWER_CHARS = 300  # of the last answer, searched with a follow-up that leans on it (it names the paper)


def conversation_query(question: str, history: Sequence[dict[str, str]]) -> str:
    """What an English follow-up is searched for: the question as typed when it brings its own
    subject, else the question with the last question and the start of the last answer (which
    names the paper). On the evaluation's follow-ups this finds the paper first as often as the
    model's rewrite did, and costs no model call."""
    if not history or not refers_back(question):
        return question
    context = [last_said(history, "user")[:TURN_CHARS], last_said(history, "assistant")[:FOLLOW_UP_ANSWER_CHARS]]
    return " ".join([question, *filter(None, context)])


def with_last_question(question: str, history: Sequence[dict[str, str]]) -> str:
    """A follow-up with the question it follows: what its evidence sentences are weighed against."""
    return " ".join(filter(None, [question, last_said(history, "user")[:TURN_CHARS]]))


def last_said(history: Sequence[dict[str, str]], role: str) -> str:
    """The last message of `role` in a conversation ("" when there is none)."""
    return next((str(t.get("content", "")) for t in reversed(history) if t.get("role", "user") == role), "")


def _focus(q: str, slot: Slot) -> str:
    """The asked-for thing in the question's words ("batch size", "GPUs", "faster"), or ""."""
    for sentence in reversed(re.split(r"(?<=[.?!])\s+", q)):  # the question is usually last
        sentence = re.sub(r"\s*\([^()]*\)", "", sentence)  # "(epsilon)" explains; it is not the thing asked
        candidates: list[str] = []
        if slot == "count":
            candidates += [m.group(1) for m in _HOW_MANY.finditer(sentence)]
            candidates += [m.group(1) for m in _NUMBER_OF.finditer(sentence)]
        for m in _HOW_MUCH.finditer(sentence):
            candidates.append(" ".join(g for g in m.groups()[1:] if g))
        candidates += [" ".join(g for g in m.groups() if g) for m in _HOW_MUCH_VERB.finditer(sentence)]
        candidates += [m.group(1) for m in _HOW_ADJ_A.finditer(sentence)]
        candidates += [m.group(1) for m in _HOW_ADJ.finditer(sentence)]
        for m in _BY_HOW_MUCH.finditer(sentence):
            candidates.append(m.group(1) or m.group(2) or "")
        candidates += [m.group(1) for m in _FOCUS_AFTER.finditer(sentence)]
        candidates += [m.group(1) for m in _FOCUS_OF.finditer(sentence)]
        for candidate in candidates:
            focus = _clean_focus(candidate)
            if focus:
                return focus
    return ""


_ADJECTIVES = frozenset("large big fast long far often high low small accurate well quickly good".split())
_SLOT_PHRASES = {
    "number": "give that figure", "count": "give that count", "dataset": "say which datasets are used",
    "baseline": "say what it is compared against", "name": "give that name",
}


def asked_for(intent: Intent) -> str:
    """What an abstract that cannot answer does not do, in words ("give the batch size")."""
    focus = intent.focus
    if focus.lower() in _ADJECTIVES:
        return f"say how {focus}"
    if focus and " " not in focus and focus.lower().endswith("er") and _STEM.stemWord(focus.lower()) in _MEASURE_FAMILIES:
        return f"say how much {focus}"  # "faster", "higher"
    if focus and intent.slot == "count":
        return f"give the number of {focus}"
    if focus and intent.slot == "name":
        return f"name the {focus}"
    if focus:
        return f"give the {focus}"
    return _SLOT_PHRASES.get(intent.slot, "answer that question")


# -- evidence ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredSentence:
    """One sentence of an abstract scored against the question; `id` is stable across runs."""

    id: str
    paper: Paper
    index: int
    raw: str
    clean: str
    score: float


@dataclass
class Sentences:
    """An abstract split into sentences (verbatim and cleaned, aligned), with their vectors."""

    paper: Paper
    raw: list[str]
    clean: list[str]
    vectors: np.ndarray
    stems: list[set[str]] = field(default_factory=list)
    all_stems: set[str] = field(default_factory=set)


class SentenceBank:
    """Sentences of every paper the assistant has looked at, embedded once and kept."""

    def __init__(self, encode: Encode) -> None:
        self.encode = encode
        self._cache: dict[str, Sentences] = {}

    def get(self, paper: Paper) -> Sentences:
        cached = self._cache.get(paper.id)
        if cached is None:
            self.warm([paper])
            cached = self._cache[paper.id]
        return cached

    def warm(self, papers: Sequence[Paper]) -> None:
        """Embed the sentences of the papers not seen yet, in one batch."""
        todo = [p for p in dict.fromkeys(papers) if p.id not in self._cache]
        if not todo:
            return
        pairs = [sentence_pairs(p) for p in todo]
        vectors = self.encode([s for _, clean in pairs for s in clean])
        at = 0
        for paper, (raw, clean) in zip(todo, pairs):
            sentence_stems = [set(stems(s)) for s in clean]
            self._cache[paper.id] = Sentences(
                paper, raw, clean, vectors[at: at + len(clean)], sentence_stems, set().union(*sentence_stems)
            )
            at += len(clean)


LEXICAL_WEIGHT = 0.2  # shared content words add up to this to a sentence's cosine similarity


def score_sentences(sentences: Sentences, query_vector: np.ndarray, question_stems: set[str]) -> list[ScoredSentence]:
    """Every sentence of one abstract as evidence: embedding similarity plus shared content words."""
    similarity = sentences.vectors @ query_vector
    out = []
    for i, (raw, clean) in enumerate(zip(sentences.raw, sentences.clean)):
        overlap = len(question_stems & sentences.stems[i]) / len(question_stems) if question_stems else 0.0
        out.append(ScoredSentence(f"{sentences.paper.id}:{i}", sentences.paper, i, raw, clean,
                            round(float(similarity[i]) + LEXICAL_WEIGHT * overlap, 4)))
    return out



def question_phrases(question: str) -> list[str]:
    """The question's content phrases: runs of words between stop words and punctuation
    ("automatic speech recognition", "legal documents", "several chatbots talk")."""
    phrases: list[str] = []
    current: list[str] = []
    for token in [*re.findall(r"[\w'-]+|[^\w\s]", question), "."]:
        if token.lower() in STOPWORDS or not re.match(r"\w", token):
            if current:
                phrases.append(" ".join(current))
            current = []
        else:
            current.append(token)
    return [p for p in phrases if len(p) > 2]


def spoken_to(phrase_vectors: np.ndarray, sentences: Sentences) -> float:
    """How clearly an abstract says the question's best-covered phrase (cosine of the closest
    phrase-sentence pair): an abstract near a question about something else says none of it."""
    if not len(phrase_vectors) or not len(sentences.vectors):
        return 0.0
    return float((np.asarray(phrase_vectors) @ np.asarray(sentences.vectors).T).max())


def best(evidence: Sequence[ScoredSentence], n: int) -> list[ScoredSentence]:
    """The n best sentences, best first."""
    return sorted(evidence, key=lambda e: -e.score)[:n]


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
    text = re.sub(r"\[\d+(?:\s*[,;]\s*\d+)*\]", " ", answer)
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
    text = re.sub(r"\[\d+(?:\s*[,;]\s*\d+)*\]", " ", text)  # citation markers are not figures
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
    text = re.sub(r"\[\d+(?:\s*[,;]\s*\d+)*\]", " ", text)
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


def mentioned(term: str, haystack: str) -> bool:
    """Whether a name or number appears in `haystack` (lower-case text), acronyms spelled out too."""
    if any(c.isdigit() for c in term) and not any(c.isalpha() for c in term):
        return has_number(haystack, term)
    lowered = term.lower().replace("^", "")
    if lowered in haystack or lowered.rstrip("s") in haystack:
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


# -- the decision --------------------------------------------------------------------------------


@dataclass
class Decision:
    """What to do with a question, made on the numbered sources and their scored sentences."""

    action: Action
    intent: Intent
    sources: list[Source]
    evidence: dict[int, list[ScoredSentence]]  # source number -> every sentence of its abstract, scored
    subject: Source | None = None  # the paper the question is about (named, or the closest)
    named: bool = False  # whether the question names `subject` (by its title or a name only it uses)
    missing: str = ""  # near misses: what the abstract does not give, in the question's words
    notices: list[str] = field(default_factory=list)
    confidence: float = 0.0  # the best evidence sentence's score
    question: str = ""
    english: str = ""  # the question in English: the model's rewrite of a Chinese question or a follow-up


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
            holders = [pid for pid, text in texts.items() if mentioned(name, text)]
            if passage.paper.id in holders and len(holders) == 1:
                score += 1  # a name only this abstract uses
        if score:
            scores[passage.paper.id] = score
    return sorted((p for p in passages if p.paper.id in scores), key=lambda p: -scores[p.paper.id])


# -- topics ---------------------------------------------------------------------------------------

TOPIC_KEYWORD_WEIGHT = 0.4  # a topic's own words in a paper's chunks count beside the fused score
# What tells a candidate on the topic from one near it, each also as its distance from the best
# candidate's (a broad topic has many near papers, a narrow one a clear gap):
# - relevance: its best sentence's similarity to the topic (or to the alternative or example of it,
#   `topic_parts`, that the sentence is closest to) + its fused retrieval score + 0.4 x its keyword
#   score relative to the best candidate's;
# - the cross-encoder's logit for its closest sentence (against the topic and each part), and for
#   its title and abstract read whole (against the topic).
TOPIC_FEATURES = ("relevance", "relevance - best", "sentence logit", "sentence logit - best",
                  "abstract logit", "abstract logit - best")
# A logistic regression over those features, fitted by the evaluation's fit_topic script on its topic and
# multi-paper questions (leave-one-question-out estimates are printed there); not tuned on single questions.
TOPIC_WEIGHTS = (0.7673, 0.4658, 0.1908, 0.1437, 0.1006, 0.1568)
TOPIC_BIAS = 1.3046

# Where a backend gives log-probabilities, the model is asked of each candidate the rule above
# finds at least TOPIC_JUDGE_FLOOR likely (4-5 per question, against 10 read by the cross-encoder)
# "Is this paper about <topic>?", with the paper's whole abstract as a question about it opens its
# prompt (a kept paper is not read again). Its log-odds of "yes" against "no", also as the distance
# from the best candidate's, join the features of a second regression fitted the same way. The
# model's odds alone ranked the candidates better than any other feature (ROC AUC 0.97 against 0.91
# for the cross-encoder's reading of the abstract, over 544 candidates of the topic questions and tables).
TOPIC_JUDGE_FLOOR = 0.05
TOPIC_JUDGED_FEATURES = (*TOPIC_FEATURES, "model log-odds", "model log-odds - best")
TOPIC_JUDGED_WEIGHTS = (0.1149, 0.1856, 0.1551, 0.1949, 0.0001, -0.0173, 1.1823, 1.0709)
TOPIC_JUDGED_BIAS = 1.1637
ODDS_CLIP = 10.0  # log-odds beyond this say no more: a paper is plainly on or off the topic
Judge = Callable[[Passage], float | None]

TOPIC_SENTENCES_READ = 3
# No paper of the evaluation's topic questions (39, 94 gold papers) had a relevance under 0.75.
TOPIC_RELEVANCE_FLOOR = 0.7
UNRELATED_LOGIT = -12.0
Rerank = Callable[[str, Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class TopicMember:
    """A candidate paper weighed for a topic: its own sentence closest to the topic, and how likely
    it is on the topic (0-1)."""

    passage: Passage
    sentence: ScoredSentence
    score: float


# A topic that names alternatives or examples ("X or Y", "X / Y", "X, e.g. A, B or C", "X (A, B)")
# is about any of them: a paper on Y alone is on it. "X and Y" in a topic reads the same way (a
# reader asking for "bandits and online learning" wants papers on either): on the 14 table topics
# this took row recall from 0.702 to 0.726 at the same precision, and no topic question changed.
_TOPIC_EXAMPLES = re.compile(r",?\s*\b(?:e\.g\.?|i\.e\.?|such as|like|including|for example|for instance)\s+"
                             r"|\s+[-\u2013\u2014:]\s+|\s*\(", re.IGNORECASE)
_TOPIC_OR = re.compile(r"\s+(?:or|and)\s+|\s*/\s*", re.IGNORECASE)


def topic_parts(topic: str) -> list[str]:
    """The topic, then each alternative ("or", "and", "/"; of two content words or more) and each example it names."""
    found = _TOPIC_EXAMPLES.search(topic)
    head, examples = (topic[: found.start()], topic[found.end():]) if found else (topic, "")
    alternatives = _TOPIC_OR.split(head)
    parts = [a.strip(" ,.?!") for a in alternatives if len(alternatives) > 1 and len(stems(a)) >= 2]
    for example in re.split(rf"{_TOPIC_OR.pattern}|,\s*|\)", examples, flags=re.IGNORECASE):
        example = re.sub(r"\betc\b\.?|^\s*(?:or|and)\s+", "", example).strip(" ,.?!()")
        if stems(example):
            parts.append(example)
    return [topic, *(p for p in dict.fromkeys(parts) if p.lower() != topic.lower())]


def topic_features(
    topic: str, topic_vector: np.ndarray, candidates: Sequence[Passage], bank: SentenceBank, rerank: Rerank
) -> list[tuple[Passage, ScoredSentence, np.ndarray]]:
    """Each candidate with the sentence that best shows the topic and its `TOPIC_FEATURES`, in candidate order."""
    bank.warm([p.paper for p in candidates])
    parts = topic_parts(topic)
    vectors = [topic_vector, *bank.encode(parts[1:])] if len(parts) > 1 else [topic_vector]
    part_stems = [set(stems(part)) for part in parts]
    top_keyword = max((p.keyword_score for p in candidates), default=0.0) or 1.0
    weighed = []  # (passage, its sentences closest to the topic, relevance)
    for passage in candidates:
        sentences = bank.get(passage.paper)
        # Each sentence scored against the part of the topic it is closest to.
        by_part = [score_sentences(sentences, v, st) for v, st in zip(vectors, part_stems)]
        scored = [max(options, key=lambda s: s.score) for options in zip(*by_part)]
        if scored:
            relevance = max(s.score for s in scored) + passage.score + TOPIC_KEYWORD_WEIGHT * passage.keyword_score / top_keyword
            weighed.append((passage, best(scored, TOPIC_SENTENCES_READ), relevance))
    if not weighed:
        return []
    # The cross-encoder reads, in batches, the closest sentences (against every part of the topic)
    # and the whole abstract of every candidate not far from the topic on every other count (its
    # logits bottom out near -11 for unrelated text, so the others get that without being read).
    read = [(p, closest) for p, closest, relevance in weighed if relevance >= TOPIC_RELEVANCE_FLOOR]
    texts = [s.clean for _, closest in read for s in closest]
    part_logits = np.max([rerank(part, texts) for part in parts], axis=0) if texts else np.zeros(0)
    sentence_logits = iter(part_logits)
    abstract_logits = iter(rerank(topic, [f"{p.paper.title}. {p.paper.text}" for p, _ in read]))
    rows = []
    for passage, closest, relevance in weighed:
        if relevance < TOPIC_RELEVANCE_FLOOR:
            rows.append((passage, closest[0], np.array([relevance, UNRELATED_LOGIT, UNRELATED_LOGIT])))
            continue
        logits = [float(next(sentence_logits)) for _ in closest]
        whole = float(next(abstract_logits))
        rows.append((passage, closest[int(np.argmax(logits))], np.array([relevance, max(logits), whole])))
    best_values = np.max([values for _, _, values in rows], axis=0)
    return [(p, s, np.column_stack([v, v - best_values]).ravel()) for p, s, v in rows]


def on_topic(
    topic: str, topic_vector: np.ndarray, candidates: Sequence[Passage], bank: SentenceBank, rerank: Rerank,
    threshold: float, judge: Judge | None = None,
) -> tuple[list[TopicMember], list[TopicMember]]:
    """The candidates on `topic` (each with the sentence that shows it), and every candidate weighed, best first.

    A candidate is on the topic when the fitted rule (`TOPIC_WEIGHTS`) gives it a probability of at
    least `threshold`. With `judge` (the model's log-odds that a candidate is on the topic, or None
    where it cannot tell), the candidates the rule finds at least `TOPIC_JUDGE_FLOOR` likely and the
    model can tell about are weighed again with its odds (`TOPIC_JUDGED_WEIGHTS`). Used by topic
    questions and by the rows of a table chosen by topic.
    """
    rows = topic_features(topic, topic_vector, candidates, bank, rerank)
    scores = [_logistic(features, TOPIC_WEIGHTS, TOPIC_BIAS) for _, _, features in rows]
    judged: list[tuple[int, float]] = []
    if judge is not None:
        asked = [i for i, score in enumerate(scores) if score >= TOPIC_JUDGE_FLOOR]
        judged = [(i, o) for i in asked if (o := judge(rows[i][0])) is not None]
    if judged:
        features = judged_features([rows[i][2] for i, _ in judged], [o for _, o in judged])
        for (i, _), f in zip(judged, features):
            scores[i] = _logistic(f, TOPIC_JUDGED_WEIGHTS, TOPIC_JUDGED_BIAS)
    scored = [TopicMember(p, s, round(score, 4)) for (p, s, _), score in zip(rows, scores)]
    scored.sort(key=lambda m: -m.score)
    return [m for m in scored if m.score >= threshold], scored


def judged_features(features: Sequence[np.ndarray], odds: Sequence[float]) -> list[np.ndarray]:
    """`TOPIC_JUDGED_FEATURES` of the candidates the model was asked about."""
    clipped = np.clip(np.array(odds, dtype=float), -ODDS_CLIP, ODDS_CLIP)
    return [np.concatenate([f, [o, o - clipped.max()]]) for f, o in zip(features, clipped)]


def _logistic(features: np.ndarray, weights: Sequence[float], bias: float) -> float:
    return float(1 / (1 + np.exp(-(features @ np.array(weights) + bias))))
