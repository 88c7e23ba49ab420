"""Settings and prompts: every setting is documented, every prompt file is checked for its variables."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from assistant.config import PROJECT_ROOT, PROMPTS_DIR, Settings
from assistant.errors import AssistantError
from assistant.prompts import EXPECTED, load_prompts


def test_every_setting_is_listed_in_the_readme() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(ASSISTANT_[A-Z0-9_]+)`", readme))
    missing = [name for name in Settings.model_fields if f"ASSISTANT_{name.upper()}" not in listed]
    assert missing == []


def test_the_bundled_prompts_load_with_exactly_their_variables() -> None:
    prompts = load_prompts()
    assert set(prompts.__dataclass_fields__) == {name.removesuffix(".txt") for name in EXPECTED}


@pytest.mark.parametrize("change, problem", [
    (lambda text: text.replace("{question}", "{query}"), "must use exactly"),
    (lambda text: text + "\n{unexpected}", "must use exactly"),
])
def test_a_prompt_file_with_other_variables_is_refused_with_its_path(tmp_path: Path, change, problem: str) -> None:
    folder = Path(shutil.copytree(PROMPTS_DIR, tmp_path / "prompts"))
    path = folder / "answer.txt"
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(AssistantError, match=problem) as caught:
        load_prompts(folder)
    assert str(path) in str(caught.value)


def test_a_missing_prompt_file_is_named_with_what_to_do(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(PROMPTS_DIR, tmp_path / "prompts"))
    (folder / "label.txt").unlink()
    with pytest.raises(AssistantError, match="label.txt is missing; restore it"):
        load_prompts(folder)
