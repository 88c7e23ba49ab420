"""Process environment that keeps the stack offline; applied before any heavy import.

tiktoken downloads encodings on first use unless TIKTOKEN_CACHE_DIR points at a folder
holding them; llama-index-core ships cl100k_base and o200k_base but only sets the variable
inside its own helper, so we point it at those files for the whole process.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

_DEFAULTS = {
    "ORT_DISABLE_TELEMETRY": "1",
    "GRADIO_ANALYTICS_ENABLED": "False",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "TOKENIZERS_PARALLELISM": "false",
}


def tiktoken_cache_dir() -> Path | None:
    """The tiktoken cache folder shipped inside llama-index-core (found without importing it)."""
    spec = importlib.util.find_spec("llama_index.core")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "_static" / "tiktoken_cache"
    return folder if folder.is_dir() else None


def configure() -> None:
    """Set the offline environment unless the user already chose otherwise."""
    for key, value in _DEFAULTS.items():
        os.environ.setdefault(key, value)
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        folder = tiktoken_cache_dir()
        if folder is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
