"""The Gradio app: the page's layout and events over a `ChatController`, and serving it.

`serve` binds to loopback unless a username and password are configured, never shares, and
sends no analytics; the page loads no external fonts or scripts. The LLM-backed handlers share
one queue slot (the local model answers one question at a time); retrieval-only searches and
the paper browser do not wait for it.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..errors import AssistantError
from ..types import Paper
from .compare import CompareController
from .controller import ChatController, gr
from .render import empty_sources, esc, job_status, render_paper_list
from .session import Session
from ..config import is_loopback
from .status import StatusBoard, model_status, runs_offline

if TYPE_CHECKING:
    from ..api import Assistant

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent.parent / "static"
LLM_CONCURRENCY = "llm"  # the queue slot shared by every handler that runs the language model
RETRIEVAL_CONCURRENCY = 2

# Example questions, each shown only when the loaded collection has a paper it is about (the word
# after it appears in an abstract): a fact, a "which paper", a paraphrase, Chinese.
EXAMPLES = [
    ("viewmask", "How does ViewMask-1-to-3 generate new views of an object?"),
    ("fairness", "Which paper studies fairness when several decision makers interact over time?"),
    ("reward", "Is there a way to learn rewards for a robot from coarse good/okay/bad scores given by people?"),
    ("speculative", "哪篇论文提出了用于长上下文推理的自推测解码方法？"),
]


def examples_for(papers: list[Paper]) -> list[str]:
    """Example questions about the loaded collection: the curated ones it can answer, else questions
    naming its own papers."""
    texts = [paper.text.lower() for paper in papers]
    chosen = [question for word, question in EXAMPLES if any(word in text for text in texts)]
    if len(chosen) >= 2:
        return chosen
    named = [p.title for p in papers if " " not in p.title and len(p.title) <= 30][:3]
    return [f"What does {title} propose, and what does it achieve?" for title in named]


def collection_name(papers: list[Paper]) -> str:
    """The name the collection gives itself (the most common venue / list title), or ""."""
    venues = Counter(p.venue for p in papers if p.venue)
    return venues.most_common(1)[0][0] if venues else ""


def app_title(papers: list[Paper]) -> str:
    name = collection_name(papers)
    return f"Reading Assistant · {name}" if name else "Reading Assistant"


# System fonts only: nothing is fetched from the internet.
SANS = [
    "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Liberation Sans", "Arial",
    "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", "sans-serif",
]
MONO = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "Liberation Mono", "DejaVu Sans Mono", "monospace"]


def _static(name: str) -> str:
    path = STATIC / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError:  # a packaging problem must not stop the UI; it only looks plainer
        log.warning("UI asset %s is missing; the page will use default styling.", path)
        return ""


def make_theme() -> gr.themes.Base:
    """A quiet theme on system fonts (Gradio's default fonts are files, but we need none)."""
    return gr.themes.Default(
        primary_hue=gr.themes.colors.indigo,
        secondary_hue=gr.themes.colors.slate,
        neutral_hue=gr.themes.colors.slate,
        radius_size=gr.themes.sizes.radius_md,
        font=SANS,
        font_mono=MONO,
    ).set(
        body_background_fill="#f7f8fa",
        block_border_width="1px",
        block_shadow="none",
        button_primary_shadow="none",
    )


def launch_options() -> dict[str, Any]:
    """Look and privacy options for `Blocks.launch` (Gradio 6 takes theme/css/head there)."""
    return {
        "theme": make_theme(),
        "css": _static("ui.css"),
        "head": f"<script>{_static('ui.js')}</script>",
        "footer_links": ["api"],
        "share": False,
        "ssr_mode": False,
        "mcp_server": False,
        "enable_monitoring": False,
        "run_history": False,
    }


def _header(assistant: Any, settings: Settings) -> str:
    n = len(assistant.papers)
    name = collection_name(assistant.papers)
    where = " Runs entirely on this machine." if runs_offline(settings) else ""
    return (
        f'<header class="app-header"><h1>{esc(app_title(assistant.papers))}</h1>'
        f"<p>Ask about {n} paper abstracts{f' ({esc(name)})' if name else ''}. Every claim in an answer cites its "
        f"paper, and each citation shows the sentence that supports it.{where}</p></header>"
    )


def build_app(assistant: Assistant, settings: Settings) -> gr.Blocks:
    """The chat UI for `assistant` (launch with `app.launch(**launch_options())`, or use `serve`)."""
    board = StatusBoard()
    assistant.listen(board.post)
    controller = ChatController(assistant, settings, board)
    compare = CompareController(assistant)
    sources = list(assistant.sources)
    papers = list(assistant.papers)

    title = app_title(assistant.papers)
    with gr.Blocks(title=title, analytics_enabled=False) as app:
        app.controller = controller  # type: ignore[attr-defined]  # for tests
        session = gr.State(Session())
        llm_job = gr.State(None)
        retrieval_job = gr.State(None)
        with gr.Row(elem_id="top-row", equal_height=True):
            gr.HTML(_header(assistant, settings), elem_id="app-header")
            model_line = gr.HTML(model_status(assistant, settings), elem_id="model-line")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Ask", id="ask"):
                with gr.Row(equal_height=False, elem_id="main-row"):
                    with gr.Column(scale=3, min_width=420, elem_id="chat-col"):
                        chatbot = gr.Chatbot(
                            value=[],
                            show_label=False,
                            height="60vh",
                            min_height=340,
                            elem_id="chat",
                            latex_delimiters=[],
                            buttons=["copy"],
                            feedback_options=None,
                            layout="bubble",
                            placeholder=(
                                "<div class='chat-placeholder'><strong>Ask about the papers</strong><br>"
                                "Answers cite their sources as numbered badges; the sentences that support them "
                                "appear on the right. Try one of these:</div>"
                            ),
                            examples=[{"display_text": text, "text": text} for text in examples_for(papers)],
                        )
                        with gr.Row(elem_id="ask-row", equal_height=True):
                            question = gr.Textbox(
                                placeholder="Ask a question about the papers…  (Enter to send)",
                                show_label=False,
                                lines=1,
                                max_lines=6,
                                scale=8,
                                autofocus=True,
                                elem_id="question",
                                container=False,
                                submit_btn=False,
                            )
                            send = gr.Button("Ask", variant="primary", scale=0, min_width=80, elem_id="send")
                        with gr.Row(elem_id="status-row", equal_height=True):
                            status = gr.HTML(job_status(""), elem_id="job-status")
                            small = {"size": "sm", "variant": "secondary", "scale": 0}
                            stop = gr.Button("Stop", min_width=60, elem_id="stop", **small)
                            new_chat = gr.Button("New chat", min_width=90, elem_id="new-chat", **small)
                        with gr.Accordion("Search options", open=False, elem_id="options"):
                            with gr.Row():
                                k = gr.Slider(1, 10, value=min(settings.k, 10), step=1, label="Papers retrieved (k)")
                                source = gr.Dropdown(
                                    choices=[("All files", "")] + [(s, s) for s in sources],
                                    value="",
                                    label="Corpus file",
                                )
                            retrieval_only = gr.Checkbox(
                                value=False,
                                label="Retrieval only: rank the papers instantly, without the language model",
                            )
                    with gr.Column(scale=2, min_width=320, elem_id="sources-col"):
                        sources_html = gr.HTML(empty_sources(), elem_id="sources")
            with gr.Tab("Browse papers", id="browse"):
                with gr.Row(equal_height=True):
                    search = gr.Textbox(
                        placeholder="Filter by words in the title or abstract…",
                        show_label=False,
                        container=False,
                        scale=3,
                        elem_id="paper-search",
                    )
                    browse_group = gr.Dropdown(
                        choices=[("All topics", "")] + compare.group_choices(), value="", show_label=False,
                        container=False, scale=2, elem_id="browse-group",
                    )
                    to_compare = gr.Button("Compare these papers →", size="sm", scale=0, min_width=180,
                                           elem_id="to-compare")
                paper_list = gr.HTML(render_paper_list(papers), elem_id="paper-list")
            with gr.Tab("Compare papers", id="compare"):
                gr.HTML(
                    '<p class="src-note">Ask the same questions of several papers: one row per paper, one column per '
                    "question. Every answer comes with the sentence of the abstract it is taken from; “not stated” "
                    "means the abstract does not say. Click a cell to read its evidence.</p>"
                )
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=420):
                        with gr.Row(equal_height=True):
                            table_group = gr.Dropdown(
                                choices=compare.group_choices(), value=None, label="Start from a topic group",
                                elem_id="table-group",
                            )
                            table_topic = gr.Textbox(label="…or find papers on a topic",
                                                     placeholder="e.g. KV cache (Enter lists them; or just fill the table)",
                                                     elem_id="table-topic")
                        table_papers = gr.Dropdown(
                            choices=compare.paper_choices(), value=[], multiselect=True, label="Papers (rows)",
                            elem_id="table-papers",
                        )
                        table_columns = gr.Textbox(
                            label="Questions (one per line; each becomes a column)", lines=3,
                            placeholder="What speedup does it report?\nCompared with what baseline?",
                            elem_id="table-columns",
                        )
                        with gr.Row(equal_height=True):
                            fill = gr.Button("Fill the table", variant="primary", scale=0, min_width=140, elem_id="fill-table")
                            export = gr.DownloadButton("Export CSV", value=None, interactive=False, size="sm",
                                                       scale=0, min_width=120, elem_id="export-csv")
                            table_status = gr.HTML(job_status(""), elem_id="table-status")
                        table_grid = gr.Dataframe(
                            value=None, interactive=False, wrap=True, elem_id="table-grid", show_label=False,
                        )
                    with gr.Column(scale=2, min_width=320):
                        cell_view = gr.HTML(
                            '<p class="src-note">Fill a table, then click a cell to see the sentence it comes from.</p>',
                            elem_id="cell-view",
                        )
                table_state = gr.State(None)

        chat_outputs = [chatbot, sources_html, status, session]
        submit_outputs = [question, chatbot, status, session, llm_job, retrieval_job]
        submit_inputs = [question, session, retrieval_only]
        hidden = {"queue": False, "api_visibility": "private"}
        # Queued (for its State change to reach the browser) but never waiting: no concurrency limit.
        instant = {"concurrency_limit": None, "show_progress": "hidden", "api_visibility": "private"}
        question.submit(controller.submit, submit_inputs, submit_outputs, **instant)
        send.click(controller.submit, submit_inputs, submit_outputs, **instant)

        def from_example(evt: gr.SelectData, current: Session, only: bool) -> tuple[Any, ...]:
            value = evt.value if isinstance(evt.value, dict) else {}
            return controller.submit(str(value.get("text", "")), current, only)

        chatbot.example_select(from_example, [session, retrieval_only], submit_outputs, **instant)
        answering = llm_job.change(
            controller.answer,
            [llm_job, session, k, source],
            chat_outputs,
            concurrency_limit=1,
            concurrency_id=LLM_CONCURRENCY,
            show_progress="minimal",
            show_progress_on=[status],
            api_visibility="private",
        )
        answering.then(lambda: model_status(assistant, settings), None, model_line, show_progress="hidden", **hidden)
        ranking = retrieval_job.change(
            controller.retrieve,
            [retrieval_job, session, k, source],
            chat_outputs,
            concurrency_limit=RETRIEVAL_CONCURRENCY,
            concurrency_id="retrieval",
            show_progress="hidden",
            api_visibility="private",
        )
        stop.click(controller.stop, [session], [chatbot, status, session], cancels=[answering], **hidden)
        cleared = [chatbot, sources_html, status, session]
        new_chat.click(controller.clear, None, cleared, cancels=[answering, ranking], show_progress="hidden", **hidden)
        chatbot.clear(controller.clear, None, cleared, cancels=[answering, ranking], show_progress="hidden", **hidden)
        chatbot.select(controller.select, [session], [sources_html], show_progress="hidden", **hidden)
        def browse(query: str, group: str) -> str:
            members = papers
            if group:
                members = next((list(g.papers) for g in assistant.topic_groups() if g.label == group), papers)
            return render_paper_list(members, query, total=len(members))

        search.input(browse, [search, browse_group], [paper_list], show_progress="hidden", trigger_mode="always_last", **hidden)
        browse_group.change(browse, [search, browse_group], [paper_list], show_progress="hidden", **hidden)

        def open_compare(group: str) -> tuple[Any, Any, Any]:
            rows, _ = compare.from_group(group) if group else (gr.update(), "")
            return gr.Tabs(selected="compare"), rows, gr.update(value=group or None)

        to_compare.click(open_compare, [browse_group], [tabs, table_papers, table_group], show_progress="hidden", **hidden)
        table_group.input(compare.from_group, [table_group], [table_papers, table_status], show_progress="hidden", **hidden)
        table_topic.submit(compare.from_topic, [table_topic], [table_papers, table_status],
                           concurrency_limit=RETRIEVAL_CONCURRENCY, concurrency_id="retrieval", show_progress="hidden",
                           api_visibility="private")
        fill.click(
            compare.fill, [table_papers, table_columns, table_topic],
            [table_grid, table_status, table_state, export, cell_view, table_papers],
            concurrency_limit=1, concurrency_id=LLM_CONCURRENCY, show_progress="hidden", api_visibility="private",
        )
        table_grid.select(compare.select, [table_state], [cell_view], show_progress="hidden", **hidden)
        # While the model loads or reads papers ahead the line follows it, then the timer stops.
        model_timer = gr.Timer(1.0, active=False)

        def refresh_model_line() -> tuple[str, Any]:
            return model_status(assistant, settings), gr.Timer(active=assistant.model_state == "loading"
                                                                or assistant.reading_ahead)

        model_timer.tick(refresh_model_line, None, [model_line, model_timer], show_progress="hidden", **hidden)
        app.load(refresh_model_line, None, [model_line, model_timer], show_progress="hidden", **hidden)

        def ask(question: str) -> dict[str, Any]:
            return controller.ask_api(question)

        # Gradio reads the endpoint's types from the signature; this module's annotations are strings.
        ask.__annotations__ = {"question": str, "return": dict[str, Any]}
        gr.api(
            ask,
            api_name="ask",
            api_description="Answer a question about the papers. Returns the whole answer as JSON, the same "
            "shape as `assistant ask --json`: status (answered / not_in_abstracts / llm_failed), text with [n] "
            "markers, citations [{marker, paper: {id, title, label, …}, quote, spans}] where quote is the cited "
            "passage as displayed (LaTeX and Markdown cleaned) and spans are the verbatim passages of the abstract "
            "({first, last, start, end, text}), passages, notices and timings.",
            concurrency_limit=1,
            concurrency_id=LLM_CONCURRENCY,
        )
    app.queue(default_concurrency_limit=1, max_size=64)
    return app


def auth_for(host: str, settings: Settings) -> tuple[str, str] | None:
    """The login to require: none on loopback (unless configured), mandatory beyond it."""
    if settings.username and settings.password:
        return settings.username, settings.password
    if is_loopback(host):
        return None
    raise AssistantError(
        f"Refusing to serve the UI on {host}, which is reachable from other machines, without a login. "
        "Set ASSISTANT_USERNAME and ASSISTANT_PASSWORD, or bind to 127.0.0.1."
    )


def serve(settings: Settings | None = None, host: str | None = None, port: int | None = None) -> None:
    """Open the assistant and serve the chat UI until interrupted (http://host:port)."""
    settings = settings or Settings()
    host = host or settings.host
    port = port or settings.port
    auth = auth_for(host, settings)
    from ..api import Assistant

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    assistant = Assistant.from_settings(settings, notify=say)
    try:
        app = build_app(assistant, settings)
        assistant.warm_up()  # in the background: the page is up at once and shows the model loading
        assistant.read_ahead()  # then, whenever nobody is asking, the model reads the papers it has not read
        say(f"Serving {app_title(assistant.papers)} on http://{host}:{port}" + (" (login required)" if auth else ""))
        app.launch(server_name=host, server_port=port, auth=auth, show_error=False, quiet=True, **launch_options())
    finally:
        assistant.close()
