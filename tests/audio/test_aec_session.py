"""benchmarks/aec_session.py on sessions recorded without devices: `onsets` replays the double-talk detector.

A session here is what `record` keeps of a device run (every tap and capture block, stamped, in order),
made by `aec_room.replay` driving a canceller through the synthetic room: the reply alone, and the reply
with the barging-in user's clip (the one bench_barge_in.py plays) from a known sample. `onsets` must find
an onset soon after that user's start, no onset where nobody talks, and count every onset of a session given
as self-turns as false.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from voxcli.audio import aec
from voxcli.audio.aec import AECConfig, EchoCanceller
from voxcli.audio.aec_ref import ReferenceTimeline
from voxcli.audio.aec_room import Room, echo_of, replay, rms
from voxcli.audio.pcm import resample

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_BENCH))  # aec_session imports aec_diagnose from next to it
_spec = importlib.util.spec_from_file_location("aec_session", _BENCH / "aec_session.py")
session = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["aec_session"] = session
_spec.loader.exec_module(session)  # type: ignore[union-attr]

SR = 16000
USER_AT = 4 * SR + 321
"""Where the user's clip starts in the microphone (its first sample is speech: bench_barge_in.user_speech)."""

pytestmark = pytest.mark.skipif(aec.unavailable() is not None, reason=str(aec.unavailable()))


def recorded(tmp_path: Path, name: str, far: np.ndarray, rate: int, mic: np.ndarray) -> Path:
    events: list[tuple] = []
    with session.recording(events):
        c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
        replay(c, far, rate, mic)
    path = tmp_path / f"{name}.npz"
    session.save(path, events)
    return path


def test_onsets_finds_the_user_and_counts_onsets_where_nobody_talks(tmp_path, reply, speech_samples, capsys):
    import aec_diagnose

    far, rate = reply
    n = int(far.size / rate * SR)
    echo = resample(echo_of(far, rate, Room()), rate, SR)[:n]
    echo = (np.pad(echo, (0, n - echo.size)) + np.random.default_rng(1).normal(0, 1e-3, n)).astype(np.float32)
    user = aec_diagnose.user_clip(SR, speech_samples["two_cities"])
    talk = echo.copy()
    part = user[: n - USER_AT] * (rms(echo[echo != 0]) / rms(user))  # as loud as the echo, as the benchmark plays it
    talk[USER_AT : USER_AT + part.size] += part.astype(np.float32)
    trials, alone = recorded(tmp_path, "trials", far, rate, talk), recorded(tmp_path, "self", far, rate, echo)
    capsys.readouterr()
    session.onsets([str(trials)], [str(alone)], None)
    out = capsys.readouterr().out
    assert re.search(r"trials\.npz: 1 barge-ins \(0 detected late, > 150 ms\), 0 onsets with no user", out), out
    assert re.search(r"self\.npz: 0 barge-ins \(0 detected late, > 150 ms\), 0 onsets with no user", out), out
    ms = float(re.search(r"p50 (\d+) p90", out).group(1))  # type: ignore[union-attr]
    assert 0 <= ms <= 150, out  # the detector heard "It", the lead found where the clip starts
    replay_min = float(re.search(r"over ([\d.]+) min of reply", out).group(1))  # type: ignore[union-attr]
    assert 0.5 * far.size / rate / 60 < replay_min <= 2 * far.size / rate / 60, out  # reply frames of both
    session.onsets([], [str(trials)], None)  # the same audio given as a self-turn session: its onsets are false
    out = capsys.readouterr().out
    assert re.search(r"trials\.npz: 0 barge-ins \(0 detected late, > 150 ms\), [1-9]\d* onsets with no user", out), out
