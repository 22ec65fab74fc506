"""Rich renderables for speech streams: the live chunk table of `speak`, the device list.

Rendering lives here and only here: on a terminal a rich live table on
stderr, elsewhere (pipes, CI, NO_COLOR, TERM=dumb) one plain line per event,
so logs stay readable and nothing ever touches stdout.
"""
from __future__ import annotations

import bisect
import sys
from typing import IO, Any, Callable, Sequence

from voxcli.audio.devices import DeviceInfo
from voxcli.cli.views.terminal import fancy_terminal
from voxcli.events import AudioChunk, StreamStats, Word

#: Rows kept in the live table; older ones are summarized (100k-character texts).
MAX_ROWS = 16


def _short(text: str, width: int = 48) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def chunk_fields(c: AudioChunk) -> tuple[str, str, str, str, str, str]:
    """index, text, audio ms, synth ms, RTF, emitted at — the columns shared by both views."""
    audio_ms = c.duration_s * 1000
    rtf = c.synth_s / c.duration_s if c.duration_s else 0.0
    text = _short(c.text) if c.text else "↳"
    return (str(c.index), text, f"{audio_ms:.0f}", f"{c.synth_s * 1000:.0f}", f"{rtf:.2f}", f"{c.t_emit * 1000:.0f}")


def summary_line(stats: StreamStats, *, kind: str = "final", mode: str = "stream") -> str:
    ttfa = f"{stats.ttfa_s * 1000:.0f} ms" if stats.ttfa_s is not None else "-"
    head = "cancelled: " if kind == "cancelled" else ""
    return (f"{head}TTFA {ttfa} · RTF {stats.rtf:.2f} · audio {stats.audio_s:.2f} s · total {stats.total_s:.2f} s"
            f" · {stats.chunks} chunks · {stats.underruns} underruns ({mode})")


class PlainChunkView:
    """One line per chunk on stderr, then the summary line."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr

    def add(self, c: AudioChunk) -> None:
        i, text, audio, synth, rtf, at = chunk_fields(c)
        print(f"#{i:>3}  at {at:>6} ms  audio {audio:>5} ms  synth {synth:>5} ms  RTF {rtf}  {text}",
              file=self.stream, flush=True)

    def finish(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def close(self) -> None:
        pass


class _LiveView:
    """A rich `Live` display on stderr (`self._live`, `self.console`) that ends with a bold summary line."""

    console: Any
    _live: Any

    def finish(self, line: str) -> None:
        self.close()
        self.console.print(f"[bold]{line}[/bold]", highlight=False)

    def close(self) -> None:
        if self._live.is_started:
            self._live.stop()


class RichChunkView(_LiveView):
    """A live table of chunks on stderr (the last MAX_ROWS rows) and a summary line."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self.rows: list[tuple[str, ...]] = []
        self._live = Live(self._table(), console=self.console, refresh_per_second=12, transient=False)
        self._live.start()

    def _table(self):  # type: ignore[no-untyped-def]
        from rich.table import Table

        table = Table(box=None, header_style="bold", pad_edge=False)
        for name, justify in (("#", "right"), ("text", "left"), ("audio ms", "right"), ("synth ms", "right"),
                              ("RTF", "right"), ("at ms", "right")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        hidden = len(self.rows) - MAX_ROWS
        if hidden > 0:
            table.add_row("", f"[dim]… {hidden} earlier chunks[/dim]", "", "", "", "")
        for row in self.rows[-MAX_ROWS:]:
            rtf = float(row[4])
            style = "green" if rtf < 0.5 else ("yellow" if rtf < 1 else "red")
            table.add_row(row[0], row[1], row[2], row[3], f"[{style}]{row[4]}[/{style}]", row[5])
        return table

    def add(self, c: AudioChunk) -> None:
        self.rows.append(chunk_fields(c))
        self._live.update(self._table())


class RichWordView(_LiveView):
    """The text being spoken, the word under the play head highlighted (a TTY with a speaker).

    The highlight follows `position()` (stream seconds the listener has heard:
    the device's play head), redrawn by rich's refresh thread, not by chunk
    arrival: chunks run ahead of playback by up to the player's buffer.
    """

    WINDOW = 240
    """Characters shown around the current word (long texts scroll)."""

    def __init__(self, text: Callable[[], str], position: Callable[[], float]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self._text, self._position = text, position
        self.words: list[Word] = []
        self._starts: list[float] = []
        self._live = Live(self, console=self.console, refresh_per_second=20, transient=False)
        self._live.start()

    KEPT = 4096
    """Words kept (endless piped text: the view's memory stays flat)."""

    def current(self, t: float) -> Word | None:
        """The last word that started at or before stream time `t` (None before the first)."""
        i = self._index(t)
        words = self.words
        return words[i] if 0 <= i < len(words) else None

    def _index(self, t: float) -> int:
        return bisect.bisect_right(self._starts, t) - 1

    def __rich__(self):  # type: ignore[no-untyped-def]
        from rich.text import Text

        t = self._position()
        text, word = self._text(), self.current(t)
        if not text:  # piped text is not kept (flat memory): show the spoken words around the current one
            return self._spoken(self._index(t))
        a, b = (word.char_start or 0, word.char_end or 0) if word is not None else (0, 0)
        lo = max(0, a - self.WINDOW // 2)
        lo = lo if lo == 0 else text.find(" ", lo) + 1
        hi = min(len(text), max(b, lo) + self.WINDOW // 2)
        out = Text("…" if lo else "")
        out.append(text[lo:a])
        out.append(text[a:b], style="bold reverse")
        out.append(text[b:hi], style="dim")
        return out if hi >= len(text) else out + Text("…", style="dim")

    def _spoken(self, i: int):  # type: ignore[no-untyped-def]
        from rich.text import Text

        words, out = self.words, Text()
        for k in range(max(0, i - 20), min(len(words), i + 20)):
            out.append(words[k].text + " ", style="bold reverse" if k == i else ("dim" if k > i else ""))
        return out

    def add(self, c: AudioChunk) -> None:
        self.words.extend(c.words)  # words before starts: a reader never sees a start without its word
        self._starts.extend(w.start for w in c.words)
        if len(self.words) > 2 * self.KEPT:  # the refresh thread may draw one frame from the old lists
            self.words, self._starts = self.words[-self.KEPT:], self._starts[-self.KEPT:]


def word_view(text: Callable[[], str], position: Callable[[], float]) -> RichWordView | None:
    """The highlighting view on a rich terminal, else None (the caller shows the chunk view)."""
    return RichWordView(text, position) if fancy_terminal() else None


def chunk_view(quiet: bool = False) -> "PlainChunkView | RichChunkView | None":
    if quiet:
        return None
    return RichChunkView() if fancy_terminal() else PlainChunkView()


def render_devices(devices: Sequence[DeviceInfo]) -> None:
    """The device table (`voxcli devices`) on stderr."""
    if not fancy_terminal():
        for d in devices:
            mark = ("in " if d.default_input else "") + ("out" if d.default_output else "")
            print(f"{d.index:>3}  {d.name}  ({d.hostapi})  in {d.max_input_channels}  out {d.max_output_channels}"
                  f"  {d.default_samplerate:.0f} Hz  {('default ' + mark).strip() if mark else ''}",
                  file=sys.stderr, flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for name in ("#", "name", "host API", "in", "out", "rate", "default"):
        table.add_column(name)
    for d in devices:
        default = " ".join(x for x, on in (("input", d.default_input), ("output", d.default_output)) if on)
        table.add_row(str(d.index), d.name, d.hostapi, str(d.max_input_channels), str(d.max_output_channels),
                      f"{d.default_samplerate:.0f}", default)
    Console(stderr=True).print(table)
