"""Faults, as a user meets them: processes killed mid-index, a damaged store, the model server
dying mid-answer, repeated abstracts. Every case runs the real `assistant` command (or the real
local model server) over the tests' corpus and checks what the user sees and that nothing already
indexed is lost.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support import CORPUS, HANG_GUARD, VEGAS, cli_env, corpus_papers, make_settings, run_cli
from fakes import ScriptedLLM

from assistant import Assistant
from assistant.chunk import chunk_papers
from assistant.config import PROJECT_ROOT, Settings
from assistant.load import load_papers
from assistant.text import split_sentences

VEGAS_QUESTION = f"Against default vLLM, what throughput speedup is reported for {VEGAS}?"
WHERE_VEGAS_IS = f"{corpus_papers()[VEGAS].source} #{corpus_papers()[VEGAS].ordinal}"
VEGAS_LINE = f"1. {VEGAS}  ({WHERE_VEGAS_IS})"  # as `retrieve` lists it first
VEGAS_SOURCE = f"[1] {VEGAS} ({WHERE_VEGAS_IS})"  # as `ask` cites it
PAPERS = len(corpus_papers())
NEW_PAPERS = 40
# Methods of the added paper list: words no abstract of the corpus uses, so a keyword search for one
# finds its paper if (and only if) that paper is indexed.
NEW_NAMES = [f"{a}{b}" for a in ("Bren", "Quill", "Zor", "Vask", "Tril") for b in ("volt", "mark", "vex", "dune", "pith", "grove", "lume", "fen")]
BATCH = "2"  # chunks per embedding batch in the killed runs: a progress report every 2 chunks


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of the tests' corpus built by `assistant index`; tests work on copies of it."""
    folder = tmp_path_factory.mktemp("fault-base") / "store"
    built = run_cli("index", *map(str, CORPUS), index_dir=folder)
    assert built.returncode == 0, built.stderr
    return folder


@pytest.fixture
def store(base_store: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base_store, tmp_path / "store"))


@pytest.fixture
def new_papers(tmp_path: Path) -> Path:
    """A .jsonl paper list of NEW_PAPERS abstracts, each naming its own method (NEW_NAMES)."""
    sentences = [s for p in load_papers(CORPUS) for s in split_sentences(p.abstract)[1:] if len(s) > 60]
    rng = random.Random(11)
    path = tmp_path / "new.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for name in NEW_NAMES[:NEW_PAPERS]:
            abstract = f"We propose {name}, a method for {rng.choice(['retrieval', 'planning', 'compression'])}. "
            out.write(json.dumps({"abstract": abstract + " ".join(rng.sample(sentences, 4))}) + "\n")
    return path


def kill_mid_embedding(*args: str, index_dir: Path) -> tuple[int, int]:
    """Run `assistant <args>` and SIGKILL it as soon as it reports a first batch of chunks embedded
    and written; (chunks written, chunks to embed) at that moment."""
    process = subprocess.Popen(
        [sys.executable, "-m", "assistant.cli", *args], cwd=PROJECT_ROOT,
        env=cli_env(index_dir, ASSISTANT_EMBED_BATCH_SIZE=BATCH), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    guard = threading.Timer(HANG_GUARD, process.kill)
    guard.start()
    seen = b""
    try:
        while chunk := os.read(process.stderr.fileno(), 4096):
            seen += chunk
            progress = re.search(rb"\| *([1-9]\d*)/(\d+) \[", seen)  # tqdm: "| 2/170 [00:01<..."
            if progress:
                os.kill(process.pid, signal.SIGKILL)
                break
        process.wait()
    finally:
        guard.cancel()
    stdout = process.stdout.read().decode()
    process.stdout.close()
    process.stderr.close()
    assert progress, f"no embedding progress before the process ended:\n{seen.decode(errors='replace')}"
    assert process.returncode == -signal.SIGKILL and "Indexed" not in stdout, "the run finished before the kill"
    done, total = int(progress.group(1)), int(progress.group(2))
    assert done < total
    return done, total


def assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "index holds passages" not in result.stderr  # nothing of another corpus is mixed in


def test_kill_9_during_an_incremental_index_serves_the_previous_papers_and_the_next_index_finishes_it(
    store: Path, new_papers: Path, scripted_llm: ScriptedLLM
) -> None:
    corpus = [*map(str, CORPUS), str(new_papers)]
    written, total = kill_mid_embedding("index", *corpus, index_dir=store)

    # A question naming every added method, over the most papers a query returns: any chunk the
    # killed run wrote where readers see it would be among the hits.
    question = f"Which paper proposes {', '.join(NEW_NAMES[:NEW_PAPERS])}, a method for retrieval, planning or compression?"
    found = run_cli("retrieve", question, "-k", "50", "--json", index_dir=store)
    assert_clean(found)
    hits = json.loads(found.stdout)
    assert len(hits) == PAPERS and all(hit["paper"]["source"] != new_papers.name for hit in hits)  # the previous corpus, whole
    scripted_llm.queue(f"{VEGAS} achieves a 1.25×–2.81× speedup over default vLLM [1].")
    asked = run_cli("ask", VEGAS_QUESTION, index_dir=store, **scripted_llm.env())
    assert_clean(asked)
    assert VEGAS_SOURCE in asked.stdout

    resumed = run_cli("index", *corpus, index_dir=store, ASSISTANT_EMBED_BATCH_SIZE=BATCH)
    assert_clean(resumed)
    assert "note: Resumed an interrupted index update" in resumed.stderr
    summary = re.search(r"Indexed (\d+) papers, \d+ chunks \(\d+ papers / (\d+) chunks embedded", resumed.stdout)
    assert summary, resumed.stdout
    assert int(summary.group(1)) == PAPERS + NEW_PAPERS
    assert int(summary.group(2)) == total - written  # what the killed run wrote was kept

    with Assistant.from_settings(make_settings(store), notify=pytest.fail) as assistant:
        added = assistant.retrieve(f"What does {NEW_NAMES[3]} do?", k=1)[0].paper
        assert (added.source, added.ordinal) == (new_papers.name, 4)
        assert assistant.retrieve(VEGAS_QUESTION, k=1)[0].paper.title == VEGAS  # and the old ones are all there
        assert assistant.store.info().chunks == len(assistant.store.nodes())


def test_kill_9_during_a_rebuild_serves_the_previous_index_and_the_next_index_discards_the_unfinished_one(
    store: Path, scripted_llm: ScriptedLLM
) -> None:
    kill_mid_embedding("index", "--rebuild", index_dir=store)

    scripted_llm.queue(f"{VEGAS} achieves a 1.25×–2.81× speedup over default vLLM [1].")
    asked = run_cli("ask", VEGAS_QUESTION, index_dir=store, **scripted_llm.env())
    assert_clean(asked)
    assert VEGAS_SOURCE in asked.stdout

    again = run_cli("index", index_dir=store)
    assert_clean(again)
    assert "note: Discarded the unfinished index update of an interrupted run" in again.stderr
    chunks = len(chunk_papers(load_papers(CORPUS), Settings()))
    assert f"Indexed {PAPERS} papers, {chunks} chunks (0 papers / 0 chunks embedded, 0 stale chunks removed)" in again.stdout


def test_a_truncated_store_is_reported_with_its_folder_and_rebuild_moves_it_aside_and_builds_a_fresh_one(
    store: Path,
) -> None:
    database = store / "chroma.sqlite3"
    os.truncate(database, 100_000)

    failed = run_cli("retrieve", VEGAS_QUESTION, index_dir=store)
    assert failed.returncode == 2 and failed.stdout == ""
    assert failed.stderr.startswith(f"error: The index store in {store} is damaged and cannot be opened")
    assert "Run `assistant index --rebuild` to move it aside" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr

    rebuilt = run_cli("index", "--rebuild", index_dir=store)
    assert_clean(rebuilt)
    moved = re.search(r"it was moved to (\S+) ", rebuilt.stderr)
    assert moved, rebuilt.stderr
    kept = Path(moved.group(1))
    assert kept.parent == store.parent and (kept / "chroma.sqlite3").stat().st_size == 100_000  # kept, as it was
    assert f"Indexed {PAPERS} papers" in rebuilt.stdout

    retrieved = run_cli("retrieve", VEGAS_QUESTION, index_dir=store)
    assert_clean(retrieved)
    assert retrieved.stdout.startswith(VEGAS_LINE)


def test_repeated_abstracts_are_indexed_once_with_a_warning_and_retrieved_once(tmp_path: Path) -> None:
    title, *lines = CORPUS[0].read_text(encoding="utf-8").splitlines()
    vegas = corpus_papers()[VEGAS].abstract
    others = [line for line in lines if line.strip() and line != vegas][:5]
    corpus = tmp_path / "dups.txt"
    corpus.write_text("\n".join([title, *others, vegas, vegas.replace("$\\times$", "×"), vegas, vegas]) + "\n", encoding="utf-8")

    indexed = run_cli("index", str(corpus), index_dir=tmp_path / "store")
    assert_clean(indexed)
    warnings = [line for line in indexed.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: dups.txt #{n} repeats the abstract of dups.txt #6; indexed once, as dups.txt #6." for n in (7, 8, 9)
    ]
    assert "Indexed 6 papers" in indexed.stdout

    hits = run_cli("retrieve", "self-speculative decoding with sparse attention", "--json", index_dir=tmp_path / "store")
    assert_clean(hits)
    titles = [hit["paper"]["title"] for hit in json.loads(hits.stdout)]
    assert titles[0] == VEGAS and titles.count(VEGAS) == 1
    assert len(titles) == 5


@pytest.mark.llm
def test_the_llm_server_killed_mid_answer_gives_a_one_line_note_naming_its_log_and_the_next_question_works(
    small_index: Path,
) -> None:
    with Assistant.from_settings(make_settings(small_index)) as assistant:
        server = assistant.llm.server
        killed = server.pid
        events = assistant.stream(VEGAS_QUESTION)
        for event in events:
            if isinstance(event, str):  # the model is writing the answer
                os.kill(killed, signal.SIGKILL)
                break
        final = [event for event in events if not isinstance(event, str)][-1]

        assert (final.status, final.retrieval_only) == ("llm_failed", True)
        assert final.passages[0].paper.title == VEGAS  # the papers are still shown
        expected = (
            "The local LLM server was killed (SIGKILL, out of memory?) while answering; "
            f"the next question starts it again (its log: {server.log_path})."
        )
        assert expected in final.notices, final.notices
        assert all("\n" not in notice and "INFO" not in notice for notice in final.notices)
        assert server.log_path.stat().st_size > 0  # the server's own output went there

        again = assistant.ask(VEGAS_QUESTION)
        assert again.status != "llm_failed", again.notices
        assert server.pid != killed and server.running
