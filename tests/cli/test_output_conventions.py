"""Output conventions for every command, through the real console script in a subprocess.

- Not a terminal (pipes), with or without NO_COLOR: no control codes at all.
- Every command that reports something has `--json`.
- Data-only stdout: help, errors, tables and progress meant for people are on stderr
  (help is on stdout by click convention; errors never are).
"""
from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ESC = "\x1b["

#: Leaf commands that report results and therefore must offer --json.
REPORTING = {"speak", "transcribe", "devices", "pull", "models", "chat", "doctor", "ledger", "ledger schedule",
             "bench ttfa", "bench history", "config show"}


def _leaf_paths() -> list[str]:
    import typer._click as click
    import typer.main

    from voxcli.cli.app import app

    out: list[str] = []

    def walk(group, ctx, prefix: str) -> None:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            path = f"{prefix} {name}".strip()
            out.append(path)
            if hasattr(cmd, "list_commands"):
                walk(cmd, click.Context(cmd, info_name=name, parent=ctx), path)

    root = typer.main.get_command(app)
    walk(root, click.Context(root, info_name="voxcli"), "")
    return out


def _options(path: str) -> set[str]:
    import typer._click as click
    import typer.main

    from voxcli.cli.app import app

    cmd = typer.main.get_command(app)
    ctx = click.Context(cmd, info_name="voxcli")
    for name in path.split():
        cmd = cmd.get_command(ctx, name)
        ctx = click.Context(cmd, info_name=name, parent=ctx)
    return {o for p in cmd.params for o in getattr(p, "opts", [])}


def test_every_reporting_command_has_json():
    missing = [p for p in sorted(REPORTING) if "--json" not in _options(p)]
    assert missing == []
    assert REPORTING <= set(_leaf_paths())


def _run(args: list[str], env: dict[str, str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voxcli", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def _cheap_invocations(tmp: Path, speech: Path) -> list[list[str]]:
    calls = [["--help"], ["--version"]] + [[*p.split(), "--help"] for p in _leaf_paths()]
    calls += [
        ["models"], ["models", "--json"], ["devices"], ["devices", "--json"],
        ["config", "show"], ["config", "path"], ["config", "set", "tts.voise", "x"],
        ["doctor", "--only", "config", "--only", "disk", "--only", "onnxruntime"],
        ["ledger"], ["ledger", "--sensitivity"], ["ledger", "schedule", "--words", "3,8", "--rtf", "0.5"],
        ["bench", "history"],
        ["speak", ""], ["speak", "--nope"], ["speak", "Hi.", "-o", str(tmp / "hi.wav")],
        ["transcribe", str(tmp / "missing.wav")], ["transcribe", str(speech)],
        ["pull", "silero-vad"], ["rm", "no-such-model"], ["models", "--path", "no-such-model"],
    ]
    return calls


@pytest.mark.parametrize("no_color", [True, False], ids=["NO_COLOR", "pipe-only"])
def test_no_control_codes_when_not_a_terminal(real_cache, speech_samples, tmp_path, no_color):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE")}
    env.update(TERM="xterm-256color", COLUMNS="100", PYTHONPATH=str(ROOT))
    if no_color:
        env["NO_COLOR"] = "1"
    calls = _cheap_invocations(tmp_path, speech_samples["beckett"])
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda a: (a, _run(a, env, tmp_path)), calls))
    bad = []
    for args, p in results:
        assert "Traceback" not in p.stderr, (args, p.stderr)
        for stream, text in (("stdout", p.stdout), ("stderr", p.stderr)):
            if ESC in text:
                bad.append(f"voxcli {' '.join(args)} ({stream}): {text[text.index(ESC) - 20:][:60]!r}")
        if p.returncode not in (0, 1):  # usage/model/device errors: one line on stderr, nothing on stdout
            assert p.stdout == "" and p.stderr.startswith("voxcli: error: "), (args, p.returncode, p.stdout, p.stderr)
    assert bad == []
    codes = {" ".join(a): p.returncode for a, p in results}
    assert codes["speak "] == 2 and codes["speak --nope"] == 2 and codes["rm no-such-model"] == 3
    assert codes[f"speak Hi. -o {tmp_path / 'hi.wav'}"] == 0 and (tmp_path / "hi.wav").stat().st_size > 1000
    transcript = next(p.stdout for a, p in results if a == ["transcribe", str(speech_samples["beckett"])])
    assert "try again" in transcript.lower()
