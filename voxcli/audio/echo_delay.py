"""How late the echo comes after its placed reference, measured on the raw microphone while the reply plays.

Why: the capture stage places each microphone frame's reference by PortAudio's
stamps, and the double-talk detector's echo bound (`voxcli.audio.doubletalk`)
covers only `MAX_LAG_S` after that placement. Where the stamps do not see the
whole path, the echo comes later than the bound: a Bluetooth or HDMI speaker
buffers 50-200 ms the sound server does not report, and on the issue's echo
fixture (one null sink's monitor relayed through a room into another,
benchmarks/room_relay.py) the relay's two streams and its queue add 100-170 ms.
There every loud syllable of the reply looked like the user: 40-90 double-talk
onsets and one false pause per reply. AEC3 finds such a delay itself (0-400 ms) but the
binding does not say what it found, so it is measured here.

The measure: every `EVERY` frames, the generalised cross-correlation with the
phase transform (GCC-PHAT) of the last `NEAR_S` of microphone against the
reference up to `MAX_DELAY_S` before it, over the voice band's bins where the
reference has power. Whitening keeps the direct path's peak sharp through a
reverberant room and a clipping speaker; its height (1 for an exact delayed
copy; 0.13-0.25 through the fixture's room, whose tail carries most of the
echo) says how far the reference explains the microphone. One peak proves
little (a microphone hearing other speech than the reply peaks at 0.08-0.27):
a peak of `MIN_PEAK` or more `AGREE` times in a row at lags within `TOL_S`
sets `lag` (a user talking over a whole reply never did: tests/audio/
test_echo_delay.py), so the user talking, silence or a quiet reply move
nothing, and a delay that drifts is followed. The earliest peak within
`EARLIEST` of the highest is taken, not the highest: a reflection 3-13 ms
later often wins, and a bound placed by it would be late. A far end that
repeats itself exactly (a steady tone) has peaks at every period and can lock
early; speech does not.

The bound covers `reach`, not only `lag`: the latest delay the echo was
locked on within `REACH_HOLD_S`, or measured later than the lock with one
confident peak. Through the room fixture under load the echo's delay steps
while a reply plays (the relay's queue: 133 -> 192 ms, and 67 -> 160 ms in a
run that then interrupted itself), and at a reply's start three measurements can agree on a
delay that is not the echo's (~5 ms, the placement settling: the lock moved
150 -> 3.5 ms for 0.3 s). Each time the echo came later than the bound and its
syllables were onsets (2-4 per reply in 2 of 6 sessions recorded under load
with benchmarks/aec_session.py; none replayed with `reach`). A reach that
grows with the first confident measurement after a step (0.6 s after a 90 ms
step in the tests, the lock 0.2 s later) and shrinks only `REACH_HOLD_S` after
one costs that long a wider bound; a bound always as wide (to `MAX_DELAY_S`)
made a user 6 dB under the room's echo wait 440 ms for the onset instead of 175
(p50 over 20 starts, offline), and `reach` left those onsets as they were. One
peak could be another speaker's, widening the bound for `REACH_HOLD_S`, yet the
user's onsets came as early (p50/p90 30/125 ms at 0 dB, 175/907 ms at -6 dB,
as with the lock alone), while waiting for two agreeing peaks left 3 onsets
after the tests' 90 ms step instead of 1-2.

Where the echo is heard but its delay slides too fast to lock (the relay
starving: 47 -> 157 ms within 1.5 s), `heard` says so: the double-talk
detector keeps its wide bound then rather than narrowing it as for headphones.
"""
from __future__ import annotations

import collections
from typing import Final

import numpy as np

MAX_DELAY_S: Final = 0.4
"""Longest echo delay after the placement looked for (AEC3's own estimator covers 0-400 ms)."""
NEAR_S: Final = 0.5
"""Microphone audio correlated per measurement (several syllables: one syllable's peak can be a neighbour's)."""
EVERY: Final = 10
"""Frames (10 ms) between measurements."""
MIN_PEAK: Final = 0.12
"""Whitened correlation peak a measurement needs (the room fixture's echo: median 0.15; other speech than the
reply reaches it too, so agreement between measurements (`AGREE`, `HEARD`), not height, is what rules that
out)."""
AGREE: Final = 3
"""Measurements in a row, at lags within `TOL_S` of each other, that set the delay."""
TOL_S: Final = 0.003
"""Lags this close are one delay (a drift correction of the stamps moves it ~2 ms)."""
FAR_POWER: Final = 1e-3
"""A bin takes part only where the reference's power is above this share of its strongest bin."""
BAND_HZ: Final = (120.0, 6000.0)
HEARD: Final = 6
"""Confident measurements within `HEARD_S` that say an echo is there while no delay is locked. The user over a
reply with headphones gave a confident peak in 6-8 of 180 measurements (one in ~2.5 s; five within 3 s came once,
for 2 s of one of four recordings, six never); the room fixture's echo sliding as its relay starved, one in two
(a recorded session of 3 replies: 8 onsets, with `heard` none)."""
HEARD_S: Final = 3.0
REACH_HOLD_S: Final = 1.0
"""How long a lock or a later delay measured stays in `reach` after it was last in force."""
EARLIEST: Final = 0.6
"""A peak this close to the highest counts as the direct path when it comes earlier (recorded room frames:
the lag then held within 117-140 ms over a minute, against 117-167 ms taking the highest)."""


class EchoDelay:
    """`update(near, far)` per 10 ms frame (raw microphone, placed reference); `lag`: the echo's delay after
    the placement in samples, or None until one has been measured."""

    def __init__(self, rate: int = 16000) -> None:
        self.rate = rate
        self.frame = rate // 100
        self._near_n = int(NEAR_S * rate)
        self._max = int(MAX_DELAY_S * rate)
        self._far_n = self._near_n + self._max
        # the last frames, joined only when measured (every `EVERY` frames), not copied on every frame
        self._frames_kept: collections.deque[tuple[np.ndarray, np.ndarray]] = collections.deque(
            maxlen=-(-self._far_n // self.frame))
        self._size = 1 << int(np.ceil(np.log2(self._far_n + self._near_n)))
        hz = np.fft.rfftfreq(self._size, 1.0 / rate)
        self._band = (hz >= BAND_HZ[0]) & (hz <= BAND_HZ[1])
        self._frames = 0
        self._tol = int(TOL_S * rate)
        self._run: list[int] = []  # lags of the confident measurements in a row
        self.lag: int | None = None
        self.peak = 0.0
        """The last measurement's whitened correlation peak (for tests and tuning)."""
        self.measured: int | None = None
        """The last measurement's lag (confident or not)."""
        self._held: collections.deque[tuple[int, int]] = collections.deque()  # (frame, delay) for `reach`
        self._confident: collections.deque[int] = collections.deque(maxlen=HEARD)  # frames, for `heard`

    def update(self, near: np.ndarray, far: np.ndarray) -> int | None:
        """One frame of the raw microphone and its placed reference; returns `lag`."""
        n = self.frame
        self._frames_kept.append((np.asarray(near, np.float64)[:n], np.asarray(far, np.float64)[:n]))
        self._frames += 1
        if self._frames % EVERY == 0 and self._frames * n >= self._far_n:
            if self.lag is not None:  # the lock in force until now stays in `reach` for the hold
                self._held.append((self._frames, self.lag))
            self._measure()
        while self._held and self._frames - self._held[0][0] >= REACH_HOLD_S * 100:
            self._held.popleft()
        return self.lag

    def _measure(self) -> None:
        far = np.concatenate([f for _, f in self._frames_kept])[-self._far_n :]
        near = np.zeros(self._far_n)
        near[-self._near_n :] = np.concatenate([m for m, _ in self._frames_kept])[-self._near_n :]
        spec_n = np.fft.rfft(near, self._size)
        spec_f = np.fft.rfft(far, self._size)
        power = np.abs(spec_f) ** 2
        use = self._band & (power > FAR_POWER * float(power[self._band].max(initial=0.0)))
        cross = spec_n * np.conj(spec_f)
        mag = np.abs(cross)
        use &= mag > 0
        if use.sum() < 64:
            self._run.clear()
            self.peak, self.measured = 0.0, None
            return
        white = np.zeros_like(cross)
        white[use] = cross[use] / mag[use]
        corr = np.fft.irfft(white, self._size)[: self._max + 1] * (self._size / (2.0 * use.sum()))
        top = float(corr.max())
        k = int(np.argmax(corr >= EARLIEST * top))  # the direct path: the first peak near the highest,
        while k < self._max and corr[k + 1] > corr[k]:  # at its top (not the lobe's rising side)
            k += 1
        self.peak, self.measured = top, k
        if self.peak < MIN_PEAK:
            self._run.clear()
            return
        self._confident.append(self._frames)
        if self._run and abs(k - self._run[-1]) > self._tol:
            self._run.clear()
        self._run.append(k)
        if len(self._run) >= AGREE:
            self.lag = k
        if self.lag is not None and k > self.lag + self._tol:  # a later echo counts at once (module docstring)
            self._held.append((self._frames, k))

    @property
    def heard(self) -> bool:
        """An echo of the reply is there, locked on or not: `HEARD` confident measurements within `HEARD_S`."""
        return len(self._confident) == HEARD and self._frames - self._confident[0] <= HEARD_S * 100

    @property
    def reach(self) -> int | None:
        """The latest delay the echo may come at (samples; None until a lag was locked): the largest of `lag`,
        the lags locked within `REACH_HOLD_S` and the confident measurements later than the lock within it.
        Grows at once, shrinks `REACH_HOLD_S` after a later delay was last in force."""
        if self.lag is None:
            return None
        return max([self.lag, *(d for _, d in self._held)])
