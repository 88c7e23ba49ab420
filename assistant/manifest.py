"""The manifest: a small JSON file beside the embedded store saying what it was built from.

Chroma keeps the same facts in the collection's metadata, but a damaged store cannot be opened to
read them; the manifest can, so a rebuild of a damaged store knows its corpus files.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"


def write_manifest(folder: Path, active: str, metadata: dict[str, Any]) -> None:
    """Record the active generation `active` and what its collection `metadata` says it holds
    (written whole, then renamed into place)."""
    manifest = {
        "active": active, "fingerprint": metadata.get("fingerprint", ""),
        "corpus": json.loads(str(metadata.get("corpus", "[]"))), "embedding_model": metadata.get("embedding_model", ""),
    }
    path = Path(folder) / MANIFEST
    partial = path.with_name(f".{MANIFEST}.{os.getpid()}")
    with contextlib.suppress(OSError):  # only a hint for recovery: never fail an index over it
        partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        os.replace(partial, path)


def recorded_corpus(folder: Path) -> list[str]:
    """The corpus files the embedded store in `folder` was last built from, per its manifest
    ([] when there is none); readable even when Chroma cannot open the store."""
    try:
        corpus = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8")).get("corpus", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [str(p) for p in corpus] if isinstance(corpus, list) else []
