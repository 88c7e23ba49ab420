"""Vector store: the only module that touches chromadb.

The embedded default is a persistent Chroma under `index/store`; setting a host uses a Chroma
server (`chroma run`) instead. Data lives in generation collections `<name>-g<stamp>`; a
pointer collection `<name>` names the active one in its metadata. Every change (a rebuild or
an incremental update) is written to a new, inactive generation, and the pointer is flipped
to it in one metadata write only when it is complete: a reader sees the previous corpus or
the new one, never a mix, whenever a writer dies. The chunks of an active generation are never
written to. Collection metadata records the embedding model, its dimension, the chunking, and (once
complete) the corpus fingerprint, which is how a mismatched or unfinished index is detected.

An embedded store whose files are damaged is reported as such (`StoreDamagedError`) and can
be moved aside whole (`move_aside`), so a rebuild starts from an empty folder; the `manifest`
beside it says which corpus files to rebuild it from.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chromadb
import httpx
from chromadb.config import Settings as ChromaSettings
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from llama_index.vector_stores.chroma import ChromaVectorStore

from .config import Settings
from .errors import IndexMismatchError, IndexMissingError, StoreDamagedError, StoreUnavailableError
from .manifest import write_manifest

try:  # POSIX; elsewhere two writers are not kept apart
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

_WRITE_BATCH = 1000
# Rows per read of a whole collection: one unpaged `get` binds a SQL variable per row and
# fails beyond SQLite's limit (32,766) with "too many SQL variables", about 10,000 abstracts.
_READ_PAGE = 5000
# What SQLite says about a file that is not (or no longer) a whole database: SQLITE_CORRUPT (11),
# SQLITE_NOTADB (26), and the messages of a schema that lost its tables.
_DAMAGED = ("malformed", "not a database", "code: 11)", "code: 26)", "no such table", "database corrupt")
_LOCK = "write.lock"


@dataclass(frozen=True)
class IndexInfo:
    """What the active collection records about how it was built."""

    collection: str
    embedding_model: str
    embedding_dim: int
    fingerprint: str
    chunks: int
    corpus: list[str]
    chunking: str = ""  # "<chunk size>/<overlap>" ("" in indexes built before it was recorded)
    recorded_chunks: int = -1  # the chunk count written when the generation was completed (-1: not recorded)


def _rebuild_hint(settings: Settings) -> str:
    return "Run `assistant index --rebuild` (or delete {}) to rebuild it.".format(
        settings.index_dir if not settings.chroma_host else f"collection '{settings.collection}' on the server"
    )


def _looks_damaged(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(sign in text for sign in _DAMAGED)


def _damaged(settings: Settings, exc: BaseException) -> StoreDamagedError:
    reason = re.sub(r"^error returned from database: |\(code: \d+\) ", "", " ".join(str(exc).split()))
    return StoreDamagedError(
        f"The index store in {settings.index_dir} is damaged and cannot be opened ({reason}). "
        "Run `assistant index --rebuild` to move it aside (it is kept) and build a fresh index."
    )


def _forget_client(path: Path) -> None:
    """Drop chromadb's cached client system for `path`.

    chromadb keeps one system per store path for the whole process, and caches it before it
    has started: a store that failed to open would be handed out broken again, and a store
    that was moved aside would keep being written through its old open files.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    key = str(path)
    system = SharedSystemClient._identifier_to_system.pop(key, None)
    SharedSystemClient._identifier_to_refcount.pop(key, None)
    if system is not None:
        with contextlib.suppress(Exception):
            system.stop()


def move_aside(settings: Settings) -> Path:
    """Rename the embedded store's folder to `<folder>.broken-<time>` (kept for inspection) and
    return the new path; the next `Store` starts from an empty folder."""
    folder = Path(settings.index_dir)
    _forget_client(folder)
    target = folder.with_name(f"{folder.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    n = 1
    while target.exists():
        n += 1
        target = folder.with_name(f"{folder.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
    folder.rename(target)
    return target


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
            if not settings.chroma_host and _looks_damaged(exc):
                _forget_client(settings.index_dir)
                raise _damaged(settings, exc) from exc
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
            if not self.settings.chroma_host and _looks_damaged(exc):
                raise _damaged(self.settings, exc) from exc
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
        except (StoreUnavailableError, StoreDamagedError):
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
            chunking=str(meta.get("chunking", "")),
            recorded_chunks=int(meta.get("chunks", -1)),
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

    # -- generations -------------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the embedded store's write lock: one writer at a time, so a generation that is
        not complete while we hold it was left by a writer that died. The kernel releases the
        lock of a killed process. (A Chroma server's writers are not kept apart.)"""
        if self.settings.chroma_host or fcntl is None:
            yield
            return
        path = Path(self.settings.index_dir) / _LOCK
        with open(path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.seek(0)
                holder = lock.read().strip() or "another process"
                raise StoreUnavailableError(
                    f"The index in {self.settings.index_dir} is being updated by {holder}; "
                    "wait for it to finish, then run the command again."
                ) from None
            lock.seek(0)
            lock.truncate()
            lock.write(f"process {os.getpid()} (assistant index)")
            lock.flush()
            self._active = None  # another writer may have flipped the pointer before we got here
            try:
                yield
            finally:
                lock.seek(0)
                lock.truncate()
                fcntl.flock(lock, fcntl.LOCK_UN)

    def generations(self) -> list[Any]:
        """Every generation collection of this index, the active one included."""
        prefix = f"{self.settings.collection}-g"
        found = []
        for item in self._call("list collections", self.client.list_collections):
            name = getattr(item, "name", item)
            if name.startswith(prefix):
                found.append(item if hasattr(item, "metadata") else self._collection(name))
        return found

    def unfinished(self, target: str) -> Any | None:
        """The newest generation an interrupted update towards corpus fingerprint `target` left
        behind (complete generations and other targets do not count)."""
        active = self.active_name()
        candidates = [
            c for c in self.generations()
            if c.name != active and not (c.metadata or {}).get("fingerprint")
            and (c.metadata or {}).get("target") == target
        ]
        return max(candidates, key=lambda c: c.name, default=None)

    def discard_unfinished(self, keep: Any | None = None) -> list[str]:
        """Delete generations that interrupted writers left incomplete (not `keep`); their names."""
        active = self.active_name()
        dropped = []
        for collection in self.generations():
            if collection.name in (active, getattr(keep, "name", None)) or (collection.metadata or {}).get("fingerprint"):
                continue
            with contextlib.suppress(Exception):  # a leftover wastes space but breaks nothing
                self.client.delete_collection(collection.name)
                dropped.append(collection.name)
        return dropped

    def new_generation(self, embedding_model: str, embedding_dim: int, target: str = "") -> Any:
        """A fresh, empty collection that will hold the index of corpus fingerprint `target`;
        inactive (and without a fingerprint) until `mark_complete` and `activate`."""
        name = f"{self.settings.collection}-g{time.strftime('%Y%m%d%H%M%S')}{int(time.time() * 1000) % 1000:03d}"
        return self._call(
            "create a collection",
            self.client.create_collection,
            name,
            metadata={
                "embedding_model": embedding_model, "embedding_dim": embedding_dim, "fingerprint": "",
                "target": target, "chunking": f"{self.settings.chunk_size}/{self.settings.chunk_overlap}",
            },
            configuration={"hnsw": {"space": "cosine"}},
        )

    def activate(self, collection: Any) -> None:
        """Point the index at `collection` (one metadata write: the commit), then drop every
        other generation except the one it replaces, which a process that opened it before
        the switch may still be reading; it goes at the next switch."""
        previous = self.active_name()
        self._pointer().modify(metadata={"active": collection.name})
        self._active = collection
        for other in self.generations():
            if other.name not in (collection.name, previous):
                with contextlib.suppress(Exception):  # a leftover generation wastes space but breaks nothing
                    self.client.delete_collection(other.name)
        self._write_manifest(collection)

    def _write_manifest(self, collection: Any) -> None:
        """Record beside the embedded store what it was built from (`manifest`)."""
        if not self.settings.chroma_host:
            write_manifest(Path(self.settings.index_dir), collection.name, collection.metadata or {})

    # -- writing -----------------------------------------------------------------------------

    def paper_hashes(self, collection: Any) -> dict[str, tuple[str, list[str]]]:
        """paper id -> (paper hash, chunk ids) for everything stored in `collection`. A paper
        whose chunks disagree on the hash (half rewritten) gets the hash "" (matches nothing)."""
        found: dict[str, tuple[str, list[str]]] = {}
        got = self._read_all(collection, ["metadatas"])
        for chunk_id, meta in zip(got["ids"], got["metadatas"]):
            paper_id = str(meta.get("paper_id"))
            digest = str(meta.get("paper_hash"))
            seen, ids = found.get(paper_id, (digest, []))
            ids.append(chunk_id)
            found[paper_id] = (seen if seen == digest else "", ids)
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

    def copy(self, source: Any, target: Any, chunk_ids: list[str]) -> None:
        """Copy chunks (text, metadata and vector) from `source` to `target`, a page at a time.

        This is what keeps an update of a few papers from re-embedding the rest. (Chroma's
        `Collection.fork` would do it copy-on-write, but only hosted Chroma implements it.)
        """
        for start in range(0, len(chunk_ids), _WRITE_BATCH):
            page = self._call(
                "read the index", source.get, ids=chunk_ids[start : start + _WRITE_BATCH],
                include=["embeddings", "documents", "metadatas"],
            )
            self._call(
                "write chunks", target.upsert, ids=page["ids"], embeddings=page["embeddings"],
                documents=page["documents"], metadatas=page["metadatas"],
            )

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
        """Record what the collection now holds: the corpus fingerprint, its files and the chunk
        count (metadata values must be flat scalars). Written last, before `activate`."""
        meta = dict(collection.metadata or {})
        meta["fingerprint"] = fingerprint
        meta["corpus"] = json.dumps(corpus)
        meta["chunks"] = self._call("count chunks", collection.count)
        meta.pop("hnsw:space", None)
        self._call("record the fingerprint", collection.modify, metadata=meta)
        if collection.name == self.active_name():
            self._write_manifest(collection)

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

    def paper_vectors(self) -> dict[str, list[list[float]]]:
        """paper id -> the stored vectors of its chunks (what the topic grouping clusters)."""
        collection = self.active()
        if collection is None:
            return {}
        got = self._read_all(collection, ["embeddings", "metadatas"])
        vectors: dict[str, list[list[float]]] = {}
        for embedding, meta in zip(got["embeddings"], got["metadatas"]):
            vectors.setdefault(str(meta.get("paper_id")), []).append(list(embedding))
        return vectors
