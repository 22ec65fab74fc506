"""Rich renderables for `voxcli ledger`: the turn waterfall and the chunk schedule table.

The waterfall puts every term on one time axis that starts at the end of the
user's speech, so the eye sees what runs in parallel (endpoint hold and ASR
tail), which branch is critical, how much slack the other one has, and where
the total lands against a human turn gap and the limit.
"""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from voxcli.bench.ledger import HUMAN_TURN_GAP_MS, LIMIT_MS, Ledger, Schedule

FULL, SIDE, SLACK, REF, LIMIT_REF = "█", "▒", "·", "┊", "│"


def _bar(width: int, axis_ms: float, start: float, end: float, critical: bool, slack_end: float | None) -> Text:
    # One row: cells left of the segment blank, the segment filled, slack dotted, reference lines where blank.
    def col(ms: float) -> int:
        return max(0, min(width, round(ms / axis_ms * width)))

    cells = [(" ", "")] * width
    a, b = col(start), max(col(end), col(start) + (1 if end > start else 0))
    for i in range(a, min(b, width)):
        cells[i] = (FULL, "bold cyan") if critical else (SIDE, "yellow")
    if slack_end is not None and slack_end > end:
        for i in range(b, min(col(slack_end), width)):
            cells[i] = (SLACK, "dim yellow")
    for ref, ch, style in ((HUMAN_TURN_GAP_MS, REF, "green"), (LIMIT_MS, LIMIT_REF, "red")):
        i = col(ref)
        if i < width and cells[i][0] == " ":
            cells[i] = (ch, style)
    text = Text()
    for ch, style in cells:
        text.append(ch, style=style or None)
    return text


def _axis(width: int, axis_ms: float) -> Text:
    step = 200.0 if axis_ms <= 2400 else 500.0
    line = [" "] * (width + 6)
    t = 0.0
    while t <= axis_ms:
        i = round(t / axis_ms * width)
        label = f"{t:.0f}"
        if i + len(label) <= len(line) and all(c == " " for c in line[max(0, i - 1) : i + len(label)]):
            line[i : i + len(label)] = list(label)
        t += step
    return Text("".join(line).rstrip() + " ms", style="dim")


def waterfall(led: Ledger, sources: dict[str, str], width: int = 60, show_sensitivity: bool = False) -> Group:
    """The ledger as a table of bars on a shared axis, then the explanation in words."""
    axis_ms = max(led.total_ms, LIMIT_MS) * 1.04
    longest = max(s.end_ms for s in led.segments if s.term in ("endpoint_ms", "asr_tail_ms"))
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("term", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column("source", style="dim", no_wrap=True)
    if show_sensitivity:
        table.add_column(f"-{led.step_ms:.0f}", justify="right", no_wrap=True)
    table.add_column("ms after the end of speech", no_wrap=True, overflow="crop")
    for s in led.segments:
        name = s.label + (" *" if s.critical and s.term in ("endpoint_ms", "asr_tail_ms") else "")
        row = [name, f"{s.duration_ms:.0f}", sources.get(s.term, "")]
        if show_sensitivity:
            gain = led.sensitivity_ms[s.term]
            row.append(Text(f"{gain:.0f}", style="bold" if gain else "dim"))
        slack_end = longest if s.slack_ms > 0 else None
        row.append(_bar(width, axis_ms, s.start_ms, s.end_ms, s.critical, slack_end))
        table.add_row(*row)
    total_row = ["total", Text(f"{led.total_ms:.0f}", style="bold"), ""]
    if show_sensitivity:
        total_row.append("")
    total_row.append(_bar(width, axis_ms, 0.0, led.total_ms, True, None))
    table.add_row(*total_row)
    axis_row = ["", "", ""] + ([""] if show_sensitivity else []) + [_axis(width, axis_ms)]
    table.add_row(*axis_row)
    legend = Text.assemble(
        (FULL, "bold cyan"), " critical  ", (SIDE, "yellow"), " parallel, not critical  ",
        (SLACK, "dim yellow"), " slack  ", (REF, "green"), f" {HUMAN_TURN_GAP_MS:.0f} ms human turn gap  ",
        (LIMIT_REF, "red"), f" {LIMIT_MS:,.0f} ms limit",
    )
    notes = [Text("* the critical one of the two parallel branches", style="dim")]
    if show_sensitivity:
        notes.append(Text(f"-{led.step_ms:.0f}: ms the total drops when that term drops by {led.step_ms:.0f} ms",
                          style="dim"))
    words = Text("\n".join(led.explain()))
    return Group(table, legend, *notes, Text(""), words)


def schedule_table(s: Schedule) -> Group:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col, just in (
        ("chunk", "right"), ("words", "right"), ("audio s", "right"), ("synth s", "right"),
        ("ready s", "right"), ("plays s", "right"), ("slack s", "right"), ("", "left"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for c in s.chunks:
        status = (
            Text(f"UNDERRUN: {c.underrun_s:.2f} s hole", style="bold red")
            if c.underrun_s > 0
            else Text("first audio" if c.slack_s is None else "ok", style="green")
        )
        table.add_row(
            str(c.index + 1), str(c.words), f"{c.audio_s:.2f}", f"{c.synth_s:.2f}", f"{c.ready_s:.2f}",
            f"{c.play_start_s:.2f}-{c.play_end_s:.2f}", "" if c.slack_s is None else f"{c.slack_s:+.2f}", status,
        )
    holes = s.underruns
    summary = (
        Text(f"safe: every chunk is ready before the previous one ends (first audio at {s.first_audio_s:.2f} s)",
             style="green")
        if not holes
        else Text(
            f"{len(holes)} underrun(s), {sum(c.underrun_s for c in holes):.2f} s of silence in total; "
            f"first after chunk {holes[0].index}: {holes[0].underrun_s:.2f} s hole",
            style="bold red",
        )
    )
    return Group(
        Text(f"RTF {s.rtf:g}, overhead {s.overhead_s * 1000:.0f} ms per chunk, {s.wpm:g} wpm "
             "(serial producer, playback starts at the first chunk)", style="dim"),
        table,
        summary,
    )
