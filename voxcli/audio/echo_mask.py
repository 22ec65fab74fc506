"""The user's first word under a loud reply: the raw microphone, masked to what the echo cannot explain.

Why: when the user starts talking over a loud stretch of the reply, the
double-talk detector (`voxcli.audio.doubletalk`) tells the onset only 0.1-0.3 s
after their first word, and by then AEC3's output has already lost that word
(it suppresses the near end during double talk, and for 110-150 ms after the
far end stops): on the null sink 32 of 38 late onsets lost the first word,
and the user's WER over the reply was 0.16 against 0.00 without it
(benchmarks/bench_barge_in.py). The raw microphone still holds the word, under
the echo. Kept here: each 10 ms frame's raw spectrum (the detector's own
512-sample window) with only the bins above the detector's echo bound (the
loudest far-end spectrum within the echo's delay, carried by the room's decay,
+6 dB), so the reply's echo is left out and the user's louder harmonics stay.
Offline (the echo delay jumping by up to 100 samples, 6 start times per cell)
the masked audio for the 300 ms before the pause gave WER 0.014/0.042/0.111
against AEC3's 0.097/0.097/0.139 with the pause 150/250/350 ms after the first
word. Chat patches it into the ASR's buffer (`ASRStreamer.patch`) once the
pause is a little past (`POST_S`), so the next decode hears the first word.

The mask is the fallback now: `audio` first subtracts the reply's echo with a
linear fit made from the raw microphone and reference kept here
(`voxcli.audio.echo_path`), which keeps the user in the bins where they are
under the echo too (an onset 250-300 ms late left the mask's WER at 0.034 over
87 barge-ins), else, through a reverberant room, with a fit per frequency bin
(`voxcli.audio.echo_subband`); the mask stands in where no fit can be trusted.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Final

import numpy as np

from voxcli.audio import echo_path, echo_subband

PRE_S: Final = 0.3
"""Audio before the pause that is rebuilt from the mask (the onset comes up to ~0.3 s after the first word)."""
POST_S: Final = 0.2
"""Audio after the pause rebuilt too: AEC3 keeps suppressing the user 110-150 ms after the far end stops;
there the echo bound decays and the mask lets the raw microphone through."""
TRAIL_S: Final = 0.04
"""A span can be rebuilt once this much audio after it was recorded: every window over it (32 ms) is whole."""
KEEP_S: Final = 1.5
"""Masked frames kept (PRE_S + POST_S, the output latency and a late echo's delay, up to 0.2 and 0.4 s, and slack)."""
RAW_KEEP_S: Final = 4.0
"""Raw microphone and reference kept for the fits (`FIT_S` and the lags before the span: echo_subband's 0.45 s
delay and 0.22 s path; the span with a late echo's 0.4 s; slack)."""


@dataclass(frozen=True)
class Span:
    """A span to rebuild, with copies of what rebuilding it reads (`EchoMask.take`)."""

    lo: int
    hi: int
    ring: tuple[np.ndarray, np.ndarray, int, int] | None
    """The raw ring joined (`EchoMask._ring`); None: no fit (the mask alone, or the ring does not hold it)."""
    frames: list[np.ndarray]
    """The masked spectra kept, oldest first."""
    first_frame: int
    """The number of `frames[0]`."""
    raw_kept_s: float
    """Raw audio kept then."""


class EchoMask:
    """Ring of masked raw-microphone spectra, one per 10 ms frame; `audio(lo, hi)` rebuilds a span.

    Sample numbers are the frames' (frame k holds samples [k * frame, (k + 1) * frame) of the
    capture stage's input and output); frame k's window ends with it.
    """

    def __init__(self, rate: int, window: int) -> None:
        self.frame = rate // 100
        self.window = window
        self._win = np.hanning(window)
        self._frames: collections.deque[np.ndarray] = collections.deque(maxlen=int(KEEP_S * 100))
        self._raw: collections.deque[tuple[np.ndarray, np.ndarray]] = collections.deque(maxlen=int(RAW_KEEP_S * 100))
        self.rate = rate
        self.count = 0
        """Frames recorded (the next frame's number)."""
        self.linear = True
        """Try the linear subtraction first (`echo_path`); False: the mask alone (benchmarks compare them)."""
        self.rebuilt_by: str | None = None
        """What rebuilt the last span: "linear" (`echo_path`), "room" (`echo_subband`) or "mask" (None: nothing yet)."""
        self.raw_kept_s = 0.0
        """Raw audio kept when the last span was rebuilt (short after a cut: too little for a fit)."""

    def record(self, spectrum: np.ndarray | None, band: np.ndarray, above: np.ndarray,
               near: np.ndarray | None = None, far: np.ndarray | None = None) -> None:
        """This frame's raw spectrum (None: no reference known, keep nothing) and which of its `band` bins stand
        above the echo bound (the detector's own verdict, `DoubleTalkDetector.above`); with `near` and `far`,
        its raw samples and the reference it was given (zeros where none was known), for the linear fit."""
        if near is not None and far is not None:
            self._raw.append((np.array(near, np.float32), np.array(far, np.float32)))
        else:
            self._raw.clear()  # the raw ring must be one run of consecutive frames
        if spectrum is None:
            masked = np.zeros(self.window // 2 + 1, np.complex128)
        else:
            keep = np.zeros(spectrum.size, bool)
            keep[band] = above
            masked = spectrum * keep
        self._frames.append(masked)
        self.count += 1

    def cut(self) -> None:
        """Forget the raw frames so far: the reference's placement jumped (a fit across it would mix two
        delays); the frames from the next one on are one run again."""
        self._raw.clear()

    def audio(self, lo: int, hi: int) -> tuple[int, np.ndarray]:
        """Samples [lo, hi) rebuilt now (`take` then `rebuild`, on the calling thread)."""
        return self.rebuild(self.take(lo, hi))

    def take(self, lo: int, hi: int) -> Span:
        """What rebuilding [lo, hi) needs, copied (a few ms): `rebuild` may then run on another thread while
        frames go on being recorded. Chat takes it on the capture thread and fits on a thread of its own
        (`voxcli.chat.first_word`): on the capture thread a fit held the capture 100-300 ms in live runs."""
        return Span(lo, hi, self._ring(lo, hi) if self.linear else None, list(self._frames),
                    self.count - len(self._frames), len(self._raw) * self.frame / self.rate)

    def rebuild(self, span: Span) -> tuple[int, np.ndarray]:
        """`span`'s samples: the microphone minus the fitted echo when a fit can be trusted (one delay,
        `echo_path.rebuild`; else a room's, `echo_subband.rebuild`), else the masked spectra by overlap-add,
        clipped to the samples every window of which is kept (from the oldest frame on; up to a window minus a
        frame before the newest frame's end). Sets `rebuilt_by` and `raw_kept_s`; 40-50 ms of one core."""
        self.raw_kept_s = span.raw_kept_s
        lo = span.lo
        for by, fit in (("linear", echo_path.rebuild), ("room", echo_subband.rebuild)) if span.ring is not None else ():
            near, far, first, end = span.ring
            try:
                out = fit(near, far, lo - first, end - first, self.rate)
            except Exception:  # noqa: BLE001 - chat's worker: the mask is always there to stand in
                out = None  # (`_ring` only slices and joins what `record` kept: nothing there to raise)
            if out is not None:
                self.rebuilt_by = by
                return lo, out
        self.rebuilt_by = "mask"
        return self._masked(span)

    def _ring(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, int, int] | None:
        """The raw ring as (near, far, its first sample's number, hi clipped to what was recorded), once for
        both fits; None when it does not hold [lo, hi)."""
        first = (self.count - len(self._raw)) * self.frame  # sample number of the ring's first sample
        # (the ring ends with the newest frame: `record` appends every frame, `cut` empties it)
        hi = min(hi, self.count * self.frame)
        if not self._raw or hi <= lo or lo < first:
            return None
        return (np.concatenate([n for n, _ in self._raw]), np.concatenate([f for _, f in self._raw]), first, hi)

    def _masked(self, span: Span) -> tuple[int, np.ndarray]:
        first, frames = span.first_frame, span.frames
        count = first + len(frames)
        lo, hi = max(span.lo, first * self.frame), min(span.hi, (count + 1) * self.frame - self.window)
        if hi <= lo:
            return lo, np.zeros(0, np.float32)
        out, norm = np.zeros(hi - lo), np.zeros(hi - lo)
        for k in range(lo // self.frame, min(count, (hi + self.window) // self.frame)):
            s0 = (k + 1) * self.frame - self.window  # frame k's window is [s0, s0 + window)
            a, b = max(lo, s0), min(hi, s0 + self.window)
            if b <= a:
                continue
            y = np.fft.irfft(frames[k - first], self.window) * self._win
            out[a - lo : b - lo] += y[a - s0 : b - s0]
            norm[a - lo : b - lo] += self._win[a - s0 : b - s0] ** 2
        return lo, (out / np.maximum(norm, 1e-3)).astype(np.float32)
