"""The voxcli program as a whole: version, help, usage errors, exit codes."""
from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from voxcli import __version__
from voxcli.cli.app import app
from voxcli.errors import ExitCode

runner = CliRunner()


def _run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "voxcli", *args], capture_output=True, text=True, timeout=120, **kw)


def test_version():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.strip() == f"voxcli {__version__}"


def test_help_lists_every_subcommand_with_one_line():
    r = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    for cmd in ("pull", "models", "rm"):
        assert f" {cmd} " in r.stdout
    assert "Examples" in r.stdout


def test_every_subcommand_help_has_examples():
    import typer.main

    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        text = (cmd.help or "") + "".join((c.help or "") for c in getattr(cmd, "commands", {}).values())
        assert "voxcli " in text, f"`voxcli {name} --help` has no example"


def test_unknown_command_is_one_line_usage_error_without_traceback():
    r = _run("no-such-command")
    assert r.returncode == ExitCode.USAGE
    assert r.stderr.splitlines()[0] == "voxcli: error: No such command 'no-such-command'."
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_unknown_option_names_the_subcommand_help():
    r = _run("pull", "--zzz-bogus")
    assert r.returncode == ExitCode.USAGE
    assert r.stderr.splitlines() == ["voxcli: error: No such option: --zzz-bogus", "hint: see `voxcli pull --help`"]


def test_vox_errors_map_to_their_exit_code_and_debug_adds_traceback():
    r = _run("models", "--path", "not-installed")
    assert r.returncode == ExitCode.MODEL_NOT_FOUND
    assert r.stderr.splitlines()[0] == "voxcli: error: model 'not-installed' is not installed"
    assert "Traceback" not in r.stderr
    r = _run("--debug", "models", "--path", "not-installed")
    assert r.returncode == ExitCode.MODEL_NOT_FOUND and "Traceback" in r.stderr


def test_exit_codes_are_documented_values():
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 130, 143]


def test_offline_first_use_of_a_missing_model_exits_3_with_a_hint(tmp_path):
    import numpy as np
    import soundfile as sf

    wav = tmp_path / "speech.wav"
    sf.write(wav, np.zeros(16000, dtype=np.float32), 16000)
    r = _run("--offline", "transcribe", str(wav))
    assert r.returncode == ExitCode.MODEL_NOT_FOUND, r.stderr
    assert r.stderr.splitlines()[-2:] == [
        "voxcli: error: model 'moonshine-tiny-en' is not installed and voxcli is offline",
        "hint: run `voxcli pull moonshine-tiny-en` while online (or unset VOXCLI_OFFLINE / drop --offline)",
    ]


def test_speak_and_transcribe_take_their_models_from_the_config_file(tmp_path):
    """flag > environment > config > default: a config naming a bad model is obeyed, a flag overrides it."""
    import os

    import tomli_w

    cfg = tmp_path / "config.toml"
    cfg.write_text(tomli_w.dumps({"tts": {"voice": "no-such-voice"}, "asr": {"model": "no-such-asr"}}))
    env = {**os.environ, "VOXCLI_CONFIG": str(cfg)}
    r = _run("speak", "Hello.", "-o", str(tmp_path / "x.wav"), env=env)
    assert r.returncode == ExitCode.MODEL_NOT_FOUND and "unknown tts model 'no-such-voice'" in r.stderr
    import numpy as np
    import soundfile as sf

    sf.write(tmp_path / "silence.wav", np.zeros(1600, dtype=np.float32), 16000)
    r = _run("transcribe", str(tmp_path / "silence.wav"), env=env)
    assert r.returncode == ExitCode.MODEL_NOT_FOUND and "unknown asr model 'no-such-asr'" in r.stderr
    r = _run("speak", "Hello.", "-o", str(tmp_path / "x.wav"), env={**env, "VOXCLI_TTS_VOICE": "env-voice"})
    assert "unknown tts model 'env-voice'" in r.stderr


def test_written_audio_files_follow_the_umask(tmp_path):
    import os
    import stat

    from voxcli.audio.files import AtomicAudioWriter

    old = os.umask(0o022)
    try:
        with AtomicAudioWriter(tmp_path / "out.wav", 16000) as w:
            w.write(__import__("numpy").zeros(160, dtype="float32"))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.wav").stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]


def test_verbose_says_where_models_come_from(tmp_path):
    import numpy as np
    import soundfile as sf

    wav = tmp_path / "silence.wav"
    sf.write(wav, np.zeros(1600, dtype=np.float32), 16000)
    from tests.conftest import REAL_CACHE

    import os

    env = {**os.environ, "VOXCLI_CACHE_DIR": str(REAL_CACHE)}
    quiet = _run("transcribe", str(wav), env=env)
    loud = _run("--verbose", "transcribe", str(wav), env=env)
    assert quiet.returncode == loud.returncode == 0, loud.stderr
    assert "voxcli: asr model moonshine-tiny-en from the" not in quiet.stderr
    assert "voxcli: asr model moonshine-tiny-en from the" in loud.stderr
    assert loud.stdout == quiet.stdout  # logs never reach stdout
