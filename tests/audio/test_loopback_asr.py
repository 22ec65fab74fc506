"""Speech through real audio devices both ways: `voxcli speak` plays into the
PulseAudio null sink while `voxcli transcribe --live` listens to its monitor
(the default source). What the microphone path hears is what the speaker path
played, so both device paths and the streaming ASR are exercised together.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from voxcli.bench.wer import word_errors

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."


@pytest.mark.device
def test_transcribe_live_on_the_monitor_hears_what_speak_played(portaudio: None, null_sink: str, real_cache: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    listener = subprocess.Popen(
        [sys.executable, "-m", "voxcli", "transcribe", "--live", "--duration", "16", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    err_lines: list[str] = []
    ready = threading.Event()

    def read_stderr() -> None:
        assert listener.stderr is not None
        for line in listener.stderr:
            err_lines.append(line)
            if line.startswith("listening on mic:"):
                ready.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert ready.wait(60), "".join(err_lines)  # models loaded, device open
        spoken = subprocess.run([sys.executable, "-m", "voxcli", "speak", SENTENCE, "--quiet"],
                                capture_output=True, text=True, timeout=120, env=env)
        assert spoken.returncode == 0, spoken.stderr
        out = listener.stdout.read() if listener.stdout else ""
        listener.wait(timeout=120)
        reader.join(5)
        err = "".join(err_lines)
    finally:
        if listener.poll() is None:
            listener.kill()
    assert listener.returncode == 0, err
    captions = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finals = [c["stable"] for c in captions if c.get("event") == "caption" and c.get("is_final")]
    heard = " ".join(finals)
    assert heard, f"nothing transcribed; stderr: {err[-500:]}"
    assert word_errors(SENTENCE, heard).rate <= 0.25, heard
    # the stable part never shrank within an utterance
    last: dict[int, str] = {}
    for c in captions:
        if c.get("event") == "caption":
            prev = last.get(c["utterance"], "")
            assert c["stable"].startswith(prev) or c["is_final"], (prev, c["stable"])
            last[c["utterance"]] = c["stable"]
