"""A speaker with a real-time play head and no sound card.

Why: the chat loop's barge-in truncates the assistant's reply to what was
actually *heard*, which needs a play head that advances in real time, and
`voxcli chat --input ... --output replies.wav` (CI, no audio device) must
behave exactly like a live conversation -- a user utterance scheduled to
start 1.5 s into the reply must interrupt it 1.5 s in. `VirtualSpeaker`
models a device with a bounded queue: audio written to it plays back-to-back
from when it was written (a gap if the writer is late: an underrun), `write`
blocks while more than `max_ahead_s` is queued (like a full device buffer),
and `stop()` drops everything not yet played at once. It records the timeline
of what was played, so the CLI can write it to a file: either all at the end
(`timeline()`, for short sessions and tests) or, with a `sink`, as it plays
(`flush()`), holding no more than the queued `max_ahead_s` of audio however
long the session -- `chat --input` of ten hours must not build a ten-hour
array.

Algorithm: each write is a segment (start time, samples); the play head at
time t is the sum over segments of clamp((t - start) * rate, 0, len).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class _Segment:
    t_start: float
    audio: np.ndarray
    abs_start: int
    """Play-head sample index (over the speaker's lifetime) of the segment's first sample."""
    n: int
    """Samples of the segment (audio may be empty when the speaker keeps no timeline)."""


class VirtualSpeaker:
    """Real-time play head over written audio; `played_samples()` is what a listener has heard."""

    def __init__(
        self,
        sample_rate: int,
        *,
        max_ahead_s: float = 0.4,
        clock: Callable[[], float] = time.perf_counter,
        keep: bool = True,
        sink: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        self.sample_rate = sample_rate
        self.max_ahead_s = max_ahead_s
        self.clock = clock
        self.keep = keep or sink is not None
        self._sink = sink
        self._out = 0  # timeline samples already handed to the sink
        self._dropped = 0  # played samples of segments flushed and forgotten
        self._segments: list[_Segment] = []
        self._cond = threading.Condition()
        self._play_end = 0.0  # wall time when the queued audio finishes playing
        self._written = 0  # samples accepted (play-head index of the next write)
        self._epoch = 0
        self._closed = False
        self.t_first: float | None = None
        self.underrun_s = 0.0

    # -- writer side --------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """Bumped by `stop()`: pass it to `write` to drop a write that comes after the stop."""
        return self._epoch

    def write(self, audio: np.ndarray, *, epoch: int | None = None) -> int | None:
        """Queue `audio` to play after what is queued; block while the queue is full.

        Returns the play-head index of its first sample, or None if `stop()`
        or `close()` happened while waiting, or since `epoch` (the audio is dropped).
        """
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        with self._cond:
            epoch = self._epoch if epoch is None else epoch
            while not self._closed and epoch == self._epoch:
                ahead = self._play_end - self.clock()
                if ahead <= self.max_ahead_s:
                    break
                self._cond.wait(min(0.05, ahead - self.max_ahead_s + 0.001))
            if self._closed or epoch != self._epoch:
                return None
            now = self.clock()
            self._flush_locked(now)
            if self._play_end and now > self._play_end and self._written:
                self.underrun_s += now - self._play_end
            start = max(now, self._play_end)
            if self.t_first is None:
                self.t_first = start
            seg_len = audio.size
            seg = _Segment(start, audio if self.keep else audio[:0], self._written, seg_len)
            self._segments.append(seg)
            self._written += seg_len
            self._play_end = start + seg_len / self.sample_rate
            return seg.abs_start

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything written has played (or stop/close); False on timeout."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            epoch = self._epoch
            while not self._closed and epoch == self._epoch:
                left = self._play_end - self.clock()
                if left <= 0:
                    return True
                if deadline is not None and self.clock() >= deadline:
                    return False
                self._cond.wait(min(0.05, left))
            return True

    # -- control side (any thread) -------------------------------------------------

    def played_samples(self) -> int:
        """Samples heard so far (over the speaker's lifetime)."""
        with self._cond:
            return self._played_at(self.clock())

    def is_playing(self) -> bool:
        with self._cond:
            return self._play_end > self.clock()

    def stop(self) -> int:
        """Drop all audio not yet played, wake blocked writers; returns `played_samples()`."""
        with self._cond:
            now = self.clock()
            played = self._played_at(now)
            kept: list[_Segment] = []
            for seg in self._segments:
                heard = int(min(max((now - seg.t_start) * self.sample_rate, 0), seg.n))
                if heard > 0:
                    seg.audio = seg.audio[:heard]
                    seg.n = heard
                    kept.append(seg)
            self._segments = kept
            self._flush_locked(now)
            self._written = played
            self._play_end = min(self._play_end, now)
            self._epoch += 1
            self._cond.notify_all()
            return played

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- result --------------------------------------------------------------------

    def timeline(self, until: float | None = None) -> np.ndarray:
        """What was heard, placed at the times it played (silence between), from the first sample.

        Only for a speaker without a `sink` (with one, `flush()` has handed it over already).
        `until` (a clock time) cuts audio that had not played by then; default now.
        """
        with self._cond:
            until = self.clock() if until is None else until
            if not self._segments:
                return np.zeros(0, dtype=np.float32)
            t0 = self._segments[0].t_start
            pieces: list[tuple[int, np.ndarray]] = []
            end = 0
            for seg in self._segments:
                heard = int(min(max((until - seg.t_start) * self.sample_rate, 0), seg.audio.size))
                if heard <= 0:
                    continue
                at = int(round((seg.t_start - t0) * self.sample_rate))
                pieces.append((at, seg.audio[:heard]))
                end = max(end, at + heard)
            out = np.zeros(end, dtype=np.float32)
            for at, a in pieces:
                out[at : at + a.size] = a
            return out

    def flush(self, until: float | None = None) -> None:
        """Hand the sink everything heard up to `until` (default now), silences between included."""
        with self._cond:
            self._flush_locked(self.clock() if until is None else until)

    def _flush_locked(self, until: float) -> None:
        """Emit the played part of the timeline to the sink; forget segments played in full.

        Segments play one after another (a write starts at max(now, end of the
        queue)), so the timeline only grows at its end and what was emitted is final.
        """
        if (self._sink is None and self.keep) or not self._segments or self.t_first is None:
            return  # timeline() mode keeps every segment; nothing written yet
        keep: list[_Segment] = []
        for seg in self._segments:
            at = int(round((seg.t_start - self.t_first) * self.sample_rate))
            heard = int(min(max((until - seg.t_start) * self.sample_rate, 0), seg.audio.size))
            if heard > 0 and self._sink is not None:
                while self._out < at:  # the silence before this segment, a second at a time
                    gap = min(at - self._out, self.sample_rate)
                    self._sink(np.zeros(gap, dtype=np.float32))
                    self._out += gap
                done = max(self._out - at, 0)
                if heard > done:
                    self._sink(seg.audio[done:heard])
                    self._out = at + heard
            if heard >= seg.audio.size and until >= seg.t_start + seg.n / self.sample_rate:
                self._dropped += seg.n  # played in full and written: only its length matters now
            else:
                keep.append(seg)
        self._segments = keep

    def _played_at(self, t: float) -> int:
        total = self._dropped
        for seg in self._segments:
            total += int(min(max((t - seg.t_start) * self.sample_rate, 0), seg.n))
        return total


class DeviceSpeaker:
    """A real output device; its play head is the device's own (`Player.heard`: DAC stamps).

    Barge-in must drop queued audio *and keep playing later replies*: `stop()`
    flushes the one output stream (`Player.flush`), so the sound stops within
    the device's output latency and no new stream is opened; what was heard
    is the device's play position, not a clock estimate. The writer is paced
    by the device too (`max_ahead_s` queued beyond what it has taken): a
    sound server starved by a loaded CPU plays late, and a clock that assumed
    real time would run ahead of it until writes timed out.
    """

    WRITE_TIMEOUT_S = 10.0
    """A device that takes nothing for this long is gone: the write raises TimeoutError."""
    ECHO_WARMUP_S = 2.0
    """Audible reply the echo canceller must have had before a speech run may pause the reply: its
    own warm-up (`AECConfig.warmup_s`, 1 s of far end) plus the capture's lag behind the output."""

    def __init__(self, sample_rate: int, device: int | str | None = None, *, max_ahead_s: float = 0.4,
                 on_played: Callable[[np.ndarray, float, int], None] | None = None) -> None:
        from voxcli.audio.player import Player

        # on_played: the echo canceller's reference tap (`voxcli.audio.aec_ref`)
        self.sample_rate = sample_rate
        self.max_ahead_s = max_ahead_s
        self._echo_s = 0.0  # audible reply handed to the echo canceller's reference
        self._aec = on_played is not None
        self._player = Player(sample_rate, device, on_played=self._tap(on_played) if on_played else None)

    def _tap(self, on_played: Callable[[np.ndarray, float, int], None]) -> Callable[[np.ndarray, float, int], None]:
        def tap(out: np.ndarray, t_play: float, rate: int) -> None:
            on_played(out, t_play, rate)
            if self._echo_s < self.ECHO_WARMUP_S and out.size and float(np.abs(out).max()) > 0.01:
                self._echo_s += out.size / rate  # 0.01: `voxcli.audio.doubletalk.FAR_ACTIVE`
        return tap

    def can_pause(self) -> bool:
        """Whether a speech run may pause the reply: only with the echo cancelled, past its warm-up.

        Without a canceller (`--no-aec` on speakers) or before it has converged, the reply's own
        echo is a speech run: every resume would start a new one, a pause/resume loop.
        """
        return self._aec and self._echo_s >= self.ECHO_WARMUP_S

    @property
    def epoch(self) -> int:
        """Bumped by `stop()`: a `write(..., epoch=)` from before it is dropped."""
        return self._player.epoch

    def write(self, audio: np.ndarray, *, epoch: int | None = None) -> int | None:
        """Queue `audio` once no more than `max_ahead_s` waits to be played; its play-head index,
        or None when a `stop()`/`close()` dropped it (since `epoch`, when given)."""
        return self._player.write(audio, timeout=self.WRITE_TIMEOUT_S, epoch=epoch, ahead_s=self.max_ahead_s)

    def stop(self) -> int:
        """Drop the queued audio; what the listener will have heard (`Player.flush`)."""
        return self._player.flush()

    def pause(self, max_s: float | None = None) -> None:
        """Silence at once, keeping the queued audio: speech that may be a barge-in (`resume` or
        `stop`); after `max_s` it plays on by itself."""
        self._player.pause(max_s)

    def resume(self) -> None:
        self._player.resume()

    def drain(self, timeout: float | None = None) -> bool:
        return self._player.drain(timeout)

    def played_samples(self) -> int:
        return self._player.heard()

    @property
    def output_latency_s(self) -> float:
        """What still plays after a `pause`/`stop` (the stream's output latency)."""
        return self._player.latency

    def close(self) -> None:
        self._player.abort()
