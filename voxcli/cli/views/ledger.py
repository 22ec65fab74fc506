"""What `voxcli ledger` shows on stderr: the turn waterfall, the experiments, the frontier, the schedule.

The waterfall puts every term on one time axis that starts at the end of the
user's speech, so the eye sees what runs in parallel (endpoint hold and ASR
tail), which branch is critical, how much slack the other one has, and where
the total lands against a human turn gap and the limit. The bars are made of
characters (filled, shaded, dotted), so the plain view shows the same picture
without colour (`voxcli.cli.views.grid`).
"""
from __future__ import annotations

from typing import Any, Sequence

from voxcli.bench.ledger import HUMAN_TURN_GAP_MS, LABELS, LIMIT_MS, Ledger
from voxcli.bench.ledger_schedule import Schedule
from voxcli.cli.views.grid import Cell, Column, Grid, Part, Styled, show, terminal_width

FULL, SIDE, SLACK, REF, LIMIT_REF = "█", "▒", "·", "┊", "│"


def _bar(width: int, axis_ms: float, start: float, end: float, critical: bool, slack_end: float | None) -> list[Styled]:
    # One row: cells left of the segment blank, the segment filled, slack dotted, reference lines where blank.
    def col(ms: float) -> int:
        return max(0, min(width, round(ms / axis_ms * width)))

    cells: list[Styled] = [(" ", "")] * width
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
    return cells


def _axis(width: int, axis_ms: float) -> Styled:
    step = 200.0 if axis_ms <= 2400 else 500.0
    line = [" "] * (width + 6)
    t = 0.0
    while t <= axis_ms:
        i = round(t / axis_ms * width)
        label = f"{t:.0f}"
        if i + len(label) <= len(line) and all(c == " " for c in line[max(0, i - 1) : i + len(label)]):
            line[i : i + len(label)] = list(label)
        t += step
    return ("".join(line).rstrip() + " ms", "dim")


def waterfall(led: Ledger, sources: dict[str, str], width: int = 60, show_sensitivity: bool = False) -> list[Part]:
    """The ledger as a table of bars on a shared axis, a legend, then the explanation in words."""
    axis_ms = max(led.total_ms, LIMIT_MS) * 1.04
    longest = max(s.end_ms for s in led.segments if s.term in ("endpoint_ms", "asr_tail_ms"))
    columns = [Column("term"), Column("ms", "right"), Column("source", style="dim")]
    if show_sensitivity:
        columns.append(Column(f"-{led.step_ms:.0f}", "right"))
    grid = Grid([*columns, Column("ms after the end of speech")])
    for s in led.segments:
        name = s.label + (" *" if s.critical and s.term in ("endpoint_ms", "asr_tail_ms") else "")
        row: list[Cell] = [name, f"{s.duration_ms:.0f}", sources.get(s.term, "")]
        if show_sensitivity:
            gain = led.sensitivity_ms[s.term]
            row.append((f"{gain:.0f}", "bold" if gain else "dim"))
        row.append(_bar(width, axis_ms, s.start_ms, s.end_ms, s.critical, longest if s.slack_ms > 0 else None))
        grid.add(*row)
    pad: list[Cell] = [""] if show_sensitivity else []
    grid.add("total", (f"{led.total_ms:.0f}", "bold"), "", *pad, _bar(width, axis_ms, 0.0, led.total_ms, True, None))
    grid.add("", "", "", *pad, _axis(width, axis_ms))
    legend: Cell = [
        (FULL, "bold cyan"), (" critical  ", ""), (SIDE, "yellow"), (" parallel, not critical  ", ""),
        (SLACK, "dim yellow"), (" slack  ", ""), (REF, "green"), (f" {HUMAN_TURN_GAP_MS:.0f} ms human turn gap  ", ""),
        (LIMIT_REF, "red"), (f" {LIMIT_MS:,.0f} ms limit", ""),
    ]
    notes: list[Part] = [("* the critical one of the two parallel branches", "dim")]
    if show_sensitivity:
        notes.append((f"-{led.step_ms:.0f}: ms the total drops when that term drops by {led.step_ms:.0f} ms", "dim"))
    return [grid, legend, *notes, "", *led.explain()]


def knob_lines(knobs: dict[str, Any], derivation: dict[str, Any]) -> list[Part]:
    """The knobs in one line, then how they made the ASR tail and the TTS first audio."""
    w = knobs["first_chunk_words"]
    a, t = derivation["asr_tail_parts"], derivation["tts_first_audio_parts"]
    return [
        (f"knobs: chunk {knobs['chunk_ms']:.0f} ms, agreement {knobs['agreement']}, first chunk {w} "
         f"word{'s' if w != 1 else ''}, hold {knobs['endpoint_ms']:.0f} ms, network {knobs['network']}", ""),
        (f"ASR tail {sum(a.values()):.0f} = {a['chunk_ms']:.0f} chunk + {a['stability_ms']:.0f} stability "
         f"(n-1 chunks) + {a['compute_ms']:.0f} compute; TTS first audio "
         f"{t['overhead_ms'] + t['synthesis_ms']:.0f} = {t['overhead_ms']:.0f} overhead + "
         f"{t['synthesis_ms']:.0f} synthesis of {t['audio_ms']:.0f} ms of audio", "dim"),
    ]


def show_ledger(led: Ledger, sources: dict[str, str], details: dict[str, dict[str, Any]], preset: str, *,
                sensitivity: bool = False, fancy: bool | None = None, knobs: dict[str, Any] | None = None,
                derivation: dict[str, Any] | None = None, turns: dict[str, Any] | None = None) -> None:
    """`voxcli ledger`: title, knobs, waterfall sized to the terminal, then how each measured term was measured."""
    fixed = 36 + max(len(v) for v in sources.values()) + (6 if sensitivity else 0)
    width = max(24, min(72, terminal_width() - fixed))
    parts: list[Part] = [[("Turn latency", "bold"), (f", preset {preset}", "")]]
    if knobs is not None and derivation is not None:
        parts += knob_lines(knobs, derivation)
    parts += waterfall(led, sources, width=width, show_sensitivity=sensitivity)
    names = {**LABELS, "asr_start_ms": "ASR start", "endpoint_start_ms": "hold start"}
    parts += [(f"{names.get(t, t)}: {d['value_ms']:.0f} ms, {d['detail']}", "dim")
              for t, d in details.items()]
    if turns is not None:
        parts.append(f"Chat turns measured (turn log, median of {turns['turns']}): {turns['total_ms_p50']:.0f} ms; "
                     f"this ledger predicts {turns['predicted_ms']:.0f} ms"
                     + ("." if turns["prediction_error_pct"] is None else f" ({turns['prediction_error_pct']:+.1f} %)."))
    show(parts, fancy=fancy)


def show_experiments(runs: Sequence[Any], *, fancy: bool | None = None) -> None:
    """`voxcli ledger experiments`: one row per experiment, the claim and what the instrument gives."""
    grid = Grid([Column("#", "right"), Column("experiment"), Column("result"), Column("")])
    for i, e in enumerate(runs, 1):
        f = e.figures
        if "added_ms" in f:
            result = f"{f['total_ms_1_word']:.0f} -> {f['total_ms_12_words']:.0f} ms (+{f['added_ms']:.0f})"
        elif "asr_tail_parts" in f:
            p = f["asr_tail_parts"]
            result = (f"tail {p['chunk_ms']:.0f} + {p['stability_ms']:.0f} + {p['compute_ms']:.0f} ms; "
                      f"total {f['total_ms']:.0f} ms")
        elif "total_ms_by_chunk_ms_hold_250" in f:
            a, b = f["total_ms_by_chunk_ms_hold_250"], f["total_ms_by_chunk_ms_hold_500"]
            result = (f"hold 250: {' '.join(f'{v:.0f}' for v in a.values())}; "
                      f"hold 500: {min(b.values()):.0f}-{max(b.values()):.0f} ms")
        else:
            result = f"total {f['total_ms']:.0f} ms"
        grid.add(str(i), e.name, result, ("holds", "green") if e.holds else ("DOES NOT HOLD", "bold red"))
    notes: list[Part] = [(f"{i}. {e.claim}", "dim") for i, e in enumerate(runs, 1)]
    show([("The seed's four experiments on the ledger", "bold"), grid, *notes], fancy=fancy)


def show_frontier(points: Sequence[Any], info: dict[str, Any], *, fancy: bool | None = None) -> None:
    """`voxcli ledger frontier`: one row per (n, chunk), frontier points starred."""
    grid = Grid([Column("n", "right"), Column("chunk ms", "right"), Column("turn ms", "right"),
                 Column("commit delay ms", "right"), Column("flicker /100 w", "right"), Column("retracted", "right"),
                 Column("")])
    for p in points:
        grid.add(str(p.agreement), f"{p.chunk_ms:.0f}", f"{p.turn_ms:.0f}", f"{p.commit_delay_ms:.0f}",
                 (f"{p.flicker:.1f}", "bold" if p.flicker else "green"), str(p.retracted),
                 ("*", "bold cyan") if p.pareto else "")
    head: Part = (f"Latency vs flicker: {info['decodes']} re-decodes of {info['audio']} ({info['audio_s']} s) "
                  f"every {info['grid_ms']:g} ms, {info['decode_s']} s of decoding", "dim")
    notes: list[Part] = ["* on the frontier: no other point has both a shorter turn and less flicker",
                         ("flicker: stable words later retracted per 100 final words (LocalAgreement-n as the "
                          "seed writes it, on the recognizer's real hypotheses)", "dim")]
    show([head, grid, *notes], fancy=fancy)


def schedule_parts(s: Schedule) -> list[Part]:
    """The chunk schedule: assumptions, one row per chunk, the verdict."""
    grid = Grid([Column("chunk", "right"), Column("words", "right"), Column("audio s", "right"),
                 Column("synth s", "right"), Column("ready s", "right"), Column("plays s", "right"),
                 Column("slack s", "right"), Column("")])
    for c in s.chunks:
        status: Cell = (
            (f"UNDERRUN: {c.underrun_s:.2f} s hole", "bold red") if c.underrun_s > 0
            else ("first audio" if c.slack_s is None else "ok", "green")
        )
        grid.add(str(c.index + 1), str(c.words), f"{c.audio_s:.2f}", f"{c.synth_s:.2f}", f"{c.ready_s:.2f}",
                 f"{c.play_start_s:.2f}-{c.play_end_s:.2f}", "" if c.slack_s is None else f"{c.slack_s:+.2f}", status)
    holes = s.underruns
    summary: Cell = (
        (f"safe: every chunk is ready before the previous one ends (first audio at {s.first_audio_s:.2f} s)", "green")
        if not holes
        else (f"{len(holes)} underrun(s), {sum(c.underrun_s for c in holes):.2f} s of silence in total; "
              f"first after chunk {holes[0].index}: {holes[0].underrun_s:.2f} s hole", "bold red")
    )
    head: Cell = (f"RTF {s.rtf:g}, overhead {s.overhead_s * 1000:.0f} ms per chunk, {s.wpm:g} wpm "
                  "(serial producer, playback starts at the first chunk)", "dim")
    return [head, grid, summary]


def show_schedule(s: Schedule, *, fancy: bool | None = None) -> None:
    show(schedule_parts(s), fancy=fancy)
