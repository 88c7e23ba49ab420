"""The command line, run as a real subprocess: index, papers, retrieve, help and errors."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support import run_cli


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli-index")


@pytest.fixture(scope="module")
def index_run(index_dir: Path) -> subprocess.CompletedProcess[str]:
    """`assistant index` of the bundled corpus into the module's temp folder, run once."""
    return run_cli("index", index_dir=index_dir)


def test_index_prints_a_summary_with_papers_chunks_and_seconds(index_run: subprocess.CompletedProcess[str]) -> None:
    assert index_run.returncode == 0, index_run.stderr
    summary = re.search(
        r"Indexed 57 papers, (\d+) chunks \(57 papers / (\d+) chunks embedded, 0 stale chunks removed\) in \d+\.\d s\.",
        index_run.stdout,
    )
    assert summary, index_run.stdout
    assert int(summary.group(1)) == int(summary.group(2)) > 57


def test_papers_lists_one_line_per_indexed_paper(index_run: subprocess.CompletedProcess[str], index_dir: Path) -> None:
    result = run_cli("papers", index_dir=index_dir)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 57
    assert re.search(r"\bVegas\b.*001_65baa146f2004b22\.txt #6$", lines[5])
    assert "57 papers" in result.stderr


def test_retrieve_prints_the_named_paper_first(index_run: subprocess.CompletedProcess[str], index_dir: Path) -> None:
    result = run_cli("retrieve", "How does Vegas speed up speculative decoding in vLLM?", index_dir=index_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("1. Vegas  (001_65baa146f2004b22.txt #6)  score ")


@pytest.mark.parametrize("command", [[], ["index"], ["papers"], ["retrieve"]], ids=["assistant", "index", "papers", "retrieve"])
def test_help_exits_zero_and_prints_usage(tmp_path: Path, command: list[str]) -> None:
    result = run_cli(*command, "--help", index_dir=tmp_path / "store")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: assistant")
    assert not (tmp_path / "store").exists(), "asking for help must not create an index"


def test_an_error_exits_non_zero_with_one_error_line_and_no_traceback(tmp_path: Path) -> None:
    result = run_cli("index", "/nonexistent.txt", index_dir=tmp_path / "store")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: /nonexistent.txt")


def test_an_unknown_source_is_reported_as_one_error_line(index_run: subprocess.CompletedProcess[str], index_dir: Path) -> None:
    result = run_cli("retrieve", "speculative decoding", "--source", "nope.txt", index_dir=index_dir)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: Unknown source file 'nope.txt'")
