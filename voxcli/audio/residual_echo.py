"""What AEC3 leaves of the echo, taken down where nobody but the reply is heard.

Why: AEC3's linear filter spans ~52 ms past the delay it finds and models no
distortion; its suppressor leaves a reverberant room's tail and a saturated
speaker's harmonics 17-22 dB under the raw echo (the issue's room fixture: a
300 ms RT60 whose tail carries most of the echo, a soft-clipped speaker; the
reply at 0.63 peak bounds any linear model there to 26 dB, and its loud
syllables to much less). What is left is quiet, but it is the reply's words,
and a full-duplex chat wants the echo's words gone from what the ASR hears.

The gate asks the double-talk detector, which looks at the raw microphone
against the echo's bound (`DoubleTalkDetector`: the loudest far-end spectrum the
echo can come from, carried on by the room's reverberation and reaching back to
the echo's measured delay). A frame in which less than `USER_SHARE` of the
microphone's power stands above that bound holds nothing but the reply, and
whatever AEC3 left of it goes down by `FLOOR_DB`. On a session recorded through
the issue's room fixture (8 replies, the tail 15 dB over the direct sound,
`benchmarks/aec_session.py`) nearly all the output energy AEC3 left came from
~100 frames 0-15 dB under the bound (its convergence in the first reply, then
50-70 ms bursts), whole syllables: this took the ERLE from 19.7 to 31.6 dB.
A rule that also took down frames under a residual predicted from the bound and
a learnt coupling moved that ERLE by 0.1 dB (AEC3's own suppressor does as much)
and was dropped.
A frame the detector hears the user in (`DoubleTalkDetector.speech`) opens the
gate for `HOLD_FRAMES`, an onset for `ONSET_HOLD_FRAMES`: the user's words go on
under the lingering bound after chat pauses the reply. Nothing is touched
until an echo has been measured (`EchoDelay`; headphones, a muted speaker: never,
and the bound, at the reply's level, would take a user quieter than the reply
for it), nor with no reply playing (its bound decays 2 dB per 10 ms after it).
No latency: one gain per 10 ms frame, ramped from the last so it does not click.
"""
from __future__ import annotations

from typing import Final

import numpy as np

FLOOR_DB: Final = -12.0
"""The residual's attenuation: with AEC3's 17-22 dB through a reverberant room, past the 25 dB target
(an attenuation more than that would also take a quiet user's start the detector missed)."""
USER_SHARE: Final = 0.05
"""A frame whose raw microphone has less than this share of its power above the echo bound holds nothing
but the reply: gated whatever AEC3 left (AEC3 leaks whole syllables while it converges and after the
echo's path jumps, 0-15 dB under the echo, the bulk of what it leaves on the room fixture)."""
HOLD_FRAMES: Final = 10
"""Frames after the detector last heard the user in which the output still passes whole (100 ms)."""
LOUD: Final = 1e-6
"""An echo bound under this (-60 dBFS) is no reply playing: nothing to gate."""
ONSET_HOLD_FRAMES: Final = 100
"""Frames after a double-talk onset in which the output passes whole (1 s): chat pauses the reply on it, and
the echo's bound lingers on the reply's last spectra for the echo's delay and the room's tail, while the
user's words go on, some of them under that bound (gated, "It was the best of times" came back "It was
best at times" through the room fixture)."""


class ResidualGate:
    """`apply(y, echo_power, near)` per 10 ms frame -> `y`, attenuated where it is the echo's residual."""

    def __init__(self) -> None:
        self.gain = 1.0
        self._hold = 0
        self._floor = 10.0 ** (FLOOR_DB / 20.0)
        self.gated = 0
        """Frames taken down to `FLOOR_DB` so far (for the canceller's report)."""

    def apply(self, y: np.ndarray, echo_power: float, near: bool, share: float = 1.0, onset: bool = False,
              *, echo_heard: bool = True) -> np.ndarray:
        """`y`: AEC3's output frame; `echo_power`: the echo bound's (mean square, at the reply's level: what the
        microphone would hear of a loud speaker); `near`: the detector hears the user in this frame; `share`:
        the part of the raw microphone's power the detector finds above the echo bound (under `USER_SHARE`:
        the reply alone, whatever AEC3 left); `onset`: the detector tells the user's onset on this frame (the
        gate stays open `ONSET_HOLD_FRAMES`); `echo_heard`: an echo was measured (its delay): with headphones
        or a muted speaker none is, and the share rule would take a user quieter than the reply's own level
        for the reply (the bound is at the reply's level, not the echo's)."""
        power = float(np.dot(y, y)) / max(y.size, 1)
        if onset:
            self._hold = max(self._hold, ONSET_HOLD_FRAMES + 1)
        if near:
            self._hold = max(self._hold, HOLD_FRAMES + 1)
        held = self._hold > 0
        self._hold = max(0, self._hold - 1)
        gain = 1.0
        if not held and echo_heard and echo_power > LOUD and share < USER_SHARE:
            gain = self._floor
        if gain == self._floor and power > 0.0:
            self.gated += 1
        ramp = np.linspace(self.gain, gain, y.size, endpoint=False, dtype=np.float32) if gain != self.gain else gain
        self.gain = gain
        return (y * ramp).astype(np.float32)
