"""The on-device LLM writes a reply only as fast as it is needed: a few times the speed of speech.

Why: SmolLM2 writes ~200 characters a second flat out, the voice speaks ~15. A
reply written flat out takes a whole core for seconds while the voice renders
it and the ASR listens for a barge-in on the other, and the voice then runs at
70-80 % of its solo speed (benchmarks/bench_share.py --llm-flat). The text is
not needed that early: after its first sentence, a reply written at 3x the
speech rate stays ahead of the voice by more every second (the TTS stream's
own push-back, `max_pending_chars`, bounds how far).

`PacedReplyStream` wraps the reply's TTS stream: a `send()` that ends a
sentence waits while the text sent exceeds `burst + rate * (time since the
first send)`, so the agent, which pulls the LLM's next token only after a send
returns, pauses the LLM between sentences (a wait inside one would let the
stream's `max_buffer_flush_ms` cut it).
A cancelled stream (barge-in) never waits. A server's reply is not paced: it
costs no local core.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Final

from voxcli.tts.chunker import CLOSERS, SENTENCE_END  # the chunker's own marks: where it cuts a sentence

BURST_CHARS: Final = 120
"""Written flat out: the first sentence or two (the first audio and the text right after it)."""
CHARS_PER_S: Final = 45.0
"""Then at most this many characters a second: 3x Piper's ~15 characters a second of speech."""
POLL_S: Final = 0.05
"""Longest wait between checks for a cancel (a barge-in stops a paced send within this)."""


def ends_sentence(delta: str) -> bool:
    """The delta ends with a sentence's last mark (closing quotes and brackets allowed) or a line break."""
    if delta.endswith("\n"):
        return True
    last = delta.rstrip().rstrip("".join(CLOSERS))[-1:]
    return bool(last) and last in SENTENCE_END


class PacedReplyStream:
    """A TTS stream whose `send()` keeps the text under `burst + rate * t`; everything else is the stream's."""

    def __init__(self, stream: Any, *, burst: int = BURST_CHARS, rate: float = CHARS_PER_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if burst < 1 or rate <= 0:
            raise ValueError(f"pacing needs burst >= 1 and rate > 0, not {burst}, {rate}")
        self._stream, self._burst, self._rate, self._clock = stream, burst, rate, clock
        self._t0: float | None = None
        self._sent = 0
        self._wake = threading.Event()  # set by cancel(): a waiting send returns at once
        self.waited_s = 0.0
        """Time sends spent waiting, for the pace or the stream's push-back (the agent reports it as the
        LLM's `paced_s`: the LLM's clock ran while it waited)."""

    def send(self, delta: str, *, block: bool = True, final: bool = False) -> None:
        now = t0 = self._clock()
        if self._t0 is None:
            self._t0 = now
        self._sent += len(delta)
        self._stream.send(delta, block=block, final=final)
        # the wait comes after a sentence's end, never inside one: text that waits without a boundary is
        # flushed by the stream after `max_buffer_flush_ms` (a cut mid-sentence costs the prosody)
        while block and not final and ends_sentence(delta) and not self._stream.cancelled:
            over = self._sent - self._burst - self._rate * (now - self._t0)
            if over <= 0:
                break
            self._wake.wait(min(POLL_S, over / self._rate))
            now = self._clock()
        self.waited_s += self._clock() - t0

    def cancel(self) -> None:
        self._stream.cancel()
        self._wake.set()

    def __getattr__(self, name: str) -> Any:  # output, finish, close, cancelled, pending_chars, ...
        return getattr(self._stream, name)

    def __iter__(self):
        return iter(self._stream)
