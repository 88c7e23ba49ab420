"""What every command shares: the parser class, a flag for every setting, settings from the
parsed flags, the progress bar, and opening the assistant.

`settings_from_args` is the one place flags become a `Settings`: the common `--index-dir`,
`--chroma-host` and `--chroma-port`, then one flag per setting (`--chunk-size`, `--llm-model`, …),
added by pydantic-settings' CLI source to each command that has no flag of its own by that name.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_settings import CliSettingsSource, SettingsError

from ..config import SETTING_GROUPS, Settings
from ..errors import AssistantError

# The flags every command has had; they stay as they are (help, type), ahead of the settings' own.
COMMON_SETTINGS = ("index_dir", "chroma_host", "chroma_port")
# Secrets get no flag: a flag's value stays in the shell's history and shows in the process list.
ENV_ONLY = ("llm_api_key", "password")


class Parser(argparse.ArgumentParser):
    """An argument parser on which a shortened flag never stands for a setting's flag: a command's
    own flags keep their abbreviations (`--col` for `--column`) beside `--collection` and the rest."""

    setting_actions: frozenset[argparse.Action] = frozenset()

    def _get_option_tuples(self, option_string: str) -> list[tuple[Any, ...]]:
        typed = option_string.split("=", 1)[0]
        # (action, flag, ...): a setting's flag that merely starts with what was typed is dropped;
        # one that what was typed starts with (`-k3`) is kept.
        return [option for option in super()._get_option_tuples(option_string)
                if option[0] not in self.setting_actions or not option[1].startswith(typed)]


@dataclass(frozen=True)
class SettingFlags:
    """The settings flags of one command: the CLI source that reads them and their names."""

    source: CliSettingsSource[Any]
    names: frozenset[str]


def add_setting_flags(parser: Parser) -> None:
    """Give `parser` a flag for every setting it has no flag of its own for, in one help section per
    settings group. Its usage line stays the one of its own flags (the settings are listed below it)."""
    usage = parser.format_usage().removeprefix("usage: ").rstrip("\n")
    group_of = {name: heading for heading, group in SETTING_GROUPS.items() for name in group.model_fields}
    sections = {heading: parser.add_argument_group(f"{heading} settings") for heading in SETTING_GROUPS}
    added: list[argparse.Action] = []

    def add_argument(_: Any, *names: str, **options: Any) -> argparse.Action | None:
        if options["dest"] in ENV_ONLY:
            return None
        try:
            action = sections[group_of[options["dest"]]].add_argument(*names, **options)
        except argparse.ArgumentError:  # the command has a flag of its own by this name (-k, --host, --index-dir)
            return None
        added.append(action)
        return action

    source = CliSettingsSource(Settings, root_parser=parser, add_argument_method=add_argument, cli_kebab_case=True,
                               cli_show_env_vars=True)
    parser.usage = usage
    parser.setting_actions = frozenset(added)
    parser.set_defaults(setting_flags=SettingFlags(source, frozenset(action.dest for action in added)))


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings of one command: `ASSISTANT_*` variables, overridden by the flags given."""
    overrides: dict[str, Any] = {}
    for name in COMMON_SETTINGS:
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    flags: SettingFlags | None = getattr(args, "setting_flags", None)
    given = {name: value for name, value in vars(args).items() if name in flags.names} if flags else {}
    if flags is None or not given:
        return Settings(**overrides)
    try:
        source = flags.source(parsed_args=given)
    except SettingsError as exc:  # a value that cannot be read (a list's brackets unclosed)
        raise AssistantError(str(exc)) from None
    try:
        return Settings(_cli_settings_source=source, **overrides)
    except ValidationError as exc:
        wrong = [error for error in exc.errors() if error["loc"] and error["loc"][0] in given]
        if not wrong:
            raise
        raise AssistantError("; ".join(f"--{str(error['loc'][0]).replace('_', '-')}: {error['msg']}"
                                       for error in wrong)) from None


def progress_bar() -> Callable[[int, int], None]:
    from tqdm import tqdm

    bar: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in bar:
            bar["bar"] = tqdm(total=total, unit="chunk", desc="Embedding", file=sys.stderr, disable=total == 0)
        bar["bar"].n = done
        bar["bar"].refresh()
        if done >= total:
            bar["bar"].close()

    return update


def open_assistant(settings: Settings) -> Any:
    from ..api import Assistant

    return Assistant.from_settings(settings, notify=lambda m: print(m, file=sys.stderr), progress=progress_bar())


def split_commas(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def add_paper_choice(group: Any, default: str = "") -> None:
    """The --papers / --source options of the commands that work on chosen papers."""
    group.add_argument("--papers", help=f"comma-separated paper ids or titles (see `assistant papers`){default}")
    group.add_argument("--source", help="every paper of this corpus file")
