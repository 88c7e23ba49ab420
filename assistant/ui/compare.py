"""The "Compare papers" tab: pick papers (by hand, from a topic group, or by a topic), type column
questions, watch the table fill cell by cell, click a cell to read its evidence, export CSV.

`CompareController` holds no per-user state of its own: the filled `Table` travels in a `gr.State`.
Its handlers are generators where the page should change while work goes on.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import AssistantError
from ..table import check_columns, to_csv
from ..text import clean_markup
from ..types import Cell, Row, Table
from .controller import gr
from .render import esc, job_status, span_html

PENDING = "…"
CSV_DIR = Path(tempfile.gettempdir()) / "icml-assistant-tables"
CSV_KEEP_SECONDS = 24 * 3600  # an exported table's download link lives this long


def parse_columns(text: str) -> list[str]:
    """One column question per non-empty line."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def grid(rows: list[Row], columns: list[str], cells: dict[tuple[int, int], Cell]) -> Any:
    """The table as the page shows it: the paper's title, then each cell's short answer."""
    import pandas as pd

    data = []
    for r, row in enumerate(rows):
        line = [row.paper.shown]
        for c in range(len(columns)):
            cell = cells.get((r, c))
            if cell is None:
                line.append(PENDING)
            elif cell.status == "failed":
                line.append("(failed)")
            elif cell.status == "not_stated":
                line.append("— not stated")
            else:
                line.append(clean_markup(cell.text))
        data.append(line)
    return pd.DataFrame(data, columns=["Paper", *columns])


def render_cell(table: Table | None, row: int, column: int) -> str:
    """A clicked cell: its paper, question and answer, and the abstract with the evidence marked."""
    if table is None or not (0 <= row < len(table.cells)):
        return '<p class="src-note">Fill a table, then click a cell to see the sentence it comes from.</p>'
    paper = table.rows[row].paper
    if column < 0 or column >= len(table.columns):  # the paper's own column: why it is a row
        reason = table.rows[row].reason
        head = f'<h3 class="src-heading">{esc(paper.shown)}</h3><p class="src-note">{esc(paper.label)}</p>'
        if reason is None:
            return head + f"<p>{esc(paper.text)}</p>"
        _, abstract_html = span_html(reason)
        return head + f'<p class="src-note">On the topic because of the marked sentence.</p><p class="cell-abstract">{abstract_html}</p>'
    cell = table.cells[row][column]
    head = (f'<h3 class="src-heading">{esc(paper.shown)}</h3><p class="src-note">{esc(paper.label)}</p>'
            f'<p class="cell-question"><strong>{esc(cell.question)}</strong></p>')
    if cell.status == "stated" and cell.citation is not None:
        quote_html, abstract_html = span_html(cell.citation)
        return (head + f'<p class="cell-answer">{esc(clean_markup(cell.text))}</p>'
                f'<blockquote class="src-quote">{quote_html}</blockquote>'
                f'<details class="src-abstract" open><summary>Full abstract</summary><p class="cell-abstract">{abstract_html}</p></details>')
    note = "Not stated in the abstract." if cell.status == "not_stated" else f"Could not be filled: {cell.note}"
    return (head + f'<p class="cell-answer cell-missing">{esc(note)}</p>'
            f'<details class="src-abstract" open><summary>Full abstract</summary><p class="cell-abstract">{esc(paper.text)}</p></details>')


class CompareController:
    """The handlers of the "Compare papers" tab."""

    def __init__(self, assistant: Any) -> None:
        self.assistant = assistant

    def group_choices(self) -> list[tuple[str, str]]:
        return [(f"{g.label} ({len(g.papers)} papers)", g.label) for g in self.assistant.topic_groups()]

    def paper_choices(self) -> list[tuple[str, str]]:
        return [(f"{p.shown} · {p.label}", p.id) for p in self.assistant.papers]

    def from_group(self, label: str) -> tuple[Any, str]:
        """The papers of a topic group, as the table's rows."""
        for group in self.assistant.topic_groups():
            if group.label == label:
                return gr.update(value=[p.id for p in group.papers]), job_status(
                    f"{len(group.papers)} papers of the topic “{label}”.")
        return gr.update(), job_status("")

    def from_topic(self, topic: str) -> tuple[Any, str]:
        """The papers on a typed topic (the same evidence as a "which papers are about …" question)."""
        notices: list[str] = []  # e.g. the model failed while weighing: the rule alone chose the papers
        try:
            rows, related = self.assistant.topic_rows(topic, notices=notices)
        except AssistantError as exc:
            return gr.update(), job_status(str(exc), "error")
        if not rows:
            return gr.update(), job_status(" ".join([f"No paper in the collection is about {topic}.", *notices]), "error")
        also = f" Possibly related (not picked): {'; '.join(r.paper.shown for r in related)}." if related else ""
        return (gr.update(value=[row.paper.id for row in rows]),
                job_status(" ".join([f"{len(rows)} papers on “{topic}”.{also}", *notices])))

    def fill(self, paper_ids: list[str], columns_text: str, topic: str = "") -> Iterator[tuple[Any, ...]]:
        """Stream the table: (grid, status, table, export button, evidence panel, papers) after each cell.
        With no papers picked, a typed topic chooses them (as Enter in the topic box does), and the
        papers list shows them."""
        no_export = gr.update(value=None, interactive=False)
        topic = (topic or "").strip()
        if not paper_ids and not topic:
            yield (gr.update(), job_status("Pick papers first: from a topic group, a topic, or the list.", "error"), None,
                   no_export, "", gr.update())
            return
        rows: list[Row] = []
        cells: dict[tuple[int, int], Cell] = {}
        picked = gr.update()
        try:
            # The columns as the table will ask them (a line that is only markup is dropped), so the
            # grid's headers line up with the cells.
            columns = check_columns(parse_columns(columns_text), self.assistant.settings.max_question_tokens)
            if paper_ids:
                events = self.assistant.table_events(columns, papers=list(paper_ids))
            else:
                yield (gr.update(), job_status(f"Choosing the papers on “{topic}”…"), None, no_export, gr.update(), picked)
                events = self.assistant.table_events(columns, topic=topic)
            for event in events:
                if isinstance(event, Row):
                    rows.append(event)
                    continue
                if isinstance(event, Cell):
                    cells[(event.row, event.column)] = event
                    total = len(rows) * len(columns)
                    if not paper_ids:
                        picked = gr.update(value=[row.paper.id for row in rows])
                    yield (grid(rows, columns, cells), job_status(f"Filling the table: {len(cells)} of {total} cells…"),
                           None, no_export, gr.update(), picked)
                    continue
                table: Table = event
                if not table.rows:
                    yield (gr.update(), job_status(" ".join(table.notices) or f"No paper in the collection is about {topic}.",
                                                   "error"), None, no_export, "", picked)
                    return
                yield (grid(rows, columns, cells), job_status(self._summary(table)), table,
                       gr.update(value=str(self._csv(table)), interactive=True),
                       render_cell(None, -1, -1), picked)
        except AssistantError as exc:
            yield gr.update(), job_status(str(exc), "error"), None, no_export, "", gr.update()

    @staticmethod
    def _summary(table: Table) -> str:
        filled = sum(c.status == "stated" for line in table.cells for c in line)
        cells = sum(len(line) for line in table.cells)
        failed = sum(c.status == "failed" for line in table.cells for c in line)
        text = (f"{len(table.rows)} papers × {len(table.columns)} questions in {table.timings.get('total', 0):.1f} s: "
                f"{filled} of {cells} cells answered from the abstracts, {cells - filled - failed} not stated")
        text += f", {failed} failed." if failed else "."
        if table.related:
            text += f" Possibly related (not rows): {'; '.join(r.paper.shown for r in table.related)}."
        return " ".join([text, *table.notices])

    @staticmethod
    def _csv(table: Table) -> Path:
        """The table as a CSV file to download; exports older than a day are removed first, so the
        folder does not grow with every export of every session."""
        CSV_DIR.mkdir(parents=True, exist_ok=True)
        stale = time.time() - CSV_KEEP_SECONDS
        for old in CSV_DIR.glob("table-*.csv"):
            with contextlib.suppress(OSError):  # another session may be removing it too
                if old.stat().st_mtime < stale:
                    old.unlink()
        handle = tempfile.NamedTemporaryFile("w", suffix=".csv", prefix="table-", dir=CSV_DIR, delete=False,
                                             encoding="utf-8", newline="")
        with handle:
            handle.write(to_csv(table))
        return Path(handle.name)

    @staticmethod
    def select(evt: gr.SelectData, table: Table | None) -> str:
        row, column = (evt.index if isinstance(evt.index, (list, tuple)) else (-1, -1))
        return render_cell(table, int(row), int(column) - 1)  # column 0 is the paper's title
