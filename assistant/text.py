"""Text helpers shared by every stage: markup cleaning, sentence splitting, script detection, citation markers.

Abstracts are parsed (`load`), quoted (`cite`), weighed (`decide`) and shown (`ui`, `cli`) as
the same plain text split into the same sentences, so these rules live in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

# LaTeX commands whose argument is kept as plain text.
_TEXT_COMMANDS = r"textbf|textit|emph|text|mathrm|mathbf|mathit|mathcal|mathbb|widetilde|tilde|hat|bar|url|operatorname"
_SYMBOLS = {
    r"\times": "×", r"\cdot": "·", r"\sim": "~", r"\approx": "≈", r"\leq": "≤", r"\le": "≤",
    r"\geq": "≥", r"\ge": "≥", r"\neq": "≠", r"\infty": "∞", r"\pm": "±", r"\to": "→",
    r"\rightarrow": "→", r"\alpha": "α", r"\beta": "β", r"\gamma": "γ", r"\delta": "δ",
    r"\Delta": "Δ", r"\epsilon": "ε", r"\varepsilon": "ε", r"\eta": "η", r"\theta": "θ",
    r"\lambda": "λ", r"\mu": "μ", r"\pi": "π", r"\rho": "ρ", r"\sigma": "σ", r"\tau": "τ",
    r"\phi": "φ", r"\omega": "ω", r"\Omega": "Ω", r"\sqrt": "√", r"\log": "log", r"\min": "min",
    r"\max": "max", r"\left": "", r"\right": "", r"\%": "%", r"\&": "&", r"\_": "_",
}
_SYMBOL_RE = re.compile("|".join(re.escape(k) + r"(?![A-Za-z])" for k in sorted(_SYMBOLS, key=len, reverse=True)))


def clean_markup(text: str) -> str:
    """Turn the LaTeX and Markdown markup of abstracts into readable plain text.

    Hand-written because abstracts mix inline LaTeX with Markdown emphasis in ways no
    converter handles as a whole; the rules cover what paper abstracts actually use.
    """
    out = text
    out = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", out)
    for _ in range(3):  # nested commands such as \widetilde{\mathcal{O}}
        out = re.sub(r"\\(?:%s)\{([^{}]*)\}" % _TEXT_COMMANDS, r"\1", out)
    out = _SYMBOL_RE.sub(lambda m: _SYMBOLS[m.group(0)], out)
    out = re.sub(r"\^\{([^{}]*)\}", r"^\1", out)
    out = re.sub(r"_\{([^{}]*)\}", r"_\1", out)
    out = re.sub(r"\$([^$]*)\$", r"\1", out)  # drop math delimiters, keep the content
    out = re.sub(r"\*\*([^*]+?)\*\*", r"\1", out)  # Markdown bold (also **I**n-context)
    out = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", out)  # Markdown italics
    out = re.sub(r"(?<![\w_])_([^_\s][^_]*?)_(?![\w_])", r"\1", out)  # Markdown _italics_
    out = re.sub(r"``|''", '"', out)  # LaTeX quotes
    out = re.sub(r"\\([A-Za-z]+)", r"\1", out)  # any command left: keep its name as text
    out = out.replace("{", "").replace("}", "")
    out = re.sub(r"(\d)\s+×", r"\1×", out)
    return re.sub(r"\s+", " ", out).strip()


# Words that look like names but are not a paper's own method (a word list kept as data).
NOT_NAMES = frozenset(
    line.strip() for line in (Path(__file__).resolve().parent / "data" / "not_names.txt").read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
)

# Numbers an abstract may spell out ("seven LLM judges", "ten models"), by value.
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                "fifteen sixteen seventeen eighteen nineteen twenty").split()

# Chinese (Han) characters, and with kana and hangul all CJK ones: a question in one of these
# scripts is answered in it.
HAN = re.compile(r"[\u3400-\u9fff]")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def has_cjk(text: str) -> bool:
    """Whether the text holds Chinese, Japanese or Korean characters."""
    return bool(CJK.search(text))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z$*(\[\\\"'])")


def split_sentences(text: str) -> list[str]:
    """Split an abstract into sentences (abbreviations such as 'e.g.' stay joined)."""
    parts = _SENTENCE_END.split(text.strip())
    merged: list[str] = []
    for part in parts:
        if merged and re.search(r"\b(?:e\.g|i\.e|et al|vs|cf|Fig|Eq|resp)\.$", merged[-1]):
            merged[-1] = f"{merged[-1]} {part}"
        else:
            merged.append(part)
    return [p for p in merged if p.strip()]


# A citation marker: the numbers of the cited sources in brackets ("[1]", "[1, 2]", "[1; 3]"); group 1
# holds the numbers. SPACED_MARKER takes the spaces before it too, so removing it leaves no gap
# before the full stop that follows ("... as shown [1]." becomes "... as shown.").
MARKER = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
SPACED_MARKER = re.compile(r"\s*" + MARKER.pattern)


def marker_numbers(numbers: str) -> list[int]:
    """The source numbers of a marker's group 1 ("1, 2" gives [1, 2])."""
    return [int(n) for n in re.split(r"\s*[,;]\s*", numbers)]


def without_markers(text: str) -> str:
    """`text` with each citation marker replaced by a space (markers are not words or figures)."""
    return MARKER.sub(" ", text)


def shorten(text: str, limit: int = 300) -> str:
    """`text` on one line, cut to at most `limit` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
