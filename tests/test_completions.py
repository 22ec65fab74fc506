"""Shell completion: committed scripts are current, and a real bash completes through them.

The bash test sources completions/voxcli.bash in a real bash, fills
COMP_WORDS like readline would, calls the completion function and reads
COMPREPLY, with `voxcli` on PATH pointing at this checkout.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_committed_completions_are_not_stale():
    p = subprocess.run([sys.executable, "scripts/gen_completions.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


@pytest.fixture
def voxcli_on_path(tmp_path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shim = bindir / "voxcli"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m voxcli "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}


def bash_complete(env: dict[str, str], line: str) -> list[str]:
    """COMPREPLY for the command line `line` (a trailing space completes a new word)."""
    words = line.split() + ([""] if line.endswith(" ") else [])
    script = (
        f"source {ROOT / 'completions' / 'voxcli.bash'}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_voxcli_completion voxcli\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    p = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    return [w for w in p.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_models_and_config_keys(voxcli_on_path, tmp_path):
    env = voxcli_on_path
    assert "pull" in bash_complete(env, "voxcli pu")
    assert {"doctor", "config", "speak", "transcribe"} <= set(bash_complete(env, "voxcli "))
    assert bash_complete(env, "voxcli speak --voice ") == ["piper-joe-medium"]  # tts models only
    pulls = bash_complete(env, "voxcli pull ")
    assert {"piper-joe-medium", "moonshine-tiny-en", "silero-vad"} <= set(pulls)
    assert bash_complete(env, "voxcli config set bench.max_p9") == ["bench.max_p95_ms"]
    # A model pulled from a URL is completed from the cache too (its manifest names its kind).
    cache = Path(env["VOXCLI_CACHE_DIR"]) / "models" / "my-voice"
    cache.mkdir(parents=True)
    (cache / "manifest.json").write_text('{"kind": "tts", "files": []}')
    assert bash_complete(env, "voxcli speak --voice m") == ["my-voice"]
    assert "my-voice" in bash_complete(env, "voxcli rm ")


def test_completion_callbacks_never_raise(monkeypatch, tmp_path):
    from voxcli.cli.complete import CALLBACKS

    # A broken user catalog must give no suggestions, not a traceback in the prompt.
    bad = tmp_path / "bad.toml"
    bad.write_text("[models.x\n")
    monkeypatch.setenv("VOXCLI_CATALOG", str(bad))
    for name, fn in CALLBACKS.items():
        out = fn("")
        assert isinstance(out, list), name
    assert CALLBACKS["complete_tts_model"]("") == []


@pytest.mark.parametrize("shell, flag", [("zsh", "-n"), ("fish", "--no-execute")])
def test_other_shells_parse_the_scripts(shell, flag):
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed")
    name = {"zsh": "_voxcli", "fish": "voxcli.fish"}[shell]
    p = subprocess.run([exe, flag, str(ROOT / "completions" / name)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_device_names_from_portaudio(voxcli_on_path):
    from voxcli.audio.devices import list_devices, rescan
    from voxcli.errors import DeviceUnavailableError

    try:
        rescan()  # see what the completion's fresh process sees (a sound server started by an earlier test)
        outputs = [d for d in list_devices() if d.max_output_channels > 0]
    except DeviceUnavailableError:
        outputs = []  # no PortAudio: completion must offer nothing, quietly
    expected = sorted({str(d.index) for d in outputs} | {d.name for d in outputs})
    assert sorted(bash_complete(voxcli_on_path, "voxcli speak --device ")) == expected
