"""Double-talk detection: the user talking over the reply, seen before the echo canceller's output shows it.

Why: AEC3 suppresses the near end during double talk. On the null sink (an
echo as loud as the user) its output stays 40-90 dB down for the first
0.1-0.3 s of the user's speech and drops out again wherever the reply is loud
(benchmarks/bench_barge_in.py, `voice_fed_ms`), so the barge-in VAD run on that
output completes 0.4-2 s after the user's first word; AEC3's pywebrtc-audio
binding exposes neither its linear filter's output nor its suppressor's
settings. This detector looks at the raw microphone instead and asks, per
frequency bin, whether the far end could have produced what it hears.

The test (a spectral Geigel detector): the echo in a microphone window can be
no louder, in any bin, than the loudest far-end spectrum played within the
echo's delay (`MAX_LAG_S`), carried on by the room's reverberation (a decay of
`DECAY_DB` per 10 ms) and raised by `MARGIN_DB` for the room's colouring.
Power in bins above that bound, and `NOISE_MARGIN_DB` above the microphone's own
noise floor (minimum statistics: steady room noise is no user), is the near end's. A frame is "near speech"
when at least `SHARE` of the microphone's power is such power and that power
is above `FLOOR_DB`, in `MIN_BINS` bins or more; `FRAMES` such frames in a row
are an onset. No adaptive filter: it needs no convergence, and a stamp error or
a delay change within `MAX_LAG_S` does not fool it (both put the echo elsewhere
in the same bound). An echo later than that (a Bluetooth speaker's unreported
buffer; the issue's room fixture, whose relay adds ~100-170 ms) is measured
while the reply plays (`voxcli.audio.echo_delay`) and the bound reaches back to
it (`_bound`): on that fixture, 40-90 false onsets per reply without it, none
over 20 replies with it on an idle machine (benchmarks/bench_barge_in.py --room
--self-turns 20). Under load the relay's delay steps and slides within a reply:
the bound then reaches the latest delay seen lately (`EchoDelay.reach`) and stays
wide while an echo is heard that no delay was locked on (`EchoDelay.heard`).

What it cannot see: a user quieter than the echo in every bin (the onset is
then found at the next syllable, or the VAD run pauses the reply as before).
Dropouts (runs of exact zeros: a sound-server underrun) splatter over every bin
and are skipped for `GLITCH_S`. On the loaded null sink (benchmarks/bench_barge_in.py)
the onset comes 0.1-0.35 s after the user's first word reaches the device, and
the reply is silent ~10 ms later.
"""
from __future__ import annotations

import collections
from typing import Final

import numpy as np

from voxcli.audio.echo_delay import MAX_DELAY_S, EchoDelay

WINDOW: Final = 512
"""Analysis window at 16 kHz (32 ms): resolves a voice's harmonics (31 Hz bins)."""
MAX_LAG_S: Final = 0.1
"""Echo delay the bound covers, after the reference's own placement (margin + path + stamp error)."""
KEEP_S: Final = 0.05
"""The bound reaches this much before the measured echo delay (the analysis window's spread, a delay that
moved since it was measured); a delay under `MAX_LAG_S - KEEP_S` leaves the bound where it was."""
DECAY_DB: Final = 2.0
"""Reverberation carried in the bound per 10 ms (2 dB: a 300 ms RT60)."""
MARGIN_DB: Final = 6.0
"""A bin is the near end's when it is this far above the echo bound."""
SHARE: Final = 0.1
"""Share of the microphone's power in such bins for a frame to count as near speech. At 0.2, through the
issue's room fixture, one onset in five came ~220 ms after the user's first sample, not ~60 ("It" under a
louder reply: in one such trial its frames' share went 0.39, 0.19, then the run broke). At 0.1: 192 recorded
barge-ins, p90 223 -> 82 ms, and 2 onsets with nobody talking over 19.5 min of reply either way
(benchmarks/aec_session.py onsets); live, interleaved (bench_barge_in.py --share 0.2,0.1, 88 barge-ins
each over three runs), the barging-in user's WER 0.082 -> 0.058 (README, "Earlier onsets"). A syllable
of the reply whose echo comes later than the bound yet reaches (a delay that just stepped) may now make
two onsets a few frames apart where 0.2 made one: one pause in chat either way."""
MIN_BINS: Final = 3
"""Bins above the bound a near-speech frame needs: one or two bins that carry most of a frame's power
above the bound are a room mode's peak under a harmonic of the reply, not a voice (its harmonics stand
above in many bins). On 5 replies recorded through the issue's room fixture: 10 false onsets with one
bin, 0 with three, the user's onsets over them unchanged."""
UNMEASURED_S: Final = 3.0
"""Reply heard (`FAR_ACTIVE` frames) with no echo delay measured after which the bound narrows back (unless
`EchoDelay.heard`: an echo is there, its delay sliding)."""
FAR_ACTIVE: Final = 0.01
"""A reference frame's peak above which the reply counts as playing (here, and the canceller's warm-up and
ERLE, `voxcli.audio.aec`)."""
FLOOR_DB: Final = -50.0
"""Near-end power (dBFS, mean square over the window) below which a frame never counts."""
FRAMES: Final = 2
"""Near-speech frames in a row that make an onset (one frame can be a click or a stamp glitch)."""
BAND_HZ: Final = (120.0, 6000.0)
"""Bins compared: the voice's band (below: hum and the high-pass; above: little speech)."""
GLITCH_S: Final = 0.15
"""No onset this long after a dropout (a run of exact zeros inside the microphone's or the reference's
audio, at most `HOLE_MAX_S`: `_Holes`): its edges splatter over every bin, and the echo after it may sit elsewhere than the reference says
(a sound-server underrun). On 6 recorded self-turns on the loaded null sink, 19 false onsets without
this hold, 0 with it (tests/audio/test_doubletalk.py pins it on a synthetic hole)."""
NOISE_MARGIN_DB: Final = 12.0
"""A bin is the near end's only when it is also this far above the microphone's noise floor (a minimum,
so below the noise's mean). 10 dB still let a fan at -45..-35 dBFS make 1-6 false onsets per reply
with a gap in it, on the synthetic room (an offline sweep of the margin); 12 dB: none from the noise."""
NOISE_SMOOTH: Final = 0.8
"""Per-frame smoothing of the microphone's power spectrum the noise floor is the minimum of."""
NOISE_SPAN: Final = (25, 6)
"""The floor: the minimum over 6 stretches of 25 frames (1.5-1.75 s; minimum statistics): long enough to
reach a gap between the reply's (or the user's) words in every bin, short enough to follow a fan turned on."""
ZERO_RUN: Final = 16
"""Exact zeros in a row that make a dropout (1 ms at 16 kHz; a live microphone never gives them)."""
HOLE_MAX_S: Final = 0.06
"""Longest run of zeros that is a dropout (an underrun: 10-50 ms). Longer, or with no audio before it,
it is silence: a far end that stopped or has not started, a noise-gated microphone. Holding on those
made every onset at a reply's start or after a gate 150 ms late."""


class DoubleTalkDetector:
    """`update(near, far)` per 10 ms frame -> True on the frame that makes a near-speech onset.

    `near` is the raw microphone frame, `far` the reference frame the echo
    canceller was given for it (placed by the stamps, leading the echo).
    """

    def __init__(self, rate: int = 16000) -> None:
        self.rate = rate
        self.frame = rate // 100
        self.window = WINDOW * rate // 16000
        self._win = np.hanning(self.window)
        self._near = np.zeros(self.window)
        self._far = np.zeros(self.window)
        self._lags = int(round(MAX_LAG_S * 100)) + 1
        self._spectra: collections.deque[np.ndarray] = collections.deque(
            maxlen=self._lags + int(round(MAX_DELAY_S * 100)))
        self.delay = EchoDelay(rate)
        """The echo's measured delay after the placement (`voxcli.audio.echo_delay`): the bound moves with it."""
        self.shift = 0
        """Frames the bound reaches further back for that delay (0 while it is within `MAX_LAG_S - KEEP_S`)."""
        self._far_frames = 0  # frames of reply heard while no delay was measured
        hz = np.fft.rfftfreq(self.window, 1.0 / rate)
        self._band = (hz >= BAND_HZ[0]) & (hz <= BAND_HZ[1])
        self._echo = np.zeros(int(self._band.sum()))
        self._decay = 10.0 ** (-DECAY_DB / 10.0)
        self._margin = 10.0 ** (MARGIN_DB / 10.0)
        # sum of |X|^2 over the half spectrum = mean square * sum(w^2) * window / 2 (Parseval)
        self._parseval = float(np.sum(self._win ** 2)) * self.window / 2
        self._floor = 10.0 ** (FLOOR_DB / 10.0) * self._parseval
        self._smooth: np.ndarray | None = None  # the microphone's smoothed power spectrum (band bins)
        self._span_min: np.ndarray | None = None  # its minimum over the current stretch
        self._span_frames = 0
        self._floor_bins: np.ndarray | None = None  # the noise floor (None: not measured yet)
        self._filled = 0  # samples put in the window so far
        self._spans: collections.deque[np.ndarray] = collections.deque(maxlen=NOISE_SPAN[1])
        self._noise_margin = 10.0 ** (NOISE_MARGIN_DB / 10.0)
        self._run = 0
        self._hold = 0  # frames still to pass before an onset may be told again (after `reset`)
        self._holes = (_Holes(rate), _Holes(rate))  # dropouts in the microphone, in the reference
        self._glitch = [0, 0]  # frames still held after a dropout in each
        self.share = 0.0
        """The last frame's share of microphone power above the echo bound (for tests and tuning)."""
        self.spectrum = np.zeros(self.window // 2 + 1, np.complex128)
        """The last frame's microphone spectrum (the Hann window ending with the frame; `voxcli.audio.echo_mask`)."""
        self.above = np.zeros(self._echo.size, bool)
        """Which of the last frame's `band` bins stand above the echo bound (the near end's, `MARGIN_DB`)."""
        self.onsets = 0
        self.speech = False
        """The last frame was near speech (the user's, by the bound; `FRAMES` in a row make an onset)."""
        self.echo_power = 0.0
        """The last frame's echo bound as a mean square at the reply's own level: the most echo a speaker as
        loud at the microphone as the reply itself could put in the frame."""

    def update(self, near: np.ndarray, far: np.ndarray) -> bool:
        """One 10 ms frame of the raw microphone and its reference; True on the frame that makes an onset."""
        n = self.frame
        for k, a in enumerate((near, far)):
            hole = self._holes[k].update(a)
            self._glitch[k] = int(round(GLITCH_S * 100)) if hole > 0 else (0 if hole < 0 else self._glitch[k])
        self._near = np.concatenate([self._near[n:], np.asarray(near, np.float64)[:n]])
        self._far = np.concatenate([self._far[n:], np.asarray(far, np.float64)[:n]])
        pf = np.abs(np.fft.rfft(self._far * self._win))[self._band] ** 2
        self._spectra.append(pf)
        self.delay.update(near, far)
        bound = self._bound(self.delay.reach, far)
        self._echo = np.maximum(bound, self._echo * self._decay)
        self.spectrum = np.fft.rfft(self._near * self._win)
        pm = np.abs(self.spectrum[self._band]) ** 2
        total = float(pm.sum())
        self.above = pm > self._margin * self._echo  # the echo bound alone (the mask's rule)
        noise = 0.0 if self._floor_bins is None else self._floor_bins
        above = self.above & (pm > self._noise_margin * noise)  # the onset's: also above the room's noise
        self._filled += n
        held = self._hold > 0 or max(self._glitch) > 0
        if not held and self._filled >= self.window:  # no zeros of the start or of a dropout in it
            floor = self._noise(pm)
            self._floor_bins = floor if self._spans else None  # one whole stretch measured: a floor to trust
        excess = float(pm[above].sum())
        self.share = excess / total if total > 0 else 0.0
        speech = excess > self._floor and self.share >= SHARE and int(above.sum()) >= MIN_BINS
        self.speech = speech
        self.echo_power = float(self._echo.sum()) / self._parseval
        self._run = self._run + 1 if speech else 0
        if held:
            self._hold = max(0, self._hold - 1)
            self._glitch = [max(0, g - 1) for g in self._glitch]
            self._run = 0
        if self._run == FRAMES:
            self.onsets += 1
            return True
        return False

    def _bound(self, reach: int | None, far: np.ndarray) -> np.ndarray:
        """The loudest far-end spectrum the echo in this frame's window can come from: from the placement on
        (the last `MAX_LAG_S`) and, once the echo's delay is measured, back to `KEEP_S` before its `reach`
        (`EchoDelay.reach`: the lock, or a later delay seen within the last second) plus `MAX_LAG_S`. The
        stamps' own window always stays in: a delay measured wrong never uncovers an echo where the stamps
        put it (a lock too early, on a steady tone, can still miss a later echo). Until a delay is measured,
        every spectrum up to `MAX_LAG_S` + `echo_delay.MAX_DELAY_S` back (the first reply of a session,
        before the echo's delay is known) for `UNMEASURED_S` of the reply: where no echo can be measured
        (headphones, a muted speaker) a bound that wide would only make the user harder to hear, so the
        stamps' window comes back, unless an echo is heard though its delay slides too much to lock on
        (`EchoDelay.heard`: through the room fixture under load, the first reply's echo was then outside the
        narrowed bound and its syllables were onsets, once a self-interruption)."""
        n = len(self._spectra)
        if reach is not None:
            self.shift = max(0, reach // self.frame - int(round(KEEP_S * 100)))
            n = min(n, self._lags + self.shift)
        else:
            self._far_frames += bool(np.abs(far).max(initial=0.0) > FAR_ACTIVE)
            if self._far_frames > UNMEASURED_S * 100 and not self.delay.heard:
                n = min(n, self._lags)
        return np.max([self._spectra[-1 - i] for i in range(n)], axis=0)

    @property
    def band(self) -> np.ndarray:
        """Which bins of `spectrum` the bound covers (`BAND_HZ`)."""
        return self._band


    def _noise(self, pm: np.ndarray) -> np.ndarray:
        """The microphone's noise floor per bin (minimum statistics), with this frame's power `pm` in it.

        Why: without it, steady room noise (a fan, air conditioning: -50 dBFS and up) is "near speech"
        wherever the echo bound decays between the reply's words, and pauses every reply. Updated on
        every frame: a minimum over 1.5 s ignores speech (its words have gaps) and rises with the
        noise. Not on frames whose window holds the start's zeros or a dropout's (`update`): they
        would pull it to nothing.
        """
        self._smooth = pm.copy() if self._smooth is None else NOISE_SMOOTH * self._smooth + (1 - NOISE_SMOOTH) * pm
        self._span_min = self._smooth.copy() if self._span_min is None else np.minimum(self._span_min, self._smooth)
        self._span_frames += 1
        floor = self._span_min
        for m in self._spans:
            floor = np.minimum(floor, m)
        if self._span_frames == NOISE_SPAN[0]:
            self._spans.append(self._span_min)
            self._span_min, self._span_frames = None, 0
        return floor

    def reset(self) -> None:
        """Tell no onset until the windows hold only frames after this one (a reference that jumped
        or was missing: its echo could look like the user while it is in the bound)."""
        self._run = 0
        self._hold = max(self._hold, -(-self.window // self.frame))


class _Holes:
    """Dropouts in one signal, frame by frame: a run of `ZERO_RUN` or more exact zeros after audio,
    as long as it is no longer than `HOLE_MAX_S`."""

    def __init__(self, rate: int) -> None:
        self.max = int(HOLE_MAX_S * rate)
        self.run = 0  # exact zeros at the end of what was seen
        self.heard = False  # audio (not all zeros) came before that run

    def update(self, a: np.ndarray) -> int:
        """1: a dropout began or ended in frame `a` (hold); -1: the zeros outgrew a dropout (release); 0."""
        z = np.asarray(a) == 0
        if not z.any():  # the common frame: audio, no zeros
            ended = self.heard and ZERO_RUN <= self.run <= self.max
            self.heard, self.run = True, 0
            return 1 if ended else 0
        nz = np.flatnonzero(~z)
        if nz.size == 0:
            before, self.run = self.run, self.run + z.size
            if not self.heard:
                return 0
            return 1 if before < ZERO_RUN <= self.run <= self.max else (-1 if before <= self.max < self.run else 0)
        runs = np.diff(nz) - 1
        ended = self.heard and ZERO_RUN <= self.run + nz[0] <= self.max
        self.heard, self.run = True, int(z.size - 1 - nz[-1])
        inner = bool(np.any((runs >= ZERO_RUN) & (runs <= self.max)))
        return 1 if ended or inner or self.run >= ZERO_RUN else 0
