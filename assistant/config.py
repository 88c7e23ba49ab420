"""Settings: one pydantic-settings object, built at each entry point and passed down.

Every field can be set by argument, by an `ASSISTANT_<NAME>` environment variable (for example
`ASSISTANT_CHROMA_HOST=127.0.0.1`) or, on the command line, by a flag (`--chroma-host`). The fields
are declared in groups (corpus and index, retrieval, language model, answering, topics and tables,
chat UI), one model per group; `Settings` combines them, so code reads every field directly
(`settings.k`, `settings.llm_base_url`) and the README documents them group by group.
"""

from __future__ import annotations

import ipaddress
import os
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# The checkout, when running from one: only the evaluation set and the tests live there.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Shipped inside the package (mapped from the checkout's prompts/ and index/ by the build backend).
# Installed packages are plain folders, so the resources are real paths.
PROMPTS_DIR = Path(str(resources.files("assistant.prompts_data")))
BUNDLED_CORPUS = Path(str(resources.files("assistant.corpus_data")))


def is_loopback(host: str | None) -> bool:
    """Whether `host` names this machine (a loopback address or localhost)."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address((host or "").strip("[]")).is_loopback
    except ValueError:
        return False


def _user_dir(variable: str, fallback: str) -> Path:
    """This application's folder in an XDG base folder: $<variable>, else ~/<fallback>."""
    return Path(os.environ.get(variable) or Path.home() / fallback) / "icml-assistant"


def user_data_dir() -> Path:
    """Where the store lives by default: $XDG_DATA_HOME/icml-assistant (~/.local/share/icml-assistant)."""
    return _user_dir("XDG_DATA_HOME", ".local/share")


def user_cache_dir() -> Path:
    """Where assembled models and parsed corpora live: $XDG_CACHE_HOME/icml-assistant (~/.cache/...)."""
    return _user_dir("XDG_CACHE_HOME", ".cache")


class IndexSettings(BaseModel):
    """Corpus and index: which papers, where their index lives, how they are chunked and embedded."""

    corpus: list[Path] = Field(
        default_factory=list,
        description="Corpus files (.txt paper lists or .jsonl); empty means what the index was built from, "
        "else the bundled ICML 2026 lists in index/.",
    )
    index_dir: Path = Field(
        default_factory=lambda: user_data_dir() / "store", description="Folder of the embedded Chroma store."
    )
    collection: str = Field("papers", description="Chroma collection name.")
    chroma_host: str | None = Field(None, description="Chroma server host; unset uses the embedded store.")
    chroma_port: int = Field(8000, description="Chroma server port.")
    chroma_timeout: float = Field(10.0, description="Seconds to wait for a Chroma server.")
    chunk_size: int = Field(96, ge=16, le=2048, description="Chunk size in tiktoken tokens.")
    chunk_overlap: int = Field(16, ge=0, le=512, description="Overlap between chunks in tokens.")
    embedding: str = Field(
        "minilm",
        description="'minilm' (local all-MiniLM-L6-v2, ONNX) or 'openai:<model>' (needs OPENAI_API_KEY).",
    )
    embed_batch_size: int = Field(64, ge=1, le=2048, description="Texts per embedding request and per index write.")
    cache_dir: Path = Field(default_factory=user_cache_dir, description="Where assembled models live.")


class RetrievalSettings(BaseModel):
    """Retrieval: how the papers closest to a question are found."""

    k: int = Field(5, ge=1, le=50, description="Papers returned by retrieval.")
    candidates: int = Field(20, ge=1, le=200, description="Chunks fetched from each retriever before fusion.")
    dense_weight: float = Field(0.8, ge=0.0, le=1.0, description="Weight of the dense side in score fusion.")
    fusion: Literal["score", "rrf", "dense", "bm25"] = Field("score", description="How dense and BM25 are fused.")
    min_relevance: float = Field(0.25, description="Below this dense similarity nothing is relevant (refusal).")


class LLMSettings(BaseModel):
    """Language model: which model answers, where it runs, and what it keeps."""

    llm_base_url: str | None = Field(None, description="OpenAI-compatible server URL; unset starts the local model.")
    llm_model: str = Field("local", description="Model name sent to the server (e.g. gpt-4o-mini).")
    llm_api_key: str | None = Field(None, description="API key; falls back to OPENAI_API_KEY.")
    llm_backend: Literal["local", "openai", "server"] = Field(
        "local", description="'local' (embedded llama.cpp), 'openai', or 'server' (llm_base_url)."
    )
    gguf_path: Path | None = Field(None, description="Your own GGUF file for the local server.")
    llm_threads: int = Field(2, ge=1, le=64, description="CPU threads of the local model.")
    llm_context: int = Field(4096, ge=512, le=131072, description="Context window of the local model in tokens.")
    llm_prompt_cache_mb: int = Field(
        512, ge=0, le=65536, description="RAM for the local server's prompt cache (states of earlier prompts); 0 = off."
    )
    read_ahead_idle_seconds: float = Field(
        30.0, ge=0,
        description="`assistant serve` and `assistant chat` with the embedded model: after this many seconds "
        "without a question or table, the model reads papers it has not read before, one at a time, keeping each "
        "on disk (a question arriving meanwhile waits for at most one paper, ~3 s); 0 = never.",
    )
    llm_kept_states_mb: int = Field(
        2048, ge=0, le=1 << 20,
        description="Disk for the local model's kept prompt states (a paper read once is not read again, "
        "~13 MB a state, two a paper: a question's and a table row's); 0 = keep none.",
    )
    llm_kept_states_dir: Path | None = Field(
        None, description="Where kept prompt states live (default: <cache_dir>/prompt-states)."
    )
    llm_timeout: float = Field(120.0, gt=0, description="Seconds before an LLM request is abandoned.")
    llm_start_timeout: float = Field(180.0, gt=0, description="Seconds to wait for the local server to load.")
    max_answer_tokens: int = Field(256, ge=16, le=4096, description="Upper bound on generated tokens.")
    temperature: float = Field(
        0.0, ge=0.0, le=2.0, description="Sampling temperature of the answer (0: the same answer each time)."
    )


class AnswerSettings(BaseModel):
    """Answering: what the prompt holds, and when an answer is given, checked or refused."""

    context_papers: int = Field(3, ge=1, le=20, description="Papers placed in the prompt.")
    sentences_per_paper: int = Field(
        3, ge=1, le=20, description="Best sentences of each paper in the prompt (of the papers after the first, "
        "with whole_first_paper; of a comparison's papers, always)."
    )
    whole_first_paper: bool = Field(
        True,
        description="The prompt opens with the first paper's whole abstract: the model's state after reading it is "
        "kept on disk, so a question about a paper read before reads only the rest of the prompt.",
    )
    lone_paper_margin: float = Field(
        0.1, ge=0.0,
        description="With whole_first_paper: when the first paper's retrieval score leads every other's by this much, "
        "it is the only paper in the prompt.",
    )
    other_paper_sentences: int = Field(
        1, ge=0, le=20, description="With whole_first_paper: best sentences of each further paper (not in comparisons)."
    )
    max_question_tokens: int = Field(400, ge=16, le=8192, description="Longer questions are truncated.")
    support_threshold: float = Field(0.55, description="Similarity above which a source sentence supports a claim.")
    extractive_threshold: float = Field(
        0.45,
        description="When the model declines, answer from the abstract's sentences that say what was asked if the "
        "best of them is this similar to the question.",
    )
    focus_threshold: float = Field(
        0.40,
        description="When the model declines a question whose asked slot can be checked (a number, a count, a "
        "dataset, a baseline, a name), answer from the sentences that carry it if the best is this similar to the "
        "question (such a sentence has passed the slot check, so it may be less similar than extractive_threshold).",
    )
    phrase_threshold: float = Field(
        0.33,
        description="A which-paper question that names no paper is refused unless the closest abstract says some "
        "phrase of it this clearly (cosine of the best phrase-sentence pair).",
    )
    answer_threshold: float = Field(
        0.30,
        description="When the question names no paper, the best evidence sentence must be this similar to it to "
        "answer at all (else a refusal naming the closest papers).",
    )
    subject_threshold: float = Field(
        0.64,
        description="A paper whose best sentence is this similar to the question is what it is about: a detail its "
        "abstract does not give gets a near-miss reply naming that paper, else a plain refusal.",
    )
    answer_format: Literal["draft", "quote_first"] = Field(
        "draft",
        description="'draft': the model writes a free-form answer with [n] markers; 'quote_first': it first picks "
        "the ids of the sentences that answer (JSON-schema constrained output), then writes from them.",
    )
    paper_judge: bool = Field(
        True,
        description="A question that names no paper, whose first paper does not lead the second by lone_paper_margin: "
        "ask the model whether each of the first three papers found is "
        "about it (one short request per kept paper) and order them by that and their retrieval score, where the "
        "backend gives log-probabilities; false keeps retrieval's order.",
    )
    history_turns: int = Field(6, ge=0, le=50, description="Earlier messages used to understand a follow-up.")
    follow_up_search: Literal["conversation", "rewrite"] = Field(
        "conversation",
        description="'conversation': a follow-up that leans on the conversation (\"How did they evaluate it?\") is "
        "searched for together with the last exchange, one with its own subject as typed, with no model call; "
        "'rewrite': the model first rewrites every follow-up into a standalone query (about a second more).",
    )


class TopicSettings(BaseModel):
    """Topics and tables: which papers are on a topic, and how many rows a table holds."""

    topic_threshold: float | None = Field(
        None, ge=0.0, le=1.0,
        description="Topic questions and tables by topic list every candidate whose probability of being on the topic "
        "(a rule over its sentences' similarity, retrieval scores, the cross-encoder's reading and the model's odds, "
        "fitted on the evaluation's topics) reaches this; unset: the fitted threshold (assistant/data/topics.json).",
    )
    related_threshold: float | None = Field(
        None, ge=0.0, le=1.0,
        description="Below topic_threshold, candidates at least this likely to be on the topic are shown as "
        "'possibly related' (at most 5, the most likely first); unset: the fitted floor.",
    )
    topic_judge: bool = Field(
        True,
        description="Topic questions and tables by topic: ask the model whether each likely candidate is on the topic "
        "(one short request per candidate, reading nothing again for a kept paper), where the backend gives "
        "log-probabilities; its odds join the rule's features.",
    )
    topic_candidates: int = Field(
        60, ge=1, le=500,
        description="Papers weighed for a topic (the closest to it first): every paper of a collection this small.",
    )
    max_table_rows: int = Field(40, ge=1, le=500, description="The most papers (rows) one table holds.")


class UISettings(BaseModel):
    """Chat UI: where the browser UI listens, and who may log in."""

    host: str = Field("127.0.0.1", description="Address the chat UI binds to.")
    port: int = Field(7860, description="Port of the chat UI.")
    username: str | None = Field(None, description="UI login; required when binding beyond loopback.")
    password: str | None = Field(None, description="UI password; required when binding beyond loopback.")


# The groups by their README heading, in the README's order.
SETTING_GROUPS: dict[str, type[BaseModel]] = {
    "Corpus and index": IndexSettings,
    "Retrieval": RetrievalSettings,
    "Language model": LLMSettings,
    "Answering": AnswerSettings,
    "Topics and tables": TopicSettings,
    "Chat UI": UISettings,
}


# pydantic takes inherited fields from the last base to the first: the groups are listed in reverse
# so the fields keep the groups' order.
class Settings(UISettings, TopicSettings, AnswerSettings, LLMSettings, RetrievalSettings, IndexSettings, BaseSettings):
    """Every setting of the assistant, read from arguments and `ASSISTANT_*` environment variables."""

    model_config = SettingsConfigDict(env_prefix="ASSISTANT_", extra="forbid")
