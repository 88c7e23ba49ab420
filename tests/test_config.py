"""Settings: every setting is documented under its group, and the groups make up the settings."""

from __future__ import annotations

import os
import re

import pytest
from pydantic import ValidationError

from assistant.config import PROJECT_ROOT, SETTING_GROUPS, Settings


def test_every_setting_is_listed_in_the_readme() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(ASSISTANT_[A-Z0-9_]+)`", readme))
    missing = [name for name in Settings.model_fields if f"ASSISTANT_{name.upper()}" not in listed]
    assert missing == []


def readme_section(heading: str) -> str:
    """The README's text under `### heading`, up to the next heading."""
    readme = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"^### {re.escape(heading)}\n(.*?)(?=^#)", readme, flags=re.S | re.M)
    assert found, f"no '### {heading}' section in the README"
    return found.group(1)


@pytest.mark.parametrize("heading", list(SETTING_GROUPS))
def test_every_setting_is_documented_under_its_groups_heading(heading: str) -> None:
    section = readme_section(heading)
    missing = [name for name in SETTING_GROUPS[heading].model_fields
               if f"| `{name}` | `ASSISTANT_{name.upper()}` |" not in section]
    assert missing == []


def test_every_setting_belongs_to_exactly_one_group() -> None:
    grouped = [name for group in SETTING_GROUPS.values() for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [name for name in os.environ if name.startswith("ASSISTANT_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_a_grouped_setting_keeps_its_environment_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ASSISTANT_LLM_MODEL", "gpt-4o-mini")
    clean_env.setenv("ASSISTANT_TOPIC_JUDGE", "false")
    settings = Settings()
    assert (settings.llm_model, settings.topic_judge) == ("gpt-4o-mini", False)


def test_a_groups_bounds_hold_on_the_settings(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="chunk_size"):
        Settings(chunk_size=8)


def test_an_unknown_setting_is_refused(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        Settings(chunk_sise=64)
