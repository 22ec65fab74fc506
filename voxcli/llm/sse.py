"""Incremental server-sent-events parser (the WHATWG `text/event-stream` format).

Why our own and not `httpx-sse`: the format is a few lines of spec, and we need
to feed raw bytes as they come off the socket (any split, even inside a UTF-8
character or between CR and LF) so that, when a connection drops mid-answer,
exactly the events that fully arrived are delivered and a torn last line is
not. A pure byte-fed parser is also trivially property-tested against every
way of cutting the stream, without a network.

Algorithm: buffer bytes, cut complete lines (CRLF, LF or CR), and dispatch the
accumulated `data:` lines as one event at each blank line.
"""
from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class SSEvent:
    """One dispatched event: `data` is its `data:` lines joined with newlines."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Feed bytes with `feed()`; it yields every event completed by them."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._data: list[str] = []
        self._data_chars = 0
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._pending_cr = False  # a CR ended the previous feed; a following LF is part of it
        self._first_line = True

    def feed(self, chunk: bytes) -> list[SSEvent]:
        """Parse `chunk` (any split of the stream); return the events it completed."""
        out: list[SSEvent] = []
        if not chunk:
            return out
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._pending_cr = False
        self._buf += chunk
        while True:
            line, ok = self._cut_line()
            if not ok:
                break
            ev = self._process_line(line)
            if ev is not None:
                out.append(ev)
        return out

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line plus characters of an undispatched event (to bound memory)."""
        return len(self._buf) + self._data_chars

    @property
    def has_partial(self) -> bool:
        """True when bytes of an unfinished line or event are buffered (a torn stream)."""
        return bool(self._buf) or bool(self._data)

    def _cut_line(self) -> tuple[bytes, bool]:
        buf = self._buf
        lf, cr = buf.find(b"\n"), buf.find(b"\r")
        if lf < 0 and cr < 0:
            return b"", False
        i = lf if cr < 0 or (0 <= lf < cr) else cr
        line = bytes(buf[:i])
        end = i + 1
        if buf[i] == 0x0D:
            if end < len(buf):
                if buf[end] == 0x0A:
                    end += 1
            else:
                self._pending_cr = True  # the LF may come in the next feed
        del buf[:end]
        return line, True

    def _process_line(self, raw: bytes) -> SSEvent | None:
        line = raw.decode("utf-8", errors="replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix("\ufeff")
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        return None  # unknown fields are ignored

    def _dispatch(self) -> SSEvent | None:
        if not self._data:
            self._event = ""
            return None
        ev = SSEvent(data="\n".join(self._data), event=self._event or "message", id=self._id, retry=self._retry)
        self._data = []
        self._data_chars = 0
        self._event = ""
        return ev
