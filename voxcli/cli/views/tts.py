"""Rich renderables for speech streams: the live chunk table of `speak`, the device list.

Rendering lives here and only here: on a terminal a rich live table on
stderr, elsewhere (pipes, CI, NO_COLOR, TERM=dumb) one plain line per event,
so logs stay readable and nothing ever touches stdout.
"""
from __future__ import annotations

import sys
from typing import IO, Sequence

from voxcli.audio.devices import DeviceInfo
from voxcli.cli.views.terminal import fancy_terminal
from voxcli.events import AudioChunk, StreamStats

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


class RichChunkView:
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

    def finish(self, line: str) -> None:
        self.close()
        self.console.print(f"[bold]{line}[/bold]", highlight=False)

    def close(self) -> None:
        if self._live.is_started:
            self._live.stop()


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
