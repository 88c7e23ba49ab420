"""The assistant works installed, away from its checkout: the wheel carries its prompts and papers.

The wheel is built from this checkout and installed without dependencies into a fresh virtual
environment, which borrows the already-installed dependencies through a `.pth` file (no network).
The commands then run from an empty folder, so nothing can be found through the checkout.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from support import HANG_GUARD, VEGAS, cli_env

CHECKOUT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin/` folder of a fresh environment with only the built wheel installed into it."""
    root = tmp_path_factory.mktemp("wheel")
    wheels, venv = root / "dist", root / "venv"

    def run(*command: str | Path) -> None:
        subprocess.run([str(c) for c in command], check=True, capture_output=True, text=True, timeout=HANG_GUARD)

    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, CHECKOUT)
    run(sys.executable, "-m", "venv", venv)
    [wheel] = wheels.glob("icml_reading_assistant-*.whl")
    run(venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index", wheel)
    site = subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # The dependencies as installed for the tests (a .pth in a site folder adds a path, nothing else).
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def run_installed(bin_dir: Path, *args: str, cwd: Path, index_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "assistant"), *args], cwd=cwd, env=cli_env(index_dir), capture_output=True, text=True,
        timeout=HANG_GUARD,
    )


def test_the_installed_package_is_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [str(installed / "python"), "-c", "import assistant; print(assistant.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(installed.parent) and not Path(where).is_relative_to(CHECKOUT)


def test_papers_lists_the_bundled_corpus_from_another_folder(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "papers", cwd=tmp_path, index_dir=tmp_path / "store")
    assert result.returncode == 0, result.stderr
    assert "57 papers" in result.stderr and VEGAS in result.stdout


def test_retrieve_answers_from_another_folder(installed: Path, tmp_path: Path) -> None:
    result = run_installed(installed, "retrieve", "speculative decoding", "-k", "2", cwd=tmp_path,
                           index_dir=tmp_path / "store")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"1. {VEGAS}")


def test_prompts_are_read_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    code = "from assistant.prompts import load_prompts; from assistant.config import PROMPTS_DIR; " \
           "load_prompts(); print(PROMPTS_DIR)"
    result = subprocess.run([str(installed / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(installed.parent)
