"""What `voxcli bench` shows on stderr: the TTFA table and histogram, the history trend, the ASR summary.

Each display is built once as `grid.Grid` rows and text lines, then shown
with rich on a terminal or as plain aligned lines in pipes, CI and NO_COLOR
(`voxcli.cli.views.grid`), so `bench asr` has a plain view like the others.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from voxcli.cli.views.grid import Cell, Column, Grid, Part, show

LABELS = {
    "ttfa_ms": "TTFA ms",
    "audible_ttfa_ms": "audible ms",
    "rtf": "RTF",
    "max_gap_ms": "max gap ms",
    "underruns": "underruns",
    "underrun_ms": "underrun ms",
    "total_ms": "total ms",
    "cold_ttfa_ms": "cold TTFA ms",
}
STATS = ("min", "p50", "p95", "p99", "max")
SPARK = "▁▂▃▄▅▆▇█"


def _fmt(v: Any, metric: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if metric == "rtf":
        return f"{v:.3f}"
    if metric == "underruns":
        return f"{v:g}"
    return f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"


def _stat_row(grid: Grid, name: Cell, label: str, summary: dict[str, Any], metric: str, style: str = "") -> None:
    grid.add(name, label, *(_fmt(summary[s], metric) for s in STATS), style=style)


def metrics_grid(doc: dict[str, Any]) -> Grid:
    """One block of rows per text: min/p50/p95/p99/max of every metric (plus cold and batch rows)."""
    grid = Grid([Column("text"), Column("metric"), *(Column(s, "right") for s in STATS)])
    for t in doc["texts"]:
        names: list[Cell] = [t["name"], (f"{t['mode']}, {t['chars']} ch", "dim")]
        for i, (metric, summary) in enumerate(t["summary"].items()):
            _stat_row(grid, names[i] if i < len(names) else "", LABELS.get(metric, metric), summary, metric)
        if "batch" in t:
            _stat_row(grid, "", "batch ms", t["batch"]["ttfa_ms"], "ms", "magenta")
            ratio = t["batch"]["ratio_p50"]
            grid.add("", "stream/batch", "", "-" if ratio is None else f"{ratio:.3f}", style="magenta")
        if "cold" in t:
            _stat_row(grid, "", "cold TTFA ms", t["cold"]["ttfa_ms"], "ms", "yellow")
        grid.section()
    for metric in ("ttfa_ms", "audible_ttfa_ms", "rtf", "underruns"):
        _stat_row(grid, "all texts" if metric == "ttfa_ms" else "", LABELS[metric], doc["overall"][metric], metric,
                  "bold")
    return grid


def histogram(values: Sequence[float], bins: int = 10, width: int = 36, label: str = "TTFA ms") -> list[Cell]:
    """A horizontal-bar histogram of the values, one line per bin."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return [f"{label}: no values"]
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-9:
        return [f"{label}: all {len(vals)} runs at {lo:.1f}"]
    bins = max(1, min(bins, len(vals)))
    step = (hi - lo) / bins
    counts = [0] * bins
    for v in vals:
        counts[min(bins - 1, int((v - lo) / step))] += 1
    top = max(counts)
    lines: list[Cell] = [(f"{label} histogram ({len(vals)} warm runs)", "bold")]
    for i, c in enumerate(counts):
        a = lo + i * step
        bar = "█" * max(1 if c else 0, round(c / top * width))
        lines.append([(f"{a:8.1f}-{a + step:<8.1f} ", ""), (bar, "cyan"), (f" {c}", "")])
    return lines


def show_ttfa(doc: dict[str, Any], warm_ttfa_ms: Sequence[float], *, fancy: bool | None = None) -> None:
    """`bench ttfa`: a header line, the per-text table, the histogram of warm TTFA."""
    header = (f"bench ttfa voice {doc['voice']}, {doc['runs']} runs + {doc['warmup']} warm-up per text", "bold")
    show([header, metrics_grid(doc), *histogram(warm_ttfa_ms)], fancy=fancy)


def spark(values: Sequence[float | None]) -> str:
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    out = []
    for v in values:
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            out.append(" ")
        else:
            out.append(SPARK[0] if hi == lo else SPARK[round((v - lo) / (hi - lo) * (len(SPARK) - 1))])
    return "".join(out)


def history_grid(entries: list[dict[str, Any]], metrics: Sequence[str]) -> Grid:
    """Per metric: trend sparkline of p50, first/previous/latest p50 and p95, change vs previous."""
    grid = Grid([Column("metric"), Column("trend (p50)"), Column("first p50", "right"), Column("prev p50", "right"),
                 Column("latest p50", "right"), Column("latest p95", "right"), Column("change", "right")])
    for m in metrics:
        p50s = [e["metrics"].get(m, {}).get("p50") for e in entries]
        known = [v for v in p50s if isinstance(v, (int, float))]
        if not known:
            continue
        latest = entries[-1]["metrics"].get(m, {})
        prev = known[-2] if len(known) > 1 else None
        change: Cell = ""
        if prev and isinstance(latest.get("p50"), (int, float)):
            pct = (latest["p50"] - prev) / prev * 100.0
            change = (f"{pct:+.0f}%", "red" if pct > 10 else "green" if pct < -10 else "")
        grid.add(LABELS.get(m, m), spark(p50s), _fmt(known[0], m), _fmt(prev, m), _fmt(latest.get("p50"), m),
                 _fmt(latest.get("p95"), m), change)
    return grid


def show_history(entries: list[dict[str, Any]], metrics: Sequence[str], where: str, *,
                 fancy: bool | None = None) -> None:
    """`bench history`: how many runs over which dates, then the trend table."""
    header = [(f"bench history: {len(entries)} run(s)", "bold"),
              (f", {entries[0]['timestamp']} .. {entries[-1]['timestamp']} ({where})", "")]
    show([header, history_grid(entries, metrics)], fancy=fancy)


def asr_file_line(d: dict[str, Any]) -> str:
    """One line per recording as `bench asr` finishes it (the same in both views)."""
    return (f"{d['file']}: {d['audio_s']:.1f} s  batch WER {d['batch_wer']:.1%}  stream WER {d['stream_wer']:.1%}  "
            f"retractions {d['retractions']}  delay p50 {d['commit_delay_p50_s']} s  RTF {d['worker_rtf']:.2f}")


def asr_summary_parts(s: dict[str, Any], model: str) -> list[Part]:
    """`bench asr`: a title line (what ran, with which settings) and one row per metric."""
    grid = Grid([Column("metric"), Column("value", "right")])
    rows = [
        ("batch WER", f"{s['batch_wer']:.1%}"), ("streaming WER", f"{s['stream_wer']:.1%}"),
        *([("WER as emitted", f"{s['emitted_wer']:.1%}")] if "emitted_wer" in s else []),
        ("retractions", str(s["retractions"])),
        ("commit delay p50", f"{s['commit_delay_p50_s']} s"), ("commit delay p95", f"{s['commit_delay_p95_s']} s"),
        *([("speech end -> final p50", f"{s['final_delay_p50_s']} s"), ("speech end -> final p95",
            f"{s['final_delay_p95_s']} s")] if s.get("final_delay_p50_s") is not None else []),
        ("worker RTF", f"{s['worker_rtf']:.2f}"), ("max lag", f"{s['max_lag_s']:.1f} s"),
        ("peak memory", f"{s['peak_rss_mb']:.0f} MB"),
    ]
    for k, v in rows:
        grid.add(k, (v, "bold red") if k == "retractions" and s["retractions"] else v)
    title = (f"bench asr: {s['files']} file(s), {s['audio_s']:.1f} s, {s['ref_words']} words", "bold")
    settings = (f"model {model}, endpoint {s['endpoint_ms']:g} ms, step {s['step_ms']} ms, "
                f"agreement {s['agreement']}, speed {s['speed']:g}", "dim")
    return [title, settings, grid]


def show_asr(summary: dict[str, Any], model: str, *, fancy: bool | None = None) -> None:
    show(asr_summary_parts(summary, model), fancy=fancy)


def asr_compare_parts(runs: Sequence[tuple[str, float, dict[str, Any]]]) -> list[Part]:
    """`bench asr -m A -m B`: one row per model, the same metrics as the single-model view."""
    grid = Grid([Column("model"), Column("batch WER", "right"), Column("stream WER", "right"),
                 Column("retract", "right"), Column("delay p50", "right"), Column("final p50", "right"),
                 Column("RTF", "right"), Column("step", "right"), Column("n", "right"),
                 Column("max lag", "right"), Column("peak MB", "right"), Column("load s", "right")])
    for model, load_s, s in runs:  # step and LocalAgreement n are each model's own unless given
        grid.add(model, f"{s['batch_wer']:.1%}", f"{s['stream_wer']:.1%}",
                 (str(s["retractions"]), "bold red") if s["retractions"] else "0",
                 f"{s['commit_delay_p50_s']} s", f"{s.get('final_delay_p50_s')} s", f"{s['worker_rtf']:.2f}",
                 f"{s['step_ms']} ms", str(s["agreement"]), f"{s['max_lag_s']:.1f} s",
                 f"{s['peak_rss_mb']:.0f}", f"{load_s:.1f}")
    s = runs[0][2]
    title = (f"bench asr: {len(runs)} models, {s['files']} file(s), {s['audio_s']:.1f} s, {s['ref_words']} words", "bold")
    settings = (f"endpoint {s['endpoint_ms']:g} ms, speed {s['speed']:g}", "dim")
    return [title, settings, grid]


def show_asr_compare(runs: Sequence[tuple[str, float, dict[str, Any]]], *, fancy: bool | None = None) -> None:
    show(asr_compare_parts(runs), fancy=fancy)
