"""Intent: what a question asks for, read from its wording.

The kind of question (a fact, which paper, a topic, a comparison), the asked slot (a number, a count,
a dataset, a baseline, a name, yes/no, a mechanism) and its focus in the question's words ("batch
size"), read by generic English question forms. Hand-written: no library reads the asked slot of a
question. These are word rules, fitted on the project's questions: the judge takes what they find as
features beside the model's judgements, with weights fitted on data and checked on questions written
by others (see `judge`). Whether a text carries the slot is `slots`' part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .wording import STOPWORDS

Kind = Literal["fact", "which_paper", "topic", "comparison"]
Slot = Literal["number", "count", "dataset", "baseline", "name", "yes_no", "mechanism", "paper", "papers", "other"]


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
    r"(?:\s+(?:are|is|were|that|which|does|do)\b)*\s*(?:(?:about|on|related to|dealing with|deal with|address(?:es)?|"
    r"look(?:s|ing)? at|study|studies|tackle|tackles|focus(?:es)? on|work on|use|using|apply|applying|propose|"
    r"involv(?:e|es|ing)|in|with|for|concern(?:ing)?|regarding|covering|cover)\b)?\s*",
    re.IGNORECASE,
)
# The frame at the end: "X - anything in here on that?", "protein folding papers?"
_TOPIC_TAIL = re.compile(
    rf"(?:{_DASH_ANYTHING}.*|[?.!]\s+anything(?:\s+(?:in\s+)?here)?(?:\s+on\s+(?:that|this))?\s*\??"
    r"|\s+papers\s*\??)$",
    re.IGNORECASE,
)
# A second question joined to the first ("conformal methods, and for what?", "… on SVHN and under what
# Dirichlet coefficient?"): after a topic it is asked of the listed papers, not part of what they are
# about; after a question about one paper it asks a second detail (`asks_two`).
SECOND_QUESTION = re.compile(r",?\s+and\s+(?:for |in |on |with |under )?(?:what|which|how|why|where|when|who)\b.*$",
                             re.IGNORECASE)
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
CHANGE_VERBS = ("save", "reduce", "cut", "improve", "lower", "increase", "gain", "shrink", "boost", "compress",
                "outperform", "accelerate", "speed up", "beat")
_HOW_MUCH_VERB = re.compile(
    r"\bhow much\s+(?:does|do|did|can|could|will|would|is|are)\s+(?:[\w-]+\s+){1,3}?"
    rf"({'|'.join(CHANGE_VERBS)})s?\b"
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


def asks_two(question: str) -> bool:
    """Whether the question joins a second question to its first ("Which architectures …, and what kind
    of cohorts …?"): each asks its own detail, which the word rules' one asked detail does not cover."""
    return bool(SECOND_QUESTION.search(question.strip()))


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
        topic = SECOND_QUESTION.sub("", _TOPIC_LEAD.sub("", topic, count=1))
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
