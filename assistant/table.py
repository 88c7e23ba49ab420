"""Table: one question asked of many papers, a cell per paper and question, each with its quote.

Rows are papers: given by id or title, chosen by a topic (the same retrieval and topic evidence as
a "which papers are about X" question), or every paper of a corpus file. Columns are the user's
questions. Each cell is decided on one paper's own sentences, like a single-paper fact question:
- the model writes a short answer, or "not stated", on one line (bounded by a grammar on the
  embedded model);
- then the application decides: a decline is "not stated"; the quote is the shown sentence that
  holds the answer's figures and most of its words, else the cell is "not stated"; the quote must
  carry the asked slot (a figure for "how much"), and the sentence with the figure must speak of
  the asked quantity (a speedup does not answer "how much memory does it save");
- a yes/no column's "yes" or "no" is the answer itself, quoted with the sentence that says so: the
  one its words come from, else the one the cross-encoder reads as answering the column. It is
  stated only where the cross-encoder finds that sentence answers the column (`YES_NO_EVIDENCE`):
  the model says a bare "yes" as readily when the abstract is silent; or where the model is sure of
  its answer (its first word's log-probability against that of "not", fitted by the evaluation's
  fit_cells.py: `assistant/data/cells.json`). An answer that only names one
  of the column's alternatives ("molecular" for "Is it applied to molecular or protein systems?") is a yes.
The model does not number the sentence its answer comes from: a 1.5B model often numbered the
wrong one (the application moved the quote anyway), and the grammar's forced characters of that
field slowed every cell (the evaluation README, "Constants").
The chosen sentences become the cell's verbatim, contiguous quote (`Citation.spans`).
The prompt puts one paper's sentences before the question, so the columns of one paper share the
model's cached prefix and each further column reads only its own question.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import slots, topic_choice, wording
from .chunk import count_tokens
from .cite import has_number, make_citation, numbers_in
from .intent import Intent, read_question
from .kinds import DATA
from .config import Settings
from .evidence import ScoredSentence, Sentences, SentenceBank, score_sentences, strongest
from .errors import LLMError, LLMUnavailableError, QuestionError
from .prompts import Prompts
from .topic_list import TopicLister
from .text import NUMBER_WORDS, clean_markup, shorten
from .types import NOT_STATED, Cell, Paper, Row, Table

MAX_COLUMNS = 8
SENTENCES_PER_COLUMN = 2  # a paper's best sentences for each column, beside those carrying the asked slot
MAX_CELL_SENTENCES = 5  # the most sentences of a long abstract the model reads for a row
MAX_ROW_TOKENS = 600  # an abstract up to this long is read whole (all of the bundled ones are)
CELL_ANSWER_TOKENS = 64
# A cell's answer is cut here by the grammar: with more room the model goes on past the figure
# asked for, which costs time and adds nothing to the cell (the evaluation README, "Constants").
CELL_ANSWER_CHARS = 60
CUT_SLACK = 12  # an answer this close to the bound that stops within a word was cut by it (`was_cut`)
# The cross-encoder's least logit for the sentence that says yes or no to a yes/no column, fitted
# on the yes/no cells of the table sets (the evaluation README, "Constants").
YES_NO_EVIDENCE = -8.5
_POLARITY = re.compile(r"^\W*(yes|no)\b[\s,.:;\u2013\u2014-]*", re.IGNORECASE)
_DECLINE = re.compile(r"^\W*(?:none|n/?a|not (?:stated|mentioned|given|specified|provided|available)|unknown|unclear|"
                      r"no (?:answer|information|mention))\b", re.IGNORECASE)


def check_columns(columns: Sequence[str], max_tokens: int) -> list[str]:
    """The column questions, stripped; an error a user can act on for none, too many or too long."""
    cleaned = [wording.sanitize(c) for c in columns]
    cleaned = [c for c in cleaned if c]
    if not cleaned:
        raise QuestionError("A table needs at least one column question, e.g. -c \"What speedup does it report?\".")
    if len(cleaned) > MAX_COLUMNS:
        raise QuestionError(f"A table takes at most {MAX_COLUMNS} column questions; {len(cleaned)} were given.")
    for column in cleaned:
        if count_tokens(column) > max_tokens:
            raise QuestionError(f"The column question \"{shorten(column, 60)}\" is longer than {max_tokens} tokens; "
                                "ask something shorter.")
    return cleaned


def resolve_papers(wanted: Sequence[str], papers: Sequence[Paper]) -> list[Paper]:
    """Papers named by id, by title (case-insensitive) or by label ("file.txt #6"), in the order given."""
    by_key: dict[str, Paper] = {}
    for paper in papers:
        for key in (paper.id, paper.title, paper.shown, paper.called, paper.label):
            by_key.setdefault(key.lower(), paper)
    found, unknown = [], []
    for name in wanted:
        paper = by_key.get(name.strip().lower())
        if paper is None:
            unknown.append(name)
        elif paper not in found:
            found.append(paper)
    if unknown:
        raise QuestionError(f"No paper is called {', '.join(repr(u) for u in unknown)}. "
                            "Use an id or a title as `assistant papers` lists them.")
    return found


class TableBuilder:
    """Chooses the rows and fills the cells of a `Table` (see the module docstring)."""

    def __init__(self, settings: Settings, sentences: SentenceBank, encode: Callable[[list[str]], np.ndarray],
                 llm: Callable[[], Any], prompts: Prompts, topics: TopicLister,
                 reranker: Callable[[str, Sequence[str]], np.ndarray]) -> None:
        self.settings = settings
        self.sentences = sentences
        self.encode = encode
        self.llm = llm  # called when the first cell needs the model: the model starts then, not before
        self.prompts = prompts
        self.topics = topics  # chooses a topic's papers, as for a topic question
        self.reranker = reranker  # the cross-encoder: which sentence says yes or no to a yes/no column
        # The least log-odds of the model's yes or no against its "not" for the answer to stand without
        # the cross-encoder's sentence (`_yes_no`), written by the evaluation's fit_cells.py.
        self.sure_odds = float(json.loads((DATA / "cells.json").read_text(encoding="utf-8"))["sure_odds"])

    def topic_rows(self, topic: str, source: str | None = None, notices: list[str] | None = None) -> tuple[list[Row], list[Row]]:
        """The papers on `topic`, each with the sentence of its abstract that shows it, and those possibly
        related to it: chosen as for a topic question (`topic_list.TopicLister.choose`). What went wrong
        goes to `notices`."""
        topic = wording.sanitize(topic)
        if not topic:
            raise QuestionError("The topic is empty. Name a topic, e.g. --topic \"KV cache\".")
        if count_tokens(topic) > self.settings.max_question_tokens:
            raise QuestionError(f"The topic \"{shorten(topic, 60)}\" is longer than {self.settings.max_question_tokens} "
                                "tokens; name it in a few words, e.g. --topic \"KV cache\".")
        choice = self.topics.choose(topic, source, notices)

        def row(member: topic_choice.TopicMember) -> Row:
            return Row(member.passage.paper, self.topics.citation(1, member), member.score)

        return [row(m) for m in choice.members], [row(m) for m in choice.related]

    def events(self, rows: list[Row], columns: list[str], topic: str = "", notices: Sequence[str] = ()) -> Iterator[Row | Cell | Table]:
        """Each `Row`, then each `Cell` as it is filled (row by row), then the whole `Table`."""
        started = time.perf_counter()
        table = Table(columns=list(columns), rows=list(rows), cells=[], topic=topic, notices=list(notices))
        yield from rows
        if not rows:
            table.timings["total"] = time.perf_counter() - started
            yield table
            return
        intents = [read_question(c) for c in columns]
        vectors = self.encode(list(columns))
        self.sentences.warm([row.paper for row in rows])
        failure = ""  # once the model is unreachable, the remaining cells say so without trying again
        for r, row in enumerate(rows):
            line: list[Cell] = []
            sentences = self.sentences.get(row.paper)
            scored = [score_sentences(sentences, vectors[c], set(wording.stems(q))) for c, q in enumerate(columns)]
            # The whole abstract when the model has it at hand (kept by `assistant warm` or read ahead
            # while idle): the cells then read only their questions. Otherwise the sentences closest
            # to the columns: reading a whole abstract first costs ~3 s a row, these ~1 s.
            whole = _read_whole(sentences)
            if whole and not failure:
                at_hand, failure = self._at_hand(row.paper, sentences)
                whole = at_hand is not False
            shown = list(range(len(sentences.clean))) if whole else self._closest(sentences, intents, scored, columns)
            for c, question in enumerate(columns):
                mark = time.perf_counter()
                if failure:
                    cell = Cell(r, c, row.paper, question, "", "failed", None, failure)
                else:
                    try:
                        cell = self._cell(r, c, row.paper, question, intents[c], sentences, scored[c], shown)
                    except LLMUnavailableError as exc:
                        failure = str(exc)
                        cell = Cell(r, c, row.paper, question, "", "failed", None, failure)
                cell = dataclasses.replace(cell, seconds=time.perf_counter() - mark)
                line.append(cell)
                if "first_cell" not in table.timings:
                    table.timings["first_cell"] = time.perf_counter() - started
                yield cell
            table.cells.append(line)
        if failure:
            table.notices.append(f"The language model could not fill some cells: {failure}")
        table.timings["total"] = time.perf_counter() - started
        yield table

    def _at_hand(self, paper: Paper, sentences: Sentences) -> tuple[bool | None, str]:
        """Whether the model has the row's whole-abstract prompt at hand (None: a backend that keeps
        nothing, whose own prefix cache shares it between the row's cells), and the reason when the
        model is unreachable."""
        try:
            return self.llm().has_kept(self._messages(paper, sentences, list(range(len(sentences.clean))), "")), ""
        except LLMUnavailableError as exc:
            return None, str(exc)
        except LLMError:
            return None, ""

    @staticmethod
    def _closest(sentences: Sentences, intents: list[Intent],
                 scored: list[list[ScoredSentence]], columns: list[str]) -> list[int]:
        """The sentences of a long abstract the model reads for every column of its row (in abstract
        order): each column's best ones and those that carry its asked slot."""
        picks: list[int] = []
        for intent, evidence, question in zip(intents, scored, columns):
            ranked = [e.index for e in strongest(evidence, SENTENCES_PER_COLUMN)]
            carrying = sorted(slots.focus_sentences(intent, sentences, question), key=lambda i: -evidence[i].score)[:1]
            picks += [i for i in [*ranked, *carrying] if i not in picks]
        return sorted(picks[:MAX_CELL_SENTENCES])

    def _cell(self, r: int, c: int, paper: Paper, question: str, intent: Intent, sentences: Sentences,
              evidence: list[ScoredSentence], shown: list[int]) -> Cell:
        """One cell (an unreachable model raises `LLMUnavailableError`; other model errors fail the cell)."""
        def not_stated(note: str) -> Cell:
            return Cell(r, c, paper, question, NOT_STATED, "not_stated", None, note)

        try:
            text = self._ask(paper, question, sentences, shown)
        except LLMUnavailableError:
            raise
        except LLMError as exc:
            return Cell(r, c, paper, question, "", "failed", None, str(exc))
        if not text or _DECLINE.match(text) or wording.DECLINES.search(text):
            return not_stated("The model found no sentence that states it.")
        if intent.slot == "yes_no" and not _POLARITY.match(text) and _affirms(text, question):
            # The model named what the paper does instead of saying yes ("fine-tune" for "Does it fine-tune
            # or retrain the model?"): a yes, quoted as a bare yes is (the evaluation README, "Tables").
            text = f"yes, {text}"
        if intent.slot == "yes_no" and (polarity := _POLARITY.match(text)):
            return self._yes_no(r, c, paper, question, text, polarity, sentences, evidence, shown)
        text = _as_written(text, sentences, shown)
        if slots.adds_nothing(text, f"{question} {paper.title}"):
            return not_stated("The model's answer only repeats the question or the paper's name.")
        picked = _locate(text, sentences, shown)
        if not picked:
            return not_stated("No sentence of the abstract holds the model's answer.")
        # The sentence that carries the figure must be the one about the asked quantity.
        carriers = [sentences.clean[i] for i in picked if slots.has_slot(intent.slot, sentences.clean[i])]
        if not carriers or not any(_measures(intent, question, c) for c in carriers):
            return not_stated(f"The abstract's sentences do not {slots.asked_for(intent)}.")
        support = max(evidence[i].score for i in picked)
        citation = make_citation(1, paper, sentences.raw, picked, support)
        if was_cut(text, sentences.clean[picked[0]]):
            text = complete(text, sentences.clean[picked[0]])
        return Cell(r, c, paper, question, text, "stated", citation)

    def _yes_no(self, r: int, c: int, paper: Paper, question: str, text: str, polarity: re.Match[str],
                sentences: Sentences, evidence: list[ScoredSentence], shown: list[int]) -> Cell:
        """A yes/no column's cell: the model's "yes" or "no" (`polarity`, with its words where a sentence
        holds them), quoted with the sentence that says so, or "not stated" when the cross-encoder finds
        no shown sentence that answers the column and the model is not sure of its answer (`sure`)."""
        answer, words = polarity.group(1).lower(), text[polarity.end():].strip()
        scores = self.reranker(question, [sentences.clean[i] for i in shown])
        located = _locate(words, sentences, shown) if words and not slots.adds_nothing(words, question) else []
        index = located[0] if located else shown[int(np.argmax(scores))]
        if scores[shown.index(index)] < YES_NO_EVIDENCE and not self.sure(paper, sentences, shown, question, answer):
            return Cell(r, c, paper, question, NOT_STATED, "not_stated", None,
                        f"The model said {answer!r}, but no sentence of the abstract says so and the model is not sure of it.")
        if located:
            sentence = sentences.clean[index]
            answer = f"{answer}, {complete(words, sentence) if was_cut(text, sentence) else words}"
        citation = make_citation(1, paper, sentences.raw, [index], evidence[index].score)
        return Cell(r, c, paper, question, answer, "stated", citation)

    def sure_of(self, paper: Paper, sentences: Sentences, shown: list[int], question: str, answer: str) -> float | None:
        """The model's log-odds of opening its reply to the cell's prompt with `answer` ("yes" or "no")
        rather than with "not" (of "not stated"): its prompt is at hand, so this reads nothing new. None
        where the backend gives no log-probabilities or the model fails."""
        try:
            found = self.llm().choice_logprobs(self._messages(paper, sentences, shown, question), [answer, "not"])
        except LLMUnavailableError:
            raise
        except LLMError:
            return None
        return None if found is None else found[answer] - found["not"]

    def sure(self, paper: Paper, sentences: Sentences, shown: list[int], question: str, answer: str) -> bool:
        """Whether the model is sure enough of its yes or no for it to stand where the cross-encoder
        finds no sentence that says so (`sure_odds`): stated cells right 80 -> 83 of 128 on the project's
        table set, 32 -> 33 of 49 held out, "not stated" unchanged on every set (the evaluation README,
        "Yes/no columns")."""
        odds = self.sure_of(paper, sentences, shown, question, answer)
        return odds is not None and odds >= self.sure_odds

    def _messages(self, paper: Paper, sentences: Sentences, shown: list[int], question: str) -> list[dict[str, str]]:
        """The cell's prompt: the instructions (with a worked example), then the paper's sentences, then the question
        (last, so that everything before it is shared by the row's columns and kept across tables)."""
        # Listed like the sentences of the system prompt's worked example (numbered and listed were
        # measured with it: the evaluation README, "Constants").
        listed = "\n".join(f"- {sentences.clean[i]}" for i in shown)
        return [
            {"role": "system", "content": self.prompts.table_system.format()},
            {"role": "user", "content": self.prompts.table_cell.format(title=paper.title, sentences=listed, question=question)},
        ]

    def _ask(self, paper: Paper, question: str, sentences: Sentences, shown: list[int]) -> str:
        """The model's short answer (or its "not stated"): one line, bounded by the backend's
        grammar where it has one, so generation stops at `CELL_ANSWER_CHARS`."""
        llm = self.llm()
        reply = llm.chat(self._messages(paper, sentences, shown, question), max_tokens=CELL_ANSWER_TOKENS,
                         **llm.line_format(CELL_ANSWER_CHARS))
        return _parse(reply)

    def keep(self, paper: Paper) -> dict[str, Any] | None:
        """Have the model read `paper`'s row prompt (all but the question) and keep the state, so a
        table over it reads only its questions from then on, in this process or a later one. None
        when the paper's abstract is too long to be read whole, or the backend keeps nothing."""
        self.sentences.warm([paper])
        sentences = self.sentences.get(paper)
        return self._keep(paper, sentences) if _read_whole(sentences) else None

    def _keep(self, paper: Paper, sentences: Sentences) -> dict[str, Any] | None:
        return self.llm().keep_prefix(self._messages(paper, sentences, list(range(len(sentences.clean))), ""))


def _read_whole(sentences: Sentences) -> bool:
    """Whether a row reads the paper's whole abstract (the same prompt in every table, so kept)."""
    return count_tokens(" ".join(sentences.clean)) <= MAX_ROW_TOKENS


def _measures(intent: Intent, question: str, quote: str) -> bool:
    """For a figure or a count, whether the quote speaks of the asked quantity (a content word of the
    question or its focus, or of its measurement family): a small model readily answers "how much
    memory" with the speedup of the only sentence that has a figure."""
    terms = list(dict.fromkeys([*slots.focus_terms(intent.focus), *wording.stems(question)]))
    if intent.slot not in ("number", "count") or not terms:
        return True
    quote_stems = set(wording.stems(quote))
    return any(slots.covered(t, quote_stems, quote) for t in terms)


def _affirms(text: str, question: str) -> bool:
    """Whether an answer to a yes/no column that says neither yes nor no only repeats the question's
    words, none of them a negation: it names the alternative the paper takes ("molecular" for "Is it
    applied to molecular or protein systems?"), where "without retraining" or "training-free" does not."""
    return slots.adds_nothing(text, question) and not set(re.findall(r"[a-z]+", text.lower())) & wording.NEGATIONS


def _as_written(text: str, sentences: Sentences, shown: list[int]) -> str:
    """The answer with a small number written as the sentences write it: the model answers "10" where
    the abstract says "ten models", and a lone digit or a figure no sentence holds finds no quote."""
    def spelled(match: re.Match[str]) -> str:
        number = match.group(0)
        if int(number) >= len(NUMBER_WORDS) or any(has_number(sentences.clean[i], number) for i in shown):
            return number
        word = re.compile(rf"\b{NUMBER_WORDS[int(number)]}\b", re.IGNORECASE)
        found = next((m.group(0) for i in shown if (m := word.search(sentences.clean[i]))), None)
        return found or number

    return re.sub(r"(?<![\d.,])\d{1,2}(?![\d.,%×x])", spelled, text)


def _locate(text: str, sentences: Sentences, shown: list[int]) -> list[int]:
    """The sentence the answer comes from: the shown sentence that holds all of its figures and
    most of its words. Empty when none does (the answer is not the abstract's)."""
    figures = numbers_in(text)
    words = set(wording.stems(text))

    def holds(i: int) -> tuple[bool, float]:
        clean = sentences.clean[i]
        has_figures = all(has_number(clean, n) for n in figures)
        return has_figures, len(words & sentences.stems[i]) / len(words) if words else float(bool(figures))

    best = max(shown, key=holds, default=None)
    if best is None or not holds(best)[0] or holds(best)[1] < 0.5:
        return []
    return [best]


def was_cut(text: str, sentence: str) -> bool:
    """Whether the length bound cut the answer: it reached the bound, or it stops within a word of its
    sentence close to the bound. The grammar counts characters, so a token that would cross it is
    never written: "https://github.com/snu-mllab/Identifiable-Token-Correspond" stopped at 58."""
    if len(text) >= CELL_ANSWER_CHARS:
        return True
    at = sentence.lower().find(text.lower())
    end = at + len(text)
    return (len(text) >= CELL_ANSWER_CHARS - CUT_SLACK and at >= 0 and end < len(sentence)
            and text[-1:].isalnum() and sentence[end].isalnum())


def complete(text: str, sentence: str) -> str:
    """An answer the length bound cut ("… at thermodynamic equ"), completed from the sentence it was
    copied from to the end of its clause. An answer not copied verbatim keeps its cut, marked "…"."""
    at = sentence.lower().find(text.lower())
    if at < 0:
        return text + "…"
    end = at + len(text)
    clause = re.match(r"[^,.;:()]*", sentence[end:]).group(0).rstrip()
    if len(clause) > CELL_ANSWER_CHARS:
        return sentence[at:end] + "…"
    return sentence[at:end + len(clause)]


def _parse(reply: str) -> str:
    """The answer of the model's one-line reply, without quotes around it, at most `CELL_ANSWER_CHARS`."""
    line = (reply.strip().splitlines() or [""])[0]
    return " ".join(line.split()).strip("\"'` ")[:CELL_ANSWER_CHARS].strip()


# -- writing a table out -----------------------------------------------------------------------


def _cell_text(cell: Cell) -> str:
    if cell.status == "failed":
        return f"(failed: {cell.note})" if cell.note else "(failed)"
    return clean_markup(cell.text)


def to_csv(table: Table) -> str:
    """One line per paper: its id, title and label, then each column's answer and its quote."""
    out = io.StringIO()
    writer = csv.writer(out)
    header = ["paper_id", "title", "label"]
    for column in table.columns:
        header += [column, f"{column} (quote)"]
    writer.writerow(header)
    for row, line in zip(table.rows, table.cells):
        values = [row.paper.id, row.paper.shown, row.paper.label]
        for cell in line:
            values += [_cell_text(cell), clean_markup(cell.citation.quote) if cell.citation else ""]
        writer.writerow(values)
    return out.getvalue()


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    """A Markdown table with a numbered quote under it for every filled cell."""
    lines = ["| Paper | " + " | ".join(_md(c) for c in table.columns) + " |",
             "|---|" + "---|" * len(table.columns)]
    quotes = []
    for row, line in zip(table.rows, table.cells):
        values = []
        for cell in line:
            text = _md(_cell_text(cell))
            if cell.citation:
                quotes.append(f"[{len(quotes) + 1}] {row.paper.shown} ({row.paper.label}): "
                              f"\u201c{clean_markup(cell.citation.quote)}\u201d")
                text += f" [{len(quotes)}]"
            values.append(text)
        lines.append(f"| {_md(row.paper.shown)} | " + " | ".join(values) + " |")
    if quotes:
        lines += ["", "Quotes:", *quotes]
    return "\n".join(lines) + "\n"
