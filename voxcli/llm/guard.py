"""Bounds on one streamed answer, so that no server can make a turn endless.

Two ways a server that keeps the connection busy can still hold `voxcli chat`
forever, and what stops each:

- It sends a first token and then only keep-alive comments, empty deltas,
  or nothing at all: the socket's idle timer resets on every byte, so it
  never fires. `ProgressWatch` measures progress in *text*, not bytes: when
  no new non-blank text has arrived for `timeout` seconds it calls its
  `on_stall` (the client shuts the socket down) and the answer ends as cut
  off.
- It ignores `max_tokens`, or packs a whole book into one delta: counting
  deltas bounds nothing then. `ReplyBudget` counts tokens as characters / 4
  (OpenAI's rule of thumb; at least one per delta) -- or the server's own
  count, when it reports one during the stream and it is larger -- and caps a
  single delta at `MAX_DELTA_CHARS`. Real servers send a token or a few per
  delta; a delta over the cap is a broken server, so the answer ends there.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Final, Literal

CHARS_PER_TOKEN: Final = 4
"""Characters per token when the server reports no count (English text averages about 4)."""
MAX_DELTA_CHARS: Final = 1024
"""Longest single delta passed on (~250 tokens; a real server sends one to a few tokens per delta)."""
DEFAULT_CAP_TOKENS: Final = 4096
"""Read at most this much of an answer when the caller sets no `max_tokens` (~15 minutes of speech)."""
WORD_SLACK: Final = 24
"""A delta cut at the budget is extended to the end of its word when that ends within this many characters."""

StopReason = Literal["length", "oversized"]


@dataclass
class ReplyBudget:
    """How much of one answer may still be passed on (see the module docstring)."""

    max_tokens: int
    """The caller's `max_tokens`, or `DEFAULT_CAP_TOKENS` (the server may ignore the one it was sent)."""
    max_delta_chars: int = MAX_DELTA_CHARS
    """Longest single delta passed on; a longer one is cut and ends the answer."""
    estimated: float = 0.0
    """Tokens passed on so far, estimated from characters."""
    reported: int = 0
    """The server's completion-token count, when it reports one during the stream."""
    stop: StopReason | None = None
    """Why the answer must end now: the budget is spent, or a delta was oversized."""

    @property
    def tokens(self) -> float:
        """Tokens used: our estimate, or the server's count when it is larger (a server can only tighten it)."""
        return max(self.estimated, float(self.reported))

    def take(self, text: str) -> str:
        """The part of `text` to pass on; sets `stop` when nothing more may follow it."""
        if len(text) > self.max_delta_chars:
            text, self.stop = clip(text, self.max_delta_chars), "oversized"
        left = self.max_tokens - self.tokens
        if _cost(text) > left:
            text = clip(text, max(1, int(left * CHARS_PER_TOKEN)))
            self.stop = self.stop or "length"
        self.estimated += _cost(text)
        if self.tokens >= self.max_tokens:
            self.stop = self.stop or "length"
        return text


def _cost(text: str) -> float:
    return max(1.0, len(text) / CHARS_PER_TOKEN)


def clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters: at the end of the word in progress when that is near."""
    if len(text) <= limit:
        return text
    rest = text[limit: limit + WORD_SLACK + 1]
    for i, ch in enumerate(rest):
        if ch.isspace():
            return text[: limit + i]
    return text if len(rest) <= WORD_SLACK else text[:limit]


class ProgressWatch:
    """Calls `on_stall()` once (from its own thread) when `progress()` was not called for `timeout` s.

    `start()` arms it (the client does so at the first token: before that the
    first-token timeout applies); `stop()` disarms it. `stalled` tells whether it fired.
    """

    def __init__(self, timeout: float, on_stall: Callable[[], None]) -> None:
        if timeout <= 0:
            raise ValueError(f"progress timeout must be positive, not {timeout}")
        self.timeout = timeout
        self.stalled = False
        self._on_stall = on_stall
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.progress()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="voxcli-llm-progress", daemon=True)
            self._thread.start()

    def progress(self) -> None:
        """New text arrived: the clock starts again."""
        self._last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            left = self._last + self.timeout - time.monotonic()
            if left <= 0:
                self.stalled = True
                self._on_stall()
                return
            self._stop.wait(left)
