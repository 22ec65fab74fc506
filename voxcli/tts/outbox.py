"""The hand-off between the TTS producer thread and the consumer: a bounded audio queue.

Why its own class: the one invariant that matters to every caller lives here,
under one lock: the output ends with exactly ONE sentinel (final, cancelled
or an error), and `cancel()` may replace queued audio and an unread final
sentinel with a `cancelled` one, but never after the consumer took the end.
The producer blocks here when it is `maxsize` chunks ahead (bounded memory),
waking every POLL_S to check the cancel flag.
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any, Final

from voxcli.events import AudioChunk

POLL_S: Final = 0.05  # every wait wakes up this often to check the cancel flag


class Cancelled(Exception):
    """Internal: the stream was cancelled; unwind a producer stage (cancel() queued the sentinel)."""


class Outbox:
    """Bounded audio queue ending in exactly one sentinel (or an error)."""

    def __init__(self, maxsize: int) -> None:
        self._items: deque[Any] = deque()
        self._cond = threading.Condition()
        self._maxsize = maxsize
        self._closed = False  # a sentinel (or error) has been queued
        self._delivered = False  # ... and the consumer took it
        self.taken = (0, 0, 0.0)  # audio chunks, samples and synth seconds the consumer took

    def put(self, chunk: AudioChunk, cancelled: threading.Event) -> bool:
        with self._cond:
            while len(self._items) >= self._maxsize and not (self._closed or cancelled.is_set()):
                self._cond.wait(POLL_S)
            if self._closed or cancelled.is_set():
                return False
            self._items.append(chunk)
            self._cond.notify_all()
            return True

    def close(self, item: Any, *, replace: bool = False) -> bool:
        """Queue the end of the stream once; `replace` drops queued audio (and an unread final).

        `item` may be a callable, called under the lock (a sentinel whose stats
        count exactly the chunks the consumer received).
        """
        with self._cond:
            if self._delivered or (self._closed and not replace):
                return False
            if replace:
                self._items.clear()
            self._items.append(item() if callable(item) else item)
            self._closed = True
            self._cond.notify_all()
            return True

    def get(self) -> Any | None:
        with self._cond:
            if not self._items:
                self._cond.wait(POLL_S)
            if not self._items:
                return None
            item = self._items.popleft()
            if not isinstance(item, AudioChunk) or item.kind != "audio":
                self._delivered = True
            else:
                n, samples, synth = self.taken
                self.taken = (n + 1, samples + item.audio.size, synth + item.synth_s)
            self._cond.notify_all()
            return item
