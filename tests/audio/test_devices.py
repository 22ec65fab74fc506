"""Real audio devices: play into a PulseAudio null sink and record its monitor.

There is no sound card here (nor in CI), but PulseAudio's null sink is a real
device path: sounddevice -> PortAudio -> ALSA `pulse` plugin -> PulseAudio.
Whatever is played into the sink comes back on `vox.monitor`, the default
source, so a test can hear what voxcli played.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner


class Recorder:
    """Records the default source (the sink's monitor) on a thread."""

    def __init__(self) -> None:
        from voxcli.audio.devices import MicCapture

        self.mic = MicCapture(16000)
        self.blocks: list[np.ndarray] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for block in self.mic:
            self.blocks.append(block)

    def stop(self) -> np.ndarray:
        time.sleep(0.3)  # the monitor lags the sink a little
        self.mic.close()
        self._thread.join(2)
        return np.concatenate(self.blocks) if self.blocks else np.zeros(0, np.float32)


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a, dtype=np.float64)))) if a.size else 0.0


@pytest.mark.device
def test_tone_played_by_player_comes_back_on_the_monitor(portaudio: None, null_sink: str) -> None:
    from voxcli.audio.devices import list_devices
    from voxcli.audio.player import Player

    assert any(d.max_output_channels > 0 for d in list_devices())
    rec = Recorder()
    tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(22050) / 22050)).astype(np.float32)
    with Player(22050) as player:
        player.write(tone)
        assert player.drain(timeout=20)
        assert player.played_samples >= tone.size
    audio = rec.stop()
    assert rec.mic.rate == 16000
    assert _rms(audio) > 0.05, "the tone did not reach the monitor"
    # The recorded tone is at 440 Hz (not noise): its spectrum peaks there.
    loud = np.flatnonzero(np.abs(audio) > 0.1)
    middle = (loud[0] + loud[-1]) // 2
    segment = audio[middle - 2000:middle + 2000] * np.hanning(4000)
    spectrum = np.abs(np.fft.rfft(segment, n=16000))  # 1 Hz bins
    assert abs(int(np.argmax(spectrum)) - 440) < 10


@pytest.mark.device
def test_abort_silences_at_once(portaudio: None, null_sink: str) -> None:
    from voxcli.audio.player import Player

    noise = (0.3 * np.random.default_rng(0).standard_normal(22050 * 4)).astype(np.float32)
    player = Player(22050, max_buffer_s=1.0)
    # pause/resume (issue 12: dead code then) are wired now: chat pauses the reply on a barge-in's speech run
    # (voxcli.chat.listening; tests/chat/test_barge_in_pause.py, tests/chat/test_heard_device.py)
    # A write larger than the buffer blocks; abort must release it and stop at once.
    blocked = threading.Thread(target=player.write, args=(noise,))
    blocked.start()
    time.sleep(0.2)
    t = time.monotonic()
    player.abort()
    blocked.join(2)
    assert not blocked.is_alive()
    assert time.monotonic() - t < 1.0
    assert player.buffered_s == 0.0


@pytest.mark.device
def test_voxcli_speak_plays_speech_into_the_null_sink(portaudio: None, null_sink: str, real_cache: Path) -> None:
    rec = Recorder()
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "voxcli", "speak", "Hello there. This is voxcli, speaking while it thinks."],
        capture_output=True, text=True, timeout=120, env=env,
    )
    audio = rec.stop()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # speaker output: nothing on stdout
    assert "TTFA" in proc.stderr
    assert _rms(audio) > 0.01, "no speech reached the monitor"
    voiced = np.mean(np.abs(audio) > 0.02)
    assert voiced * audio.size / 16000 > 1.0, "less than a second of speech recorded"


def test_unknown_device_is_exit_5_with_a_hint(portaudio: None, real_cache: Path) -> None:
    from voxcli.cli.app import app

    result = CliRunner().invoke(app, ["speak", "Hello.", "--device", "no-such-device-xyz"], catch_exceptions=False)
    assert result.exit_code == 5, result.output
    assert "no output device matches 'no-such-device-xyz'" in result.stderr
    assert "-o out.wav or --raw" in result.stderr


def test_devices_command_lists_json_lines() -> None:
    import json

    from voxcli.cli.app import app

    result = CliRunner().invoke(app, ["devices", "--json"], catch_exceptions=False)
    assert result.exit_code in (0, 5)
    if result.exit_code == 0:
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert all({"index", "name", "max_output_channels"} <= set(r) for r in rows)
