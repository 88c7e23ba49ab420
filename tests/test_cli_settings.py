"""Settings as flags: every command takes a flag per setting, beside its own flags, which keep their
meaning; a flag wins over its variable, and a wrong value is one error line. No index, no model."""

from __future__ import annotations

import argparse
import os

import pytest

from assistant.cli import build_parser, main, settings_from_args
from assistant.cli.common import COMMON_SETTINGS, ENV_ONLY
from assistant.config import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [name for name in os.environ if name.startswith("ASSISTANT_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return dict(parser._subparsers._group_actions[0].choices)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("command", list(commands()))
def test_every_setting_is_a_flag_of_every_command_but_the_secrets(command: str) -> None:
    parser = commands()[command]
    dests = {action.dest for action in parser._actions}
    assert set(Settings.model_fields) - dests == set(ENV_ONLY)


def test_a_setting_flag_sets_the_setting() -> None:
    settings = settings_from_args(parse("papers", "--chunk-size", "64", "--topic-judge", "false"))
    assert (settings.chunk_size, settings.topic_judge) == (64, False)


def test_a_flag_wins_over_its_environment_variable(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ASSISTANT_LLM_MODEL", "from-env")
    clean_env.setenv("ASSISTANT_CONTEXT_PAPERS", "2")
    settings = settings_from_args(parse("ask", "a question", "--llm-model", "from-flag"))
    assert (settings.llm_model, settings.context_papers) == ("from-flag", 2)


def test_a_list_setting_takes_the_flag_once_per_value() -> None:
    settings = settings_from_args(parse("index", "--corpus", "a.txt", "--corpus", "b.jsonl"))
    assert [path.name for path in settings.corpus] == ["a.txt", "b.jsonl"]


def test_the_common_flags_are_still_the_commands_own() -> None:
    args = parse("papers", "--index-dir", "/tmp/store", "--chroma-port", "9000")
    settings = settings_from_args(args)
    assert (str(settings.index_dir), settings.chroma_port) == ("/tmp/store", 9000)
    assert [action.help for action in commands()["papers"]._actions if action.dest in COMMON_SETTINGS] == [
        "folder of the embedded Chroma store (default: ~/.local/share/icml-assistant/store)",
        "use a Chroma server at this host instead of the embedded store",
        "port of the Chroma server (default 8000)",
    ]


def test_retrieves_own_k_is_not_the_setting(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ASSISTANT_K", "7")
    args = parse("retrieve", "a question", "-k", "3")
    assert (args.k, settings_from_args(args).k) == (3, 7)


def test_serves_own_host_and_port_stay_its_flags() -> None:
    args = parse("serve", "--host", "0.0.0.0", "--port", "7999")
    settings = settings_from_args(args)
    assert (args.host, args.port, settings.host, settings.port) == ("0.0.0.0", 7999, "127.0.0.1", 7860)


@pytest.mark.parametrize("secret", ["--password", "--llm-api-key"])
def test_a_secret_has_no_flag(secret: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse("serve", secret, "s3cret")
    assert stopped.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_a_shortened_flag_stands_for_the_commands_own_flag() -> None:
    args = parse("table", "--col", "What speedup?", "--top", "KV cache")
    assert (args.column, args.topic) == (["What speedup?"], "KV cache")


def test_the_usage_line_holds_only_the_commands_own_flags() -> None:
    table = commands()["table"]
    assert "--chunk-size" not in table.format_usage() and "-c QUESTION" in table.format_usage()
    assert "Corpus and index settings:" in table.format_help() and "--chunk-size" in table.format_help()


def test_a_wrong_setting_value_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["papers", "--chunk-size", "8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --chunk-size: ") and len(err.strip().splitlines()) == 1
