"""The local model's server process itself: `llama_cpp.server` with a prompt cache that stays small,
and prompt states kept on disk.

`server.LocalServer` runs `python -m assistant.llm.child [--keep_dir DIR --keep_mb N] [--no_extra_bufts] <llama_cpp.server
arguments>`. The server's RAM prompt cache keeps the model state after each request, so a request
that shares a prefix with any earlier one (the fixed instruction prefix, a repeated question)
re-reads only the part that differs, not just when it shares it with the request before.

Why this wrapper exists:
- llama-cpp-python 0.3.x stores, with every cached state, a copy of the logits of the last 512
  prompt positions (~300 MB for Qwen's 151k-token vocabulary) that the cache's size limit does not
  count, so memory grew by hundreds of MB per request. With `logits_all=False` those rows are never
  read (sampling happens inside llama.cpp), so only one row is saved and restored, and the cache's
  limit then bounds its memory.
- Reading a paper's abstract costs the model seconds on a laptop CPU, every time a new process
  starts. `POST /v1/assistant/keep` (a chat request) reads a prompt prefix, such as the
  instructions and one paper's sentences, and keeps the model's state after it in `--keep_dir`;
  any later request that starts with that prefix, in this process or a later one, loads the state
  instead of reading the prefix again. llama-cpp-python's own disk cache is not used for this: it
  writes every request's state to disk and deletes a state when it is read. With `"dry": true` the
  same route only says whether such a state is at hand (kept or in RAM), reading nothing: a caller
  can then choose a shorter prompt for a prefix the model would otherwise read for seconds.
- `--no_extra_bufts` loads the model without llama.cpp's extra buffer types (the CPU-specific weight
  layouts: AMX tiles, repacked blocks). `llama_cpp.server` has no option for it. A llama.cpp built with
  AMX kernels by GCC 12 dies with SIGILL on its first real prompt; without those buffers the same build
  runs (see `server.LocalServer`, which restarts the server this way after such a crash).
- `POST /v1/assistant/choice` answers how likely each of a few one-word replies ("yes", "no") is as
  the first token of the reply to a chat request: the server's OpenAI route gives log-probabilities
  only with `logits_all=True`, which keeps a row of logits for every prompt position (gigabytes for
  this vocabulary), while the last position's row, which is all this needs, is at hand anyway.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp.llama_cache import LlamaRAMCache

_save_state = llama_cpp.Llama.save_state
_load_state = llama_cpp.Llama.load_state


def _one_row_of_logits(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` run while `self.scores` shows one row: `save_state` then copies one row of
    logits instead of up to `n_batch` rows, and `load_state` writes one back instead of
    filling (and so making resident) the whole ~300 MB array. Unused rows are never read."""

    @functools.wraps(method)
    def wrapper(self: llama_cpp.Llama, *args: Any) -> Any:
        if self._logits_all:
            return method(self, *args)
        scores = self.scores
        self.scores = scores[:1]
        try:
            return method(self, *args)
        finally:
            self.scores = scores

    return wrapper


class _DryRun(Exception):
    """Raised by the cache's lookup on a dry keep request: the prompt is looked up, never read."""


class KeptStates(LlamaRAMCache):
    """The RAM prompt cache, plus states kept on disk (one `.npz` per kept prompt, at most
    `limit_bytes` in all, the least recently used removed first).

    A lookup takes whichever shares the longer prefix with the new prompt: a state in RAM or a
    kept one (then read from disk). Files are written whole under a temporary name and renamed, so
    a process killed while keeping leaves no half-written state; a file that cannot be read (say,
    from another llama.cpp version) is removed and the prompt is read as if nothing were kept.
    """

    def __init__(self, capacity_bytes: int, folder: Path, limit_bytes: int) -> None:
        super().__init__(capacity_bytes)
        self.folder = folder
        self.limit_bytes = limit_bytes
        self.keep_next = False  # set by the keep endpoint around its one request (under the model's lock)
        self.dry_next = False  # likewise for a dry request: the lookup answers, then stops the request
        self.last_kept: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.kept: dict[tuple[int, ...], Path] = {}
        folder.mkdir(parents=True, exist_ok=True)
        for path in folder.glob("*.npz"):
            try:
                with np.load(path) as data:
                    self.kept[tuple(int(t) for t in data["input_ids"][: int(data["n_tokens"])])] = path
            except Exception:  # a damaged file: forget it
                path.unlink(missing_ok=True)

    def _best_kept(self, key: tuple[int, ...]) -> tuple[tuple[int, ...] | None, int]:
        best, length = None, 0
        for k in self.kept:
            n = llama_cpp.Llama.longest_token_prefix(k, key)
            if n > length:
                best, length = k, n
        return best, length

    def __getitem__(self, key: Any) -> llama_cpp.LlamaState:
        key = tuple(key)
        ram_key = self._find_longest_prefix_key(key)
        ram_length = llama_cpp.Llama.longest_token_prefix(ram_key, key) if ram_key is not None else 0
        kept_key, kept_length = self._best_kept(key)
        if self.dry_next:
            # The prompt ends with the chat template's opening of the reply, which a kept state
            # (read with one generated token) also holds: at hand when all of it is there.
            self.last_kept = {"tokens": len(key), "kept": max(kept_length, ram_length) >= len(key)}
            raise _DryRun
        if kept_key is not None and kept_length > ram_length:
            state = self._read(kept_key)
            if state is not None:
                return state
        if ram_key is None:
            raise KeyError("Key not found")
        self.cache_state.move_to_end(ram_key)  # as LlamaRAMCache.__getitem__ does, without searching again
        return self.cache_state[ram_key]

    def __setitem__(self, key: Any, value: llama_cpp.LlamaState) -> None:
        super().__setitem__(key, value)
        if self.keep_next:
            self._keep(tuple(key), value)

    def _read(self, key: tuple[int, ...]) -> llama_cpp.LlamaState | None:
        path = self.kept[key]
        try:
            with np.load(path) as data:
                state = llama_cpp.LlamaState(
                    input_ids=data["input_ids"].astype(np.intc),
                    scores=data["scores"],
                    n_tokens=int(data["n_tokens"]),
                    llama_state=data["llama_state"].tobytes(),
                    llama_state_size=int(data["llama_state_size"]),
                    seed=int(data["seed"]),
                )
            os.utime(path)  # recently used: removed last
            return state
        except Exception as exc:
            print(f"KeptStates: cannot read {path} ({exc}); removed", file=sys.stderr)
            self.kept.pop(key, None)
            path.unlink(missing_ok=True)
            return None

    def _keep(self, key: tuple[int, ...], state: llama_cpp.LlamaState) -> None:
        kept_key, length = self._best_kept(key)
        # The same prompt kept before (its one generated token may differ): nothing new to write.
        if kept_key is not None and length >= len(key) - 1 and length >= len(kept_key) - 1:
            os.utime(self.kept[kept_key])
            self.last_kept = {"tokens": len(key), "new": False}
            return
        name = hashlib.sha1(np.asarray(key, dtype=np.int32).tobytes()).hexdigest()[:20]
        path = self.folder / f"{name}.npz"
        part = self.folder / f".{name}.{os.getpid()}.part.npz"
        np.savez(
            part,
            input_ids=np.asarray(state.input_ids, dtype=np.int32),  # the whole window, as `load_state` expects
            scores=state.scores,
            n_tokens=state.n_tokens,
            llama_state=np.frombuffer(state.llama_state, dtype=np.uint8),
            llama_state_size=state.llama_state_size,
            seed=state.seed,
        )
        os.replace(part, path)
        self.kept[key] = path
        self.last_kept = {"tokens": len(key), "new": True}
        self._trim()

    def _trim(self) -> None:
        files = sorted(self.kept.items(), key=lambda kv: kv[1].stat().st_mtime if kv[1].exists() else 0.0)
        total = sum(p.stat().st_size for _, p in files if p.exists())
        while files and total > self.limit_bytes:
            key, path = files.pop(0)
            total -= path.stat().st_size if path.exists() else 0
            path.unlink(missing_ok=True)
            self.kept.pop(key, None)


_keep_config: dict[str, Any] = {}


def _kept_cache(capacity_bytes: int) -> LlamaRAMCache:
    """What the server builds for `--cache_type ram`: with `--keep_dir`, a cache that also keeps states on disk."""
    if "folder" not in _keep_config:
        return LlamaRAMCache(capacity_bytes)
    return KeptStates(capacity_bytes, _keep_config["folder"], _keep_config["limit_bytes"])


def _add_routes(app: Any) -> Any:
    """`POST /v1/assistant/choice` with a chat request's `messages` and `choices` (words): the
    log-probability of each as the reply's first token, `{"logprobs": {choice: float}, "seconds"}`.

    `POST /v1/assistant/keep` with a chat request's `messages`: read them (one generated token)
    and keep the state on disk. Answers `{"tokens", "new", "seconds"}`; 409 without `--keep_dir`.
    With `"dry": true`, reads nothing and answers `{"tokens", "kept", "seconds"}`: whether a request
    starting with these messages would find their state at hand (kept on disk or in RAM)."""
    from fastapi import Body, Depends, HTTPException
    from llama_cpp.server.app import get_llama_proxy
    from starlette.concurrency import run_in_threadpool

    def keep(llama: llama_cpp.Llama, messages: list[dict[str, Any]], dry: bool) -> dict[str, Any]:
        cache = llama.cache
        if not isinstance(cache, KeptStates):
            raise HTTPException(status_code=409, detail="This server keeps no states (started without --keep_dir).")
        started = time.perf_counter()
        cache.last_kept = {}
        if dry:
            cache.dry_next = True
        else:
            cache.keep_next = True
        try:
            llama.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0)
        except _DryRun:
            pass
        finally:
            cache.keep_next = cache.dry_next = False
        return {**cache.last_kept, "seconds": round(time.perf_counter() - started, 3)}

    def choice(llama: llama_cpp.Llama, messages: list[dict[str, Any]], choices: list[str]) -> dict[str, Any]:
        started = time.perf_counter()
        # A choice counts in any case ("yes", "Yes", "YES"): the first token of each spelling.
        tokens = {c: sorted({llama.tokenize(v.encode(), add_bos=False, special=False)[0]
                             for v in (c, c.capitalize(), c.upper())}) for c in choices}
        seen: dict[str, float] = {}

        def look(input_ids: Any, logits: Any) -> Any:
            values = np.asarray(logits, dtype=np.float64)
            total = np.logaddexp.reduce(values)
            seen.update({c: float(np.logaddexp.reduce(values[t]) - total) for c, t in tokens.items()})
            return logits

        llama.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0,
                                     logits_processor=llama_cpp.LogitsProcessorList([look]))
        return {"logprobs": seen, "seconds": round(time.perf_counter() - started, 3)}

    @app.post("/v1/assistant/choice")
    async def choice_route(body: dict[str, Any] = Body(...), llama_proxy: Any = Depends(get_llama_proxy)) -> dict[str, Any]:
        messages, choices = body.get("messages"), body.get("choices")
        if not isinstance(messages, list) or not messages:
            raise HTTPException(status_code=422, detail="'messages' must be a non-empty list of chat messages.")
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c.strip() for c in choices):
            raise HTTPException(status_code=422, detail="'choices' must be a non-empty list of words.")
        return await run_in_threadpool(choice, llama_proxy(body.get("model")), messages, [c.strip() for c in choices])

    @app.post("/v1/assistant/keep")
    async def keep_route(body: dict[str, Any] = Body(...), llama_proxy: Any = Depends(get_llama_proxy)) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HTTPException(status_code=422, detail="'messages' must be a non-empty list of chat messages.")
        return await run_in_threadpool(keep, llama_proxy(body.get("model")), messages, bool(body.get("dry")))

    return app


def _take_keep_options(argv: list[str]) -> list[str]:
    """Remove `--keep_dir DIR`, `--keep_mb N` and `--no_extra_bufts` from `argv` (llama_cpp.server does
    not know them) into `_keep_config`; the rest of `argv`."""
    options, rest, i = {}, [], 0
    while i < len(argv):
        if argv[i] == "--no_extra_bufts":
            _keep_config["no_extra_bufts"] = True
            i += 1
        elif argv[i] in ("--keep_dir", "--keep_mb") and i + 1 < len(argv):
            options[argv[i]] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    limit_mb = int(options.get("--keep_mb") or 0)
    if options.get("--keep_dir") and limit_mb > 0:
        _keep_config.update(folder=Path(options["--keep_dir"]), limit_bytes=limit_mb << 20)
    return rest


def _without_extra_buffers(default_params: Callable[[], Any]) -> Callable[[], Any]:
    """`llama_model_default_params` with `use_extra_bufts` off (read by `Llama.__init__` at call time)."""

    @functools.wraps(default_params)
    def params() -> Any:
        value = default_params()
        value.use_extra_bufts = False
        return value

    return params


def patch() -> None:
    import llama_cpp.server.__main__ as server_main

    llama_cpp.Llama.save_state = _one_row_of_logits(_save_state)  # type: ignore[method-assign]
    llama_cpp.Llama.load_state = _one_row_of_logits(_load_state)  # type: ignore[method-assign]
    # The server builds its cache as `llama_cpp.LlamaRAMCache(capacity_bytes=...)` and its app
    # with `create_app` (looked up at call time): both are swapped for the versions above.
    llama_cpp.LlamaRAMCache = _kept_cache  # type: ignore[assignment,misc]
    if _keep_config.get("no_extra_bufts"):
        low_level = llama_cpp.llama_cpp
        low_level.llama_model_default_params = _without_extra_buffers(low_level.llama_model_default_params)  # type: ignore[method-assign]
    create_app = server_main.create_app
    server_main.create_app = lambda *a, **k: _add_routes(create_app(*a, **k))  # type: ignore[assignment]


if __name__ == "__main__":
    sys.argv[1:] = _take_keep_options(sys.argv[1:])
    patch()
    from llama_cpp.server.__main__ import main

    sys.exit(main())
