"""The echo canceller's far end: what the speaker played, on one clock with the microphone.

Why a timeline and not a queue: the echo in a captured frame is whatever the
speaker was playing when that frame was captured (plus the room's few ms), so
the reference for a microphone frame is looked up by *time*. Both sides stamp
their audio with PortAudio's own times, mapped to one monotonic clock in the
callback that delivers them (`playback_time`, `capture_time`): the output
callback's `outputBufferDacTime` (when its first sample reaches the DAC) and
the input callback's `inputBufferAdcTime` (when its first sample left the
ADC), each measured against the callback's `currentTime`, so the two streams
need not share a time base. A host API that gives no times (zeros) falls back
to the stream's reported `latency`. The delay between reference and echo is
thus measured, not a constant; AEC3's own delay estimator only has to find the
acoustic few milliseconds and the error of those stamps.

`ReferenceTimeline` takes the tapped output blocks at the device's rate
(after the player's resampling: exactly the samples the DAC gets), resamples
them to the capture rate and writes them at their time into a ring. Blocks
follow each other by sample count while their stamps agree within
`REANCHOR_S`; a jump (a new output stream after a barge-in, an underflow, the
two clocks drifting apart) re-anchors the timeline at the stamp. What was not
played (before the first block, gaps) reads as silence, as it sounded.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Final

import numpy as np

from voxcli.audio.pcm import StreamResampler

REANCHOR_S: Final = 0.02
"""A block whose stamp is this far from where counting puts it starts a new anchor (a jump)."""
DRIFT_S: Final = 0.002
"""`DRIFT_BLOCKS` stamps in a row this far off the same way move the anchor by their median."""
DRIFT_BLOCKS: Final = 8


def _stamp(time_info: Any, field: str) -> tuple[float, float] | None:
    """(stamp, currentTime) from a sounddevice time_info, or None where the host API gives zeros."""
    try:
        t, now = float(getattr(time_info, field)), float(time_info.currentTime)
    except (AttributeError, TypeError, ValueError):
        return None
    return (t, now) if t > 0 and now > 0 else None


def playback_time(time_info: Any, latency: float, clock: Any = time.monotonic) -> float:
    """Monotonic time at which an output callback's first sample is heard."""
    now = clock()
    s = _stamp(time_info, "outputBufferDacTime")
    return now + (s[0] - s[1] if s else latency)


def capture_time(time_info: Any, frames: int, rate: float, latency: float, clock: Any = time.monotonic) -> float:
    """Monotonic time at which an input callback's first sample was captured."""
    now = clock()
    s = _stamp(time_info, "inputBufferAdcTime")
    return now + (s[0] - s[1] if s else -latency - frames / rate)


class Anchor:
    """Sample count -> clock time at `rate`, following a stream's stamps without their jitter.

    A single stamp is a few ms off (scheduling), so counting samples from an
    anchor is more exact than any one stamp. But the count loses track when
    the stream skips (an underflow/overflow) or its clock drifts from the
    monotonic one: a stamp more than `REANCHOR_S` off is a jump (new anchor
    at it); when the last `DRIFT_BLOCKS` stamps all deviate by more than
    `DRIFT_S` the same way, the anchor moves by their median (PulseAudio skips 8-12 ms now and
    then, which AEC3 must not have to re-learn for long).
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.t: float | None = None
        self.n = 0
        self._devs: collections.deque[float] = collections.deque(maxlen=DRIFT_BLOCKS)
        self.jumps = 0
        self.shifts = 0

    def time_of(self, count: int) -> float:
        assert self.t is not None
        return self.t + (count - self.n) / self.rate

    def place(self, t: float, count: int) -> float | None:
        """Stamp `t` for sample `count`. Returns None (no change), nan (a jump), or the shift in s."""
        if self.t is None:
            self.t, self.n = t, count
            return None
        dev = t - self.time_of(count)
        if abs(dev) > REANCHOR_S:
            self.t, self.n = t, count
            self._devs.clear()
            self.jumps += 1
            return float("nan")
        self._devs.append(dev)
        if len(self._devs) == DRIFT_BLOCKS and (min(self._devs) > DRIFT_S or max(self._devs) < -DRIFT_S):
            med = float(np.median(self._devs))
            self.t += med
            self._devs.clear()
            self.shifts += 1
            return med
        return None


class ReferenceTimeline:
    """Played audio at `rate`, by time; `tap()` from the output callback, `read()` from the capture side."""

    def __init__(self, rate: int, *, keep_s: float = 4.0, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self.t0 = clock()
        """Clock time of ring index 0."""
        self._ring = np.zeros(int(keep_s * rate), np.float32)
        self._end = 0  # absolute index one past the last sample written
        self._pending: collections.deque[tuple[np.ndarray, float, int]] = collections.deque(maxlen=512)
        self._lock = threading.Lock()
        self._resampler: StreamResampler | None = None
        self._anchor: Anchor | None = None  # the current output stream's count -> time
        self._in = 0  # device-rate samples of this stream
        self._out = 0  # absolute index of the next resampled sample
        self._reanchors = 0
        self.last_tap: float | None = None

    def tap(self, played: np.ndarray, t_play: float, device_rate: int) -> None:
        """Output callback: `played` (a copy) is heard from `t_play` on. O(1), never blocks."""
        self._pending.append((played, t_play, device_rate))
        self.last_tap = t_play

    def index_of(self, t: float) -> int:
        return int(round((t - self.t0) * self.rate))

    def read(self, start: int, n: int) -> np.ndarray:
        """Samples [start, start + n) of the timeline (silence where nothing was played or it is gone)."""
        with self._lock:
            self._absorb()
            out = np.zeros(n, np.float32)
            lo, hi = max(start, self._end - self._ring.size), min(start + n, self._end)
            if hi > lo:
                idx = np.arange(lo, hi) % self._ring.size
                out[lo - start : hi - start] = self._ring[idx]
            return out

    @property
    def reanchors(self) -> int:
        """Times the stamps disagreed with the sample count (a new stream, an underflow, drift)."""
        with self._lock:
            self._absorb()
            return self._reanchors

    @property
    def end(self) -> int:
        """Absolute index one past the last sample known (absorbing what was tapped)."""
        with self._lock:
            self._absorb()
            return self._end

    def _absorb(self) -> None:
        while self._pending:
            block, t, dev_rate = self._pending.popleft()
            moved = None if self._anchor is None or self._anchor.rate != dev_rate else self._anchor.place(t, self._in)
            if self._anchor is None or self._anchor.rate != dev_rate or (moved is not None and moved != moved):
                self._reanchor(t, dev_rate)
            elif moved is not None:  # drift: later samples go where the stamps now say
                self._out += int(round(moved * self.rate))
            y = self._resampler.process(block) if self._resampler is not None else block
            self._write(self._out, y)
            self._out += y.size
            self._in += block.size

    def _reanchor(self, t: float, dev_rate: int) -> None:
        """A new stream (or a skip): flush the resampler, count again from `t`."""
        if self._resampler is not None:
            self._write(self._out, self._resampler.process(np.zeros(0, np.float32), last=True))
        if self._anchor is not None:
            self._reanchors += 1
        self._resampler = StreamResampler(dev_rate, self.rate) if dev_rate != self.rate else None
        self._anchor = Anchor(dev_rate)
        self._anchor.place(t, 0)
        self._in = 0
        self._out = self.index_of(t)

    def _write(self, at: int, y: np.ndarray) -> None:
        if y.size == 0:
            return
        size = self._ring.size
        if at > self._end:  # a gap: silence was played (or nothing was)
            gap = np.arange(self._end, at)[-size:]
            self._ring[gap % size] = 0.0
        if y.size > size:  # longer than the ring: only its end is kept
            at, y = at + y.size - size, y[-size:]
        self._ring[np.arange(at, at + y.size) % size] = y
        self._end = max(self._end, at + y.size)
