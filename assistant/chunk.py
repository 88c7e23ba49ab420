"""Chunk papers: sentence-aware, token-sized chunks (llama-index SentenceSplitter + tiktoken).

Each chunk is a llama-index `TextNode` with a stable id (`<paper id>:<n>`) and its paper's
metadata as flat scalars, which is what Chroma accepts and what retrieval groups by.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import tiktoken
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import TextNode

from .config import Settings
from .types import Paper

ENCODING = "cl100k_base"
_META_KEYS = ["paper_id", "source", "ordinal", "title", "paper_hash", "chunk"]


def paper_hash(paper: Paper, settings: Settings) -> str:
    """Changes whenever the paper or anything that shapes its chunks or vectors changes."""
    key = "\x1f".join(
        [paper.abstract, paper.title, str(settings.chunk_size), str(settings.chunk_overlap), settings.embedding]
    )
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def make_splitter(settings: Settings) -> SentenceSplitter:
    encoding = tiktoken.get_encoding(ENCODING)
    return SentenceSplitter(
        chunk_size=settings.chunk_size,
        chunk_overlap=min(settings.chunk_overlap, settings.chunk_size // 2),
        tokenizer=encoding.encode,
        include_metadata=False,
        include_prev_next_rel=False,
    )


def chunk_papers(papers: Iterable[Paper], settings: Settings) -> list[TextNode]:
    """Split every paper's cleaned text into chunks that carry the paper's metadata."""
    splitter = make_splitter(settings)
    nodes: list[TextNode] = []
    for paper in papers:
        pieces = splitter.split_text(paper.text)
        digest = paper_hash(paper, settings)
        for number, piece in enumerate(pieces):
            metadata = {
                "paper_id": paper.id,
                "source": paper.source,
                "ordinal": paper.ordinal,
                "title": paper.title,
                "paper_hash": digest,
                "chunk": number,
            }
            nodes.append(
                TextNode(
                    id_=f"{paper.id}:{number}",
                    text=piece,
                    metadata=metadata,
                    excluded_embed_metadata_keys=_META_KEYS,
                    excluded_llm_metadata_keys=_META_KEYS,
                )
            )
    return nodes


def count_tokens(text: str) -> int:
    return len(tiktoken.get_encoding(ENCODING).encode(text))


def truncate_tokens(text: str, limit: int) -> str:
    encoding = tiktoken.get_encoding(ENCODING)
    tokens = encoding.encode(text)
    return text if len(tokens) <= limit else encoding.decode(tokens[:limit])


