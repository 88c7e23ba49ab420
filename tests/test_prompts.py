"""Prompts are files checked for their variables when they load: a template that drops a variable the
code fills in, or uses one the code never fills, is an error naming the file and the variable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assistant.config import PROMPTS_DIR
from assistant.errors import AssistantError
from assistant.prompts import EXPECTED, load_prompts


@pytest.fixture
def prompts_folder(tmp_path: Path) -> Path:
    """A temp folder holding a copy of the shipped prompt files, for a test to break one of them."""
    return Path(shutil.copytree(PROMPTS_DIR, tmp_path / "prompts"))


def load_error(folder: Path) -> str:
    with pytest.raises(AssistantError) as caught:
        load_prompts(folder)
    return str(caught.value)


def test_the_shipped_prompts_load_each_with_exactly_its_variables() -> None:
    loaded = load_prompts()
    for name, expected in EXPECTED.items():
        assert set(getattr(loaded, name.removesuffix(".txt")).template_vars) == expected, name


def test_a_prompt_missing_a_variable_is_an_error_naming_the_file_and_the_variable(prompts_folder: Path) -> None:
    path = prompts_folder / "answer.txt"
    text = path.read_text(encoding="utf-8")
    assert "{question}" in text
    path.write_text(text.replace("{question}", "the question above"), encoding="utf-8")
    message = load_error(prompts_folder)
    assert str(path) in message and "'question'" in message


def test_a_prompt_using_a_variable_the_code_never_fills_is_an_error_naming_the_file_and_the_variable(
    prompts_folder: Path,
) -> None:
    path = prompts_folder / "table_cell.txt"
    path.write_text(path.read_text(encoding="utf-8") + "\nAnswer in {language}.", encoding="utf-8")
    message = load_error(prompts_folder)
    assert str(path) in message and "'language'" in message


def test_a_missing_prompt_file_is_named_with_what_to_do(prompts_folder: Path) -> None:
    (prompts_folder / "label.txt").unlink()
    assert "label.txt is missing; restore it" in load_error(prompts_folder)
