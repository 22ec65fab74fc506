"""The bounded audio queue between whoever sends samples and the ASR worker.

Why bounded: input can arrive faster than the worker decodes it (a pipe from a
file, `cat /dev/zero | voxcli transcribe -`), and an unbounded queue turned
that into gigabytes. At most `max_samples` wait here; a sender either waits
for room (`block=True`: unpaced input is consumed at the worker's speed and
nothing is lost) or, for live input that must never stall the capture
thread, the OLDEST waiting audio is dropped and counted (`block=False`:
drop-behind, so the captions stay close to "now").

A `Patch` (`ASRStreamer.patch`: audio the sender has since corrected) waits in
the same queue, in order with the samples: the worker takes it after every
sample sent before it and before any sent after, so it always patches audio
it already holds, however the threads interleave.
"""
from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Final, Union

import numpy as np

from voxcli.errors import Cancelled, UsageError

POLL_S: Final = 0.1  # every wait wakes up this often to check cancel and the worker


@dataclass(frozen=True)
class Patch:
    """Replace the stream's samples [sample, sample + audio.size) with `audio` (see `WorkerBuffer.patch`)."""

    sample: int
    """Absolute sample of the stream as the worker numbers it (what it took: drop-behind skips numbers)."""
    audio: np.ndarray
    announce: bool = False
    """Not a patch: one is on its way (`ASRStreamer.expect_patch`); an empty patch ends the wait."""


Item = Union[np.ndarray, Patch]


class AudioInbox:
    """Bounded FIFO of float32 samples; `put` waits or drops, `take` hands out steps."""

    def __init__(self, max_samples: int) -> None:
        if max_samples < 1:
            raise ValueError("max_samples must be positive")
        self.max_samples = max_samples
        self._parts: deque[Item] = deque()
        self._n = 0
        self._cond = threading.Condition()
        self._closed = False
        self._cancelled = False

    @classmethod
    def of_seconds(cls, max_pending_s: float, rate: int) -> "AudioInbox":
        """An inbox for `max_pending_s` of audio at `rate` (a UsageError when not positive)."""
        if max_pending_s <= 0:
            raise UsageError("max pending audio must be positive")
        return cls(max(1, int(max_pending_s * rate)))

    @property
    def pending(self) -> int:
        """Samples waiting for the worker."""
        with self._cond:
            return self._n

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def put(self, a: np.ndarray, *, block: bool, alive: Callable[[], bool]) -> int:
        """Queue `a`; return the number of samples dropped (always 0 when `block`).

        `block=True` waits for room piece by piece and gives up (silently) only
        when the stream is cancelled or the worker has ended (`alive()` False:
        its error is reported by the stream itself).
        """
        if not block:
            return self._put_dropping(a)
        i = 0
        with self._cond:
            while i < a.size:
                room = self.max_samples - self._n
                if room <= 0:
                    if self._cancelled or not alive():
                        return 0
                    self._cond.wait(POLL_S)
                    continue
                self._append(a[i : i + room])
                i += room
        return 0

    def put_patch(self, patch: Patch) -> None:
        """Queue `patch` behind the samples sent so far (never waits: it holds no new samples)."""
        with self._cond:
            if not self._cancelled:
                self._parts.append(patch)
                self._cond.notify_all()

    def _put_dropping(self, a: np.ndarray) -> int:
        with self._cond:
            dropped = max(0, a.size - self.max_samples)
            self._append(a[dropped:])
            if self._n <= self.max_samples:
                return dropped
            # The oldest samples go. A patch before them numbers samples the worker took (it stays);
            # one behind them numbers samples it will now never take (it goes).
            k = next(i for i, p in enumerate(self._parts) if not isinstance(p, Patch))
            if any(isinstance(p, Patch) for p in itertools.islice(self._parts, k, None)):  # rare: rebuild only then
                self._parts = deque(p for i, p in enumerate(self._parts) if i < k or not isinstance(p, Patch))
            while self._n > self.max_samples:
                head, excess = self._parts[k], self._n - self.max_samples
                assert isinstance(head, np.ndarray)
                if head.size <= excess:
                    del self._parts[k]
                    cut = head.size
                else:
                    self._parts[k], cut = head[excess:], excess
                self._n -= cut
                dropped += cut
            return dropped

    def _append(self, a: np.ndarray) -> None:
        if a.size:
            self._parts.append(a)
            self._n += a.size
            self._cond.notify_all()

    def take(self, n: int, *, whole: bool = False) -> tuple[Item | None, int]:
        """Up to `n` samples and what is left waiting after them; (None, 0) once closed and empty.

        A `Patch` at the head comes alone; samples never run past one (they stop short of it).
        `whole`: wait for all `n` (or as many as the queue holds, or up to a patch) unless input is
        over, so the steps fall at the same samples however the sender's and the worker's threads
        interleave (lockstep's determinism; without it a step is whatever had arrived). Raises
        Cancelled after `cancel()`.
        """
        want = min(n, self.max_samples) if whole else 1
        with self._cond:
            while self._n < want and not self._closed and not any(isinstance(p, Patch) for p in self._parts):
                self._cond.wait(POLL_S)
            if self._cancelled:
                raise Cancelled("transcription cancelled")
            if not self._parts:
                return None, 0
            if isinstance(self._parts[0], Patch):
                return self._parts.popleft(), self._n
            parts, got = [], 0
            while self._parts and got < n and not isinstance(self._parts[0], Patch):
                a = self._parts.popleft()
                assert isinstance(a, np.ndarray)
                if got + a.size > n:
                    a, rest = a[: n - got], a[n - got :]
                    self._parts.appendleft(rest)
                parts.append(a)
                got += a.size
            self._n -= got
            self._cond.notify_all()  # room for a waiting sender
            return np.concatenate(parts), self._n

    def close(self, *, cancel: bool = False) -> None:
        """No more input (`cancel`: and drop what waits; the worker stops at its next take)."""
        with self._cond:
            self._closed = True
            if cancel:
                self._cancelled = True
                self._parts.clear()
                self._n = 0
            self._cond.notify_all()
