"""The speaker: float32 chunks played through a callback stream and our own bounded queue.

Why a callback stream and our own buffer: the audio thread must never wait on
synthesis, and the producer must never run unboundedly ahead of the speaker.
`write()` blocks (with timeouts) while more than `max_buffer_s` is queued,
`drain()` waits until everything has played, `close()`/`abort()` stops the
sound at once (Ctrl-C), `flush()`/`pause()` serve barge-in.

Why the stream starts with the device's low latency and may reopen with its
high one: a short device buffer keeps barge-in quick (what is in it still
plays after a flush), but on a loaded machine the PortAudio thread misses its
deadline, and with ALSA's PulseAudio plugin every underrun restarts the PCM
with a fresh, empty short buffer that underruns again: with 12 busy processes
on the 2 cores, 3 s took 114-118 s to play at the 9 ms "low" latency, 4.2 s at
the 35 ms "high" one with no underrun, and 8.7 s with this reopen
(benchmarks/bench_underrun.py). So the callback counts
underruns, and `ESCALATE_UNDERRUNS` of them within `ESCALATE_WINDOW_S` make a
watcher thread reopen the stream once with the high latency; the queue, the
play-head and the AEC's reference timeline carry over (they count samples and
PortAudio timestamps, not streams).
"""
from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from typing import Any, Callable, Final

import numpy as np

from voxcli.audio import devices
from voxcli.audio.aec_ref import PlayHead, playback_time
from voxcli.audio.pcm import StreamResampler

log = logging.getLogger(__name__)

ESCALATE_UNDERRUNS: Final = 2
"""Underruns within `ESCALATE_WINDOW_S` that make a spiral: once one starts it does not end by itself (seen on
the null sink under load and, on a fresh sink, also at load 0.1-0.3: benchmarks/bench_underrun.py --busy 0)."""
ESCALATE_WINDOW_S: Final = 5.0


class Player:
    """Plays float32 mono chunks on an output device through a bounded buffer."""

    def __init__(self, sample_rate: int, device: int | str | None = None, *,
                 max_buffer_s: float = 2.0, latency: str | float = "low",
                 on_played: Callable[[np.ndarray, float, int], None] | None = None) -> None:
        sd = devices._sd()
        self.on_played = on_played
        """Echo-canceller tap: (samples at device_rate, monotonic time they are heard, device_rate) per callback."""
        index, info = devices._pick(device, "output")
        self._index = index
        self.device_name = str(info["name"])
        self.sample_rate = sample_rate
        self.device_rate = devices._device_rate(sd, index, info, sample_rate, "output")
        self._resampler = StreamResampler(sample_rate, self.device_rate) if self.device_rate != sample_rate else None
        self._max = int(max_buffer_s * self.device_rate)
        self._buf: deque[np.ndarray] = deque()
        self._offset = 0  # samples of _buf[0] already played
        self._queued = 0  # samples in _buf not yet played
        self._cond = threading.Condition()
        self._closed = False
        self.underflows = 0
        self._xruns: deque[float] = deque(maxlen=ESCALATE_UNDERRUNS)  # monotonic times of the last underruns
        self._spiral = threading.Event()  # wakes the watcher: an underrun spiral, `abort`, or the player's end
        self._spiral_hit = False  # the callback saw a spiral (only that makes the watcher reopen)
        self._swap = threading.Lock()  # one stream stop/swap at a time (the watcher's reopen, `abort`)
        self.reopened = False
        """Whether underruns made the stream reopen with the device's high latency."""
        self.played_samples = 0
        """Device-rate samples handed to PortAudio (heard an output latency later: `heard()`)."""
        self.epoch = 0
        """Bumped by `flush()`: a write that began before it is dropped."""
        self._accepted = 0  # play-head index (at sample_rate) of the next sample written
        self._paused = False  # `pause()`: the callback plays silence, the queue waits
        self._pause_until: float | None = None  # monotonic time a pause expires by itself (None: never)
        self._tail_due = False  # the resampler holds input that `drain` must flush out
        self._head = PlayHead(self.device_rate)
        self._latency = 0.0  # the stream's output latency, read once it is open (0 during its first callbacks)
        self._stream = self._open(latency, start=True)
        self._latency = _latency_of(self._stream)
        if latency == "low":
            # the thread holds the player weakly: one never closed is still collected (and ends the thread)
            threading.Thread(target=_watch, args=(weakref.ref(self), self._spiral), name="voxcli-player-watch",
                             daemon=True).start()
            weakref.finalize(self, self._spiral.set).atexit = False

    def _open(self, latency: str | float, *, start: bool) -> Any:
        what = f"audio output {self.device_name!r}"
        kwargs = dict(samplerate=self.device_rate, device=self._index, latency=latency, callback=self._callback)
        if start:
            return devices._start(devices._sd().OutputStream, what, **kwargs)
        return devices._sd().OutputStream(channels=1, dtype="float32", **kwargs)

    @property
    def latency(self) -> float:
        """The open stream's output latency in seconds (what still plays after a `flush`)."""
        return self._latency

    def _reopen(self) -> None:
        """Reopen the stream with the high latency (the callback reported an underrun spiral).

        Under `_swap`, so `abort` never stops a stream this is stopping (a PortAudio stream aborted
        twice at once can be freed under the second caller). If the new stream cannot start, the old
        latency is tried again; with no stream at all the player closes (`write`/`drain` return).
        """
        with self._swap:
            with self._cond:
                if self._closed:
                    return
            try:
                new = self._open("high", start=False)  # opened before the old one stops: a failure keeps the old
            except Exception as e:  # noqa: BLE001 - PortAudioError: a device that allows one stream only
                log.info("audio output underruns, cannot reopen with a longer buffer: %s", e)
                return
            devices._stop(self._stream)
            old_latency = self._latency or "low"
            stream = self._started(lambda: new) or self._started(lambda: self._open(old_latency, start=False))
            if stream is None:
                self._close_queue()  # no stream: writers and drains must not wait for one
                return
            latency = _latency_of(stream)
            with self._cond:
                self._stream, self._latency, self.reopened = stream, latency, stream is new
            log.info("audio output underran %d times within %.0f s: reopened with a %.0f ms buffer",
                     ESCALATE_UNDERRUNS, ESCALATE_WINDOW_S, 1000 * latency)

    @staticmethod
    def _started(make: Callable[[], Any]) -> Any | None:
        """`make()` a stream and start it; None when either fails (logged; a made stream is stopped)."""
        stream = None
        try:
            stream = make()
            stream.start()
            return stream
        except Exception as e:  # noqa: BLE001 - PortAudioError and friends
            log.warning("audio output lost while reopening it after underruns: %s", e)
            if stream is not None:
                devices._stop(stream)
            return None

    def _callback(self, outdata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        # Runs on the PortAudio thread: copy what is queued, pad with silence, never block.
        out = outdata[:, 0]
        filled = 0
        t_dac = playback_time(time_info, self._latency)
        with self._cond:
            if status and status.output_underflow:
                self.underflows += 1
                now = time.monotonic()
                self._xruns.append(now)
                if len(self._xruns) == ESCALATE_UNDERRUNS and now - self._xruns[0] <= ESCALATE_WINDOW_S:
                    self._spiral_hit = True
                    self._spiral.set()
            if self._paused and self._pause_until is not None and time.monotonic() >= self._pause_until:
                self._paused = False  # nothing resumed or flushed it in time: play on (`pause`)
            while filled < frames and self._buf and not self._paused:
                head = self._buf[0]
                n = min(frames - filled, head.size - self._offset)
                out[filled:filled + n] = head[self._offset:self._offset + n]
                filled += n
                self._offset += n
                if self._offset >= head.size:
                    self._buf.popleft()
                    self._offset = 0
            self._queued -= filled
            self._head.record(self.played_samples, t_dac, filled)
            self.played_samples += filled
            self._cond.notify_all()
        out[filled:] = 0.0
        if self.on_played is not None:  # what the DAC gets, resampled and padded: the AEC's reference
            self.on_played(out.copy(), t_dac, self.device_rate)

    @property
    def buffered_s(self) -> float:
        return self._queued / float(self.device_rate)

    def write(self, audio: np.ndarray, timeout: float | None = None, *, epoch: int | None = None,
              ahead_s: float | None = None) -> int | None:
        """Queue audio; blocks while the buffer is full (wakes every 50 ms; stops if closed).

        `ahead_s`: wait only until no more than this is queued, then take the whole block (a
        writer that keeps the device that far ahead whatever its block sizes). Returns the
        play-head index (`heard()`'s count, at `sample_rate`) of its first sample, or None
        when it was dropped: closed, or flushed since `epoch` (default: now).
        """
        audio = np.asarray(audio, np.float32).reshape(-1)
        epoch = self.epoch if epoch is None else epoch
        n_in = audio.size
        if self._resampler is not None:
            audio = self._resampler.process(audio)
        deadline = None if timeout is None else time.monotonic() + timeout
        room = self._max - audio.size if ahead_s is None else int(ahead_s * self.device_rate)
        with self._cond:
            while self._queued > room and self._queued > 0 and not self._closed and epoch == self.epoch:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("audio output did not accept data in time")
                self._cond.wait(0.05)
            if self._closed or epoch != self.epoch:
                return None
            at, self._accepted = self._accepted, self._accepted + n_in
            self._tail_due = self._resampler is not None
            if audio.size:
                self._buf.append(audio.copy())
                self._queued += audio.size
            return at

    def heard(self, now: float | None = None) -> int:
        """Samples (at `sample_rate`) that had reached the listener by `now` (monotonic; default now).

        From the callbacks' DAC stamps (`voxcli.audio.aec_ref.PlayHead`): what was
        handed to the device minus what its output latency still holds.
        """
        with self._cond:
            return self._at_rate(self._head.heard(time.monotonic() if now is None else now))

    def flush(self) -> int:
        """Drop the queued audio, keep the stream running (barge-in: silence within the output
        latency, no new stream to open). Writes begun before it are dropped.

        Returns what the listener *will have heard* (at `sample_rate`): everything handed to
        PortAudio, since the audio already in the device's buffer still plays after the flush
        (one output latency). The history keeps the words the user heard, and those are heard;
        `heard()` at this moment would drop them.
        """
        with self._cond:
            self.epoch += 1
            self._buf.clear()
            self._offset = self._queued = 0
            self._paused, self._pause_until = False, None
            if self._resampler is not None:  # its history is the dropped audio's
                self._resampler = StreamResampler(self.sample_rate, self.device_rate)
            self._tail_due = False
            self._accepted = self._at_rate(self.played_samples)  # what is in the device's buffer still plays
            self._cond.notify_all()
            return self._accepted

    def pause(self, max_s: float | None = None) -> None:
        """Play silence from the next callback on, keeping the queue (a possible barge-in: `resume` or `flush`).

        `max_s`: it ends by itself after that long. Whoever paused may never come back (the input
        ended, a stuck ASR worker), and a paused queue would block `write` and `drain` for good.
        """
        with self._cond:
            self._paused = True
            self._pause_until = None if max_s is None else time.monotonic() + max_s

    def resume(self) -> None:
        with self._cond:
            self._paused, self._pause_until = False, None
            self._cond.notify_all()

    def _at_rate(self, device_samples: int) -> int:
        if self.device_rate == self.sample_rate:
            return device_samples
        return int(round(device_samples * self.sample_rate / self.device_rate))

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything written has been played (plus the device latency)."""
        with self._cond:  # a flush cannot come between: its fresh resampler has no tail (`_tail_due`)
            if self._resampler is not None and self._tail_due:
                tail = self._resampler.process(np.zeros(0, np.float32), last=True)
                if tail.size:
                    self._buf.append(tail)
                    self._queued += tail.size
                # a flushed soxr stream takes no more input ("Input after last input"): the next
                # reply on this stream (chat drains after every reply) starts a fresh one, once
                self._resampler = StreamResampler(self._resampler.from_rate, self._resampler.to_rate)
                self._tail_due = False
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queued > 0 and not self._closed:
                if deadline is not None and time.monotonic() > deadline:
                    return False
                self._cond.wait(0.05)
        if not self._closed:
            time.sleep(self._latency)
        return True

    def _close_queue(self) -> bool:
        """Mark closed and drop the queue, waking writers and drains; False if it already was."""
        with self._cond:
            if self._closed:
                return False
            self._closed = True
            self._buf.clear()
            self._queued = 0
            self._cond.notify_all()
            return True

    def abort(self) -> None:
        """Stop at once, dropping queued audio (Ctrl-C, barge-in)."""
        if not self._close_queue():
            return
        self._spiral.set()  # ends the watcher
        with self._swap:  # after a reopen in progress: then the stream is the new one
            devices._stop(self._stream)

    close = abort

    def __enter__(self) -> "Player":
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


def _watch(player: "weakref.ref[Player]", spiral: threading.Event) -> None:
    """The watcher thread: waits for a spiral (or the player's end) without keeping the player alive."""
    spiral.wait()
    p = player()
    if p is not None and p._spiral_hit:  # not an abort, not the player's end
        p._reopen()


def _latency_of(stream: Any) -> float:
    """A stream's output latency in seconds (0 when PortAudio does not say)."""
    return float(getattr(stream, "latency", 0.0) or 0.0)
