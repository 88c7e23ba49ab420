"""Process environment that keeps the stack offline (applied before any heavy import), and model
files shipped inside installed packages: found without importing them, checked by sha256, and
opened for onnxruntime on the CPU.

tiktoken downloads encodings on first use unless TIKTOKEN_CACHE_DIR points at a folder
holding them; llama-index-core ships cl100k_base and o200k_base but only sets the variable
inside its own helper, so we point it at those files for the whole process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from .errors import ModelError

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


def packaged_file(package: str, relative: str, sha256: str, what: str, install_hint: str) -> Path:
    """`relative` inside the installed `package`, after checking its sha256 (a ModelError saying how
    to reinstall otherwise)."""
    spec = importlib.util.find_spec(package)  # finds the folder without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"The {what} package '{package}' is not installed. Run: {install_hint}")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise ModelError(f"{path} is missing; reinstall with: {install_hint}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ModelError(f"{path} has sha256 {digest}, expected {sha256}; the file is corrupt. Reinstall: {install_hint}")
    return path


def onnx_model(model: Path, tokenizer: Path, threads: int, max_tokens: int, strategy: str = "longest_first") -> tuple[Any, Any]:
    """An onnxruntime CPU session for `model` and its word-piece tokenizer (truncating, padding)."""
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    words = Tokenizer.from_file(str(tokenizer))
    words.enable_truncation(max_length=max_tokens, strategy=strategy)
    words.enable_padding(pad_id=0, pad_token="[PAD]")
    return session, words
