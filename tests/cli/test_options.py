"""Shared options mean the same everywhere (cli/options.py) and --help shows them truthfully.

One test per bug from the issue: `speak --stream` was rejected, `-v` meant
--verbose globally but --voice in speak and bench ttfa, `--offline` only
worked before the subcommand, every flag showed `<bool>` in --help, and
`chat --help` lost `[chat]` to rich markup. Plus the structure that keeps
them fixed: every command is an importable module-level function, and no
short flag has two meanings anywhere.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
import typer.main
from typer.testing import CliRunner

from voxcli.cli.app import app
from voxcli.cli.options import SHORT_FLAGS
from voxcli.errors import ExitCode

runner = CliRunner()


def _commands() -> Iterator[tuple[str, Any]]:
    """(path, click command) for every leaf command, e.g. ("bench ttfa", cmd)."""
    def walk(prefix: str, cmd: Any) -> Iterator[tuple[str, Any]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(f"{prefix} {name}".strip(), sub)
        else:
            yield prefix, cmd

    yield from walk("", typer.main.get_command(app))


COMMANDS = sorted(path for path, _ in _commands())


def _help(*path: str) -> str:
    r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "240"})
    assert r.exit_code == 0, r.output
    return r.stdout


def test_no_short_flag_means_two_things():
    seen: dict[str, str] = {}
    for path, cmd in _commands():
        for p in cmd.params:
            shorts = [o for o in [*p.opts, *p.secondary_opts] if re.fullmatch(r"-[A-Za-z]", o)]
            longs = [o for o in p.opts if o.startswith("--")]
            for s in shorts:
                meaning = longs[0] if longs else p.name
                assert SHORT_FLAGS.get(s) == meaning, f"`voxcli {path}`: {s} means {meaning}, reserved for {SHORT_FLAGS.get(s)}"
                seen[s] = meaning
    assert seen.get("-v") == "--verbose"


@pytest.mark.parametrize("path", COMMANDS)
def test_help_shows_no_type_after_a_flag(path: str):
    text = _help(*path.split())
    assert "<bool>" not in text


def test_global_help_shows_no_type_after_a_flag():
    assert "<bool>" not in _help()


@pytest.mark.parametrize("path", COMMANDS)
def test_option_help_is_shown_literally(path: str):
    """Brackets in option help ("config [chat] llm_url") are text, not rich markup."""
    cmd = dict(_commands())[path]
    text = " ".join(_help(*path.split()).split())
    text = re.sub(r"[│╭╮╰╯─]", " ", text)
    text = " ".join(text.split())
    for p in cmd.params:
        for tag in re.findall(r"\[[a-z_]+\]", (getattr(p, "help", None) or "").replace("\\[", "[")):
            assert tag in text, f"`voxcli {path} --help` lost {tag!r} from the help of {p.name}"


def test_chat_help_names_the_config_section():
    assert "[chat]" in _help("chat")


def test_literal_help_keeps_a_hand_escaped_bracket():
    from rich.text import Text

    from voxcli.cli.views.help import literal_help

    for raw, shown in (("config [chat] llm_url", "config [chat] llm_url"),
                       ("config \\[ledger] preset", "config [ledger] preset"),
                       ("a [bold]b[/bold]", "a [bold]b[/bold]")):
        assert Text.from_markup(literal_help(raw)).plain == shown


def test_every_command_is_a_module_level_function():
    """Commands can be imported by name (no closures inside register())."""
    for path, cmd in _commands():
        fn = getattr(cmd.callback, "__wrapped__", cmd.callback)
        assert "<locals>" not in fn.__qualname__, f"`voxcli {path}` is a closure: {fn.__qualname__}"
    from voxcli.cli.speak import speak
    from voxcli.cli.transcribe import transcribe

    assert callable(speak) and callable(transcribe)


@pytest.mark.usefixtures("real_cache")
def test_speak_stream_flag_from_the_project_card(tmp_path):
    out = tmp_path / "x.wav"
    r = runner.invoke(app, ["speak", "Hello there.", "--stream", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 1000
    r = runner.invoke(app, ["speak", "Hello there.", "--no-stream", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output


def test_v_after_the_subcommand_is_verbose_not_voice(tmp_path):
    r = runner.invoke(app, ["speak", "Hi.", "-v", "--voice", "no-such-voice", "-o", str(tmp_path / "o.wav")])
    assert r.exit_code == ExitCode.MODEL_NOT_FOUND
    assert "voxcli: tts.voice = 'no-such-voice' (flag)" in r.stderr  # the --verbose log line
    assert "-v" not in [o for p in dict(_commands())["bench ttfa"].params for o in p.opts if p.name == "voice"]


@pytest.mark.parametrize("path", ["pull", "speak", "transcribe", "chat", "bench ttfa", "bench asr", "doctor"])
def test_offline_and_verbose_work_after_the_subcommand(path: str):
    text = _help(*path.split())
    assert "--offline" in text and "--verbose" in text


def test_offline_after_the_subcommand_sets_offline(monkeypatch):
    monkeypatch.delenv("VOXCLI_OFFLINE", raising=False)
    r = runner.invoke(app, ["pull", "moonshine-tiny-en", "--offline"])
    assert "No such option" not in r.stderr
    assert r.exit_code != 0 and "offline" in r.stderr


@pytest.mark.parametrize("args,want,not_want", [
    (["transcribe", "--live", "--device", "no-such-mic-xyz"], "voxcli transcribe FILE", "--raw"),
    (["speak", "Hi.", "--device", "no-such-speaker-xyz"], "-o out.wav", None),
])
def test_device_errors_hint_what_fits_the_command(args, want, not_want):
    """Without PortAudio or with a wrong --device: a hint for this command, not speak's `-o out.wav or --raw`."""
    r = runner.invoke(app, args)
    assert r.exit_code == ExitCode.DEVICE_UNAVAILABLE, r.output
    hint = [ln for ln in r.stderr.splitlines() if ln.startswith("hint: ")]
    assert hint and want in hint[0]
    if not_want:
        assert not_want not in hint[0]


def test_device_hint_covers_chat():
    from voxcli.cli.errors import device_hint
    from voxcli.errors import DeviceUnavailableError

    with pytest.raises(DeviceUnavailableError) as e:
        with device_hint("chat"):
            raise DeviceUnavailableError("audio unavailable", hint="use -o out.wav or --raw")
    assert "--input" in e.value.hint and "--raw" not in e.value.hint
