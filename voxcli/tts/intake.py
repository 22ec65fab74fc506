"""The text side of a TTS stream: deltas in, speakable pieces out, bounded, with a time-based flush.

Why its own class: three rules meet here under one lock. Pieces are cut by
the chunker at linguistic boundaries as text arrives; the text not yet taken
by the producer is kept under `max_pending_chars` (a sender waits or gets a
BufferError, issue 18); and text that has waited `flush_ms` without a
boundary is spoken anyway (issue 13 item 4, seed 004's `max_buffer_flush_ms`):
an LLM that stalls mid-clause (a tool call, a slow server) must not leave the
speaker silent until its next punctuation.

The clock of the flush is the producer's own wait: `next_text()` sleeps no
longer than until the flush is due, so a stalled source is spoken although
no new delta arrives. A flush cuts only where `TextChunker.flush` finds the
cut safe and at least `flush_min_words` words are waiting; with fewer it
waits for more text (and flushes as soon as enough of it came).
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import replace
from typing import Callable

from voxcli.tts.chunker import ChunkerConfig, TextChunker
from voxcli.tts.outbox import POLL_S, Cancelled

_SLICE = 4096  # characters handed to the chunker at a time (it re-scans its buffer: keep it short)


class TextIntake:
    """Chunked text waiting for the producer (thread-safe)."""

    def __init__(self, chunker: ChunkerConfig, *, max_pending_chars: int, flush_ms: float,
                 clock: Callable[[], float]) -> None:
        self._chunker = TextChunker(chunker)
        self._max_pending = max_pending_chars
        self._flush_s = max(0.0, flush_ms) / 1000.0
        self._now = clock
        self._texts: deque[str] = deque()
        self._texts_chars = 0
        self._lock = threading.Condition()
        self._finished = False
        self._since: float | None = None  # when the oldest text still inside the chunker arrived
        self._stuck = False  # a due flush found too few words: wait for more text
        self.t_first: float | None = None
        """Clock time of the first send() or finish() (the stream's t0)."""
        self.text_chars = 0
        self.flushes = 0
        """Pieces cut by the time-based flush."""

    @property
    def pending_chars(self) -> int:
        """Characters received but not yet taken by the producer."""
        return len(self._chunker.pending) + self._texts_chars

    @property
    def ready(self) -> int:
        """Pieces cut and waiting for `next_text()`."""
        return len(self._texts)

    def send(self, delta: str, *, block: bool, cancel: threading.Event, alive: Callable[[], bool],
             final: bool = False) -> None:
        """Take `delta` whole once under the budget (see TTSStreamer.send); `final`: then finish.

        A final delta that is also the first is text known up front: the chunker
        keeps its sentences whole (`ChunkerConfig.whole_sentences`).
        """
        with self._lock:
            while self.pending_chars >= self._max_pending and not cancel.is_set():
                if not block:
                    raise BufferError(f"{self.pending_chars} characters wait to be spoken: send(block=True) waits")
                if not alive():
                    break  # the producer failed: its error ends the output
                self._lock.wait(POLL_S)
            if cancel.is_set():
                return
            if self._finished:
                raise RuntimeError("send() after finish()")
            if final and self.text_chars == 0:
                self._chunker.config = replace(self._chunker.config, whole_sentences=True)
            now = self._start()
            self.text_chars += len(delta)
            cut = 0
            for i in range(0, len(delta), _SLICE):
                cut += self._queue(self._chunker.feed(delta[i : i + _SLICE]))
            self._arrived(now, cut > 0)
            self._lock.notify_all()
        if final:
            self.finish()

    def finish(self) -> bool:
        """No more text: queue the rest. False if already finished."""
        with self._lock:
            if self._finished:
                return False
            self._start()
            self._queue(self._chunker.finish())
            self._finished = True
            self._since = None
            self._lock.notify_all()
            return True

    def clear(self) -> None:
        """Cancel: drop the pieces not taken yet and wake every waiter."""
        with self._lock:
            self._texts.clear()
            self._texts_chars = 0
            self._lock.notify_all()

    def poll(self) -> float | None:
        """Flush if due now; returns seconds until the next flush is due (None: none pending)."""
        with self._lock:
            return self._poll()

    def next_text(self, cancel: threading.Event) -> str | None:
        """The next piece to speak, waiting for it (and flushing on time); None once finished."""
        with self._lock:
            while not self._texts:
                if cancel.is_set():
                    raise Cancelled
                if self._finished:
                    return None
                due = self._poll()
                if not self._texts:
                    self._lock.wait(POLL_S if due is None else min(POLL_S, max(due, 0.001)))
            if cancel.is_set():
                raise Cancelled
            text = self._texts.popleft()
            self._texts_chars -= len(text)
            self._lock.notify_all()  # room for a waiting sender
            return text

    # -- under the lock ---------------------------------------------------------------

    def _start(self) -> float:
        now = self._now()
        if self.t_first is None:
            self.t_first = now
        return now

    def _queue(self, texts: list[str]) -> int:
        self._texts.extend(texts)
        self._texts_chars += sum(map(len, texts))
        return len(texts)

    def _arrived(self, now: float, cut: bool) -> None:
        """Restart the flush clock when the chunker's buffer gained its first words (or was cut)."""
        if not self._chunker.pending.strip():
            self._since = None
        elif cut or self._since is None:
            self._since = now
        self._stuck = False  # new text: a flush that found too few words may succeed now

    def _poll(self) -> float | None:
        if self._flush_s <= 0 or self._since is None or self._stuck or self._finished:
            return None
        now = self._now()
        due = self._since + self._flush_s - now
        if due > 0:
            return due
        if self._queue(self._chunker.flush()):
            self.flushes += 1
            self._arrived(now, True)
            return self._poll()
        self._stuck = True
        return None
