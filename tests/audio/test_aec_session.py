"""benchmarks/aec_session.py on sessions recorded without devices: `onsets` replays the double-talk detector.

A session here is what `record` keeps of a device run (every tap and capture block, stamped, in order),
made by `aec_room.replay` driving a canceller through the synthetic room: the reply alone, and the reply
with the barging-in user's clip (the one bench_barge_in.py plays) from a known sample. `onsets` must find
the user's start (the lead it reports is the live onset's, within 10 ms), no onset where nobody talks, every
onset of a session given as self-turns counted false, the reply's minutes of each session, and a `share` that
holds for its run only.
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


def recorded(tmp_path: Path, name: str, far: np.ndarray, rate: int, mic: np.ndarray) -> tuple[Path, list[int]]:
    """The session file, and the onsets the canceller told while it was recorded (in its input's samples)."""
    events: list[tuple] = []
    told: list[int] = []
    with session.recording(events):
        c = EchoCanceller(SR, AECConfig(), reference=ReferenceTimeline(SR, clock=lambda: 100.0))
        assert c.mask is not None
        c.on_near_speech = lambda: told.append(c.mask.count * c.mask.frame)
        replay(c, far, rate, mic)
    path = tmp_path / f"{name}.npz"
    session.save(path, events)
    return path, told


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
    (trials, live), (alone, none) = (recorded(tmp_path, "trials", far, rate, talk),
                                     recorded(tmp_path, "self", far, rate, echo))
    assert live and live[0] > USER_AT and none == []
    capsys.readouterr()
    found = session.onsets([str(trials)], [str(alone)], user=user)
    out = capsys.readouterr().out
    assert len(found.leads_ms) == 1 and found.false == 0, out
    assert found.leads_ms[0] == pytest.approx(1000 * (live[0] - USER_AT) / SR, abs=10), out  # the clip found
    assert found.leads_ms[0] <= 150, out  # the detector heard "It"
    reply_s = found.reply_s
    assert 0 < reply_s <= 2 * far.size / rate, out  # reply frames only, of two sessions as long as the reply
    assert re.search(r"trials\.npz: 1 barge-in\(s\) \(0 detected late, > 150 ms\), 0 onset\(s\) with no user", out)
    assert re.search(r"self\.npz: 0 barge-in\(s\) \(0 detected late, > 150 ms\), 0 onset\(s\) with no user", out)
    alone_s = session.onsets([], [str(alone)], user=user).reply_s
    assert 0.45 * reply_s <= alone_s <= 0.55 * reply_s  # both sessions' reply counted: the same reply in each
    as_self = session.onsets([], [str(trials)], user=user)  # the same audio given as self-turns: its onsets are false
    assert as_self.leads_ms == [] and as_self.false == len(live) >= 1


def test_a_share_given_for_a_run_is_its_own(tmp_path, reply, monkeypatch):
    """`--share` sets `doubletalk.SHARE` for the run only: the module's value is back after it."""
    from voxcli.audio import doubletalk

    far, rate = reply
    n = int(far.size / rate * SR)
    echo = resample(echo_of(far, rate, Room()), rate, SR)[:n]
    alone, _ = recorded(tmp_path, "self", far, rate, np.pad(echo, (0, n - echo.size)).astype(np.float32))
    was = doubletalk.SHARE
    seen: list[float] = []
    update = doubletalk.DoubleTalkDetector.update

    def spying(self, near, far_):  # type: ignore[no-untyped-def]
        seen.append(doubletalk.SHARE)
        return update(self, near, far_)

    monkeypatch.setattr(doubletalk.DoubleTalkDetector, "update", spying)
    session.onsets([], [str(alone)], share=0.5)
    assert seen and set(seen) == {0.5} and doubletalk.SHARE == was
