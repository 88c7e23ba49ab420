"""Vector store: the only module that touches chromadb.

The embedded default is a persistent Chroma under `index/store`; setting a host uses a Chroma
server (`chroma run`) instead. Data lives in generation collections `<name>-g<stamp>`; a
pointer collection `<name>` names the active one in its metadata. A rebuild writes a new
generation and flips the pointer only when it is complete, so a crash leaves the old index
usable. Collection metadata records the embedding model, its dimension and a corpus
fingerprint, which is how a mismatched index is detected.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import chromadb
import httpx
from chromadb.config import Settings as ChromaSettings
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from llama_index.vector_stores.chroma import ChromaVectorStore

from .config import Settings
from .errors import IndexMismatchError, IndexMissingError, StoreUnavailableError

_WRITE_BATCH = 1000
# Rows per read of a whole collection: one unpaged `get` binds a SQL variable per row and
# fails beyond SQLite's limit (32,766) with "too many SQL variables", about 10,000 abstracts.
_READ_PAGE = 5000


@dataclass(frozen=True)
class IndexInfo:
    """What the active collection records about how it was built."""

    collection: str
    embedding_model: str
    embedding_dim: int
    fingerprint: str
    chunks: int
    corpus: list[str]


def _rebuild_hint(settings: Settings) -> str:
    return "Run `assistant index --rebuild` (or delete {}) to rebuild it.".format(
        settings.index_dir if not settings.chroma_host else f"collection '{settings.collection}' on the server"
    )


class Store:
    """A Chroma client with the assistant's collection conventions."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._active: Any | None = None
        chroma_settings = ChromaSettings(anonymized_telemetry=False)
        try:
            if settings.chroma_host:
                # chromadb's HTTP client waits forever for a server that accepts but never
                # answers; a bounded heartbeat first turns that into a clear error.
                httpx.get(
                    f"http://{settings.chroma_host}:{settings.chroma_port}/api/v2/heartbeat",
                    timeout=settings.chroma_timeout,
                ).raise_for_status()
                self.client = chromadb.HttpClient(
                    host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
                )
                self.client.heartbeat()
            else:
                settings.index_dir.mkdir(parents=True, exist_ok=True)
                self.client = chromadb.PersistentClient(path=str(settings.index_dir), settings=chroma_settings)
        except Exception as exc:  # chromadb raises ValueError / httpx errors / OSError here
            raise StoreUnavailableError(
                f"Cannot open the {self._describe()}: {exc}. "
                + (
                    "Start it with `chroma run --path DIR --host HOST --port PORT`, or unset ASSISTANT_CHROMA_HOST "
                    "to use the embedded store."
                    if settings.chroma_host
                    else "Check that the folder is writable."
                )
            ) from exc

    def _describe(self) -> str:
        s = self.settings
        return f"Chroma server at {s.chroma_host}:{s.chroma_port}" if s.chroma_host else f"embedded Chroma store at {s.index_dir}"

    def _call(self, action: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (IndexMismatchError, IndexMissingError):
            raise
        except Exception as exc:
            text = f"{type(exc).__name__} {exc}".lower()
            if self.settings.chroma_host and any(word in text for word in ("connect", "timeout", "timed out")):
                raise StoreUnavailableError(
                    f"Lost the {self._describe()} while trying to {action}: {exc}. Is `chroma run` still up?"
                ) from exc
            raise

    # -- the pointer -------------------------------------------------------------------------

    def _pointer(self) -> Any:
        return self._call("read the index pointer", self.client.get_or_create_collection, self.settings.collection)

    def active_name(self) -> str | None:
        metadata = self._pointer().metadata or {}
        name = metadata.get("active")
        return str(name) if name else None

    def _collection(self, name: str) -> Any:
        return self._call("open the index", self.client.get_collection, name)

    def active(self) -> Any | None:
        """The active generation, looked up once (this process's `activate` replaces it)."""
        if self._active is not None:
            return self._active
        name = self.active_name()
        if name is None:
            return None
        try:
            self._active = self._collection(name)
        except StoreUnavailableError:
            raise
        except Exception:
            return None  # the pointer names a collection that is gone: treat as missing
        return self._active

    def _missing(self) -> IndexMissingError:
        return IndexMissingError(f"No index in the {self._describe()}. Run `assistant index` to build it.")

    def _active_or_raise(self) -> Any:
        collection = self.active()
        if collection is None:
            raise self._missing()
        return collection

    def info(self) -> IndexInfo | None:
        collection = self.active()
        if collection is None:
            return None
        meta = collection.metadata or {}
        return IndexInfo(
            collection=collection.name,
            embedding_model=str(meta.get("embedding_model", "")),
            embedding_dim=int(meta.get("embedding_dim", 0)),
            fingerprint=str(meta.get("fingerprint", "")),
            corpus=json.loads(str(meta.get("corpus", "[]"))),
            chunks=self._call("count chunks", collection.count),
        )

    def require(self, embedding_model: str) -> IndexInfo:
        """The active index, checked to have been built with `embedding_model`."""
        info = self.info()
        if info is None or info.chunks == 0:
            raise self._missing()
        self.check_embedding(self.active(), embedding_model)
        return info

    def check_embedding(self, collection: Any, embedding_model: str) -> None:
        """IndexMismatchError unless `collection` was built with `embedding_model`."""
        recorded = str((collection.metadata or {}).get("embedding_model", ""))
        if recorded != embedding_model:
            raise IndexMismatchError(
                f"The index was built with the embedding model '{recorded}', but the settings ask for "
                f"'{embedding_model}'; their vectors are not comparable. {_rebuild_hint(self.settings)}"
            )

    # -- writing -----------------------------------------------------------------------------

    def new_generation(self, embedding_model: str, embedding_dim: int) -> Any:
        """A fresh, empty collection for a rebuild; inactive until `activate`."""
        name = f"{self.settings.collection}-g{time.strftime('%Y%m%d%H%M%S')}{int(time.time() * 1000) % 1000:03d}"
        return self._call(
            "create a collection",
            self.client.create_collection,
            name,
            metadata={"embedding_model": embedding_model, "embedding_dim": embedding_dim, "fingerprint": ""},
            configuration={"hnsw": {"space": "cosine"}},
        )

    def activate(self, collection: Any) -> None:
        """Point the index at `collection`, then drop every other generation (the one it
        replaces, and any left half-written by an interrupted rebuild)."""
        self._pointer().modify(metadata={"active": collection.name})
        self._active = collection
        prefix = f"{self.settings.collection}-g"
        for name in self._call("list collections", self.client.list_collections):
            name = getattr(name, "name", name)
            if name.startswith(prefix) and name != collection.name:
                try:
                    self.client.delete_collection(name)
                except Exception:
                    pass  # a leftover generation wastes space but breaks nothing

    def paper_hashes(self, collection: Any) -> dict[str, tuple[str, list[str]]]:
        """paper id -> (paper hash, chunk ids) for everything stored in `collection`."""
        found: dict[str, tuple[str, list[str]]] = {}
        got = self._read_all(collection, ["metadatas"])
        for chunk_id, meta in zip(got["ids"], got["metadatas"]):
            paper_id = str(meta.get("paper_id"))
            digest, ids = found.get(paper_id, (str(meta.get("paper_hash")), []))
            ids.append(chunk_id)
            found[paper_id] = (digest, ids)
        return found

    def _read_all(self, collection: Any, include: list[str]) -> dict[str, list[Any]]:
        """Every row of `collection` (ids plus `include`), read a page at a time."""
        got: dict[str, list[Any]] = {"ids": [], **{field: [] for field in include}}
        while True:
            page = self._call(
                "read the index", collection.get, include=include, limit=_READ_PAGE, offset=len(got["ids"])
            )
            for field in got:
                got[field].extend(page[field])
            if len(page["ids"]) < _READ_PAGE:
                return got

    def upsert(self, collection: Any, nodes: list[TextNode], embeddings: list[list[float]]) -> None:
        """Write chunks with their vectors in one call per batch (ids are stable: rewrite = update)."""
        for start in range(0, len(nodes), _WRITE_BATCH):
            batch = nodes[start : start + _WRITE_BATCH]
            self._call(
                "write chunks",
                collection.upsert,
                ids=[node.node_id for node in batch],
                embeddings=embeddings[start : start + _WRITE_BATCH],
                documents=[node.text for node in batch],
                # The same flat layout ChromaVectorStore.add writes, so its queries read ours back.
                metadatas=[node_to_metadata_dict(node, remove_text=True, flat_metadata=True) for node in batch],
            )

    def delete(self, collection: Any, chunk_ids: list[str]) -> None:
        for start in range(0, len(chunk_ids), _WRITE_BATCH):
            self._call("delete chunks", collection.delete, ids=chunk_ids[start : start + _WRITE_BATCH])

    def mark_complete(self, collection: Any, fingerprint: str, corpus: list[str]) -> None:
        """Record what the collection now holds (metadata values must be flat scalars)."""
        meta = dict(collection.metadata or {})
        meta["fingerprint"] = fingerprint
        meta["corpus"] = json.dumps(corpus)
        meta.pop("hnsw:space", None)
        self._call("record the fingerprint", collection.modify, metadata=meta)

    # -- reading -----------------------------------------------------------------------------

    def vector_store(self) -> ChromaVectorStore:
        return ChromaVectorStore(chroma_collection=self._active_or_raise())

    def nodes(self) -> list[TextNode]:
        """Every stored chunk as a llama-index node (text and metadata, no vectors)."""
        collection = self.active()
        if collection is None:
            return []
        got = self._read_all(collection, ["documents", "metadatas"])
        nodes = []
        for chunk_id, text, meta in zip(got["ids"], got["documents"], got["metadatas"]):
            node = metadata_dict_to_node(meta, text=text)
            node.id_ = chunk_id
            nodes.append(node)
        return nodes

    def query(self, embedding: list[float], n: int, where: dict[str, Any] | None = None) -> dict[str, Any]:
        """A bare Chroma query, used by the benchmark as the baseline for retrieval overhead."""
        collection = self._active_or_raise()
        return self._call(
            "query", collection.query, query_embeddings=[embedding], n_results=n, where=where,
            include=["documents", "metadatas", "distances"],
        )
