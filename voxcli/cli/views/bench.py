"""Rich renderables for `voxcli bench`: the per-text metric table, a TTFA histogram, the history trend."""
from __future__ import annotations

import math
from typing import Any, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

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


def metrics_table(doc: dict[str, Any]) -> Table:
    """One block of rows per text: min/p50/p95/p99/max of every metric (plus cold and batch rows)."""
    table = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
    table.add_column("text", no_wrap=True)
    table.add_column("metric", no_wrap=True)
    for s in STATS:
        table.add_column(s, justify="right", no_wrap=True)
    for t in doc["texts"]:
        names = [t["name"], Text(f"{t['mode']}, {t['chars']} ch", style="dim")]
        for i, (metric, summary) in enumerate(t["summary"].items()):
            table.add_row(names[i] if i < len(names) else "", LABELS.get(metric, metric),
                          *(_fmt(summary[s], metric) for s in STATS))
        if "batch" in t:
            b = t["batch"]["ttfa_ms"]
            table.add_row("", "batch ms", *(_fmt(b[s], "ms") for s in STATS), style="magenta")
            ratio = t["batch"]["ratio_p50"]
            table.add_row("", "stream/batch", "", "-" if ratio is None else f"{ratio:.3f}", "", "", "",
                          style="magenta")
        if "cold" in t:
            c = t["cold"]["ttfa_ms"]
            table.add_row("", "cold TTFA ms", *(_fmt(c[s], "ms") for s in STATS), style="yellow")
        table.add_section()
    o = doc["overall"]
    for metric in ("ttfa_ms", "audible_ttfa_ms", "rtf", "underruns"):
        table.add_row("all texts" if metric == "ttfa_ms" else "", LABELS[metric], *(_fmt(o[metric][s], metric) for s in STATS),
                      style="bold")
    return table


def histogram(values: Sequence[float], bins: int = 10, width: int = 36, label: str = "TTFA ms") -> Group:
    """A horizontal-bar histogram of the values (one row per bin)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return Group(Text(f"{label}: no values"))
    lo, hi = min(vals), max(vals)
    if hi - lo < 1e-9:
        return Group(Text(f"{label}: all {len(vals)} runs at {lo:.1f}"))
    bins = max(1, min(bins, len(vals)))
    step = (hi - lo) / bins
    counts = [0] * bins
    for v in vals:
        counts[min(bins - 1, int((v - lo) / step))] += 1
    top = max(counts)
    rows = [Text(f"{label} histogram ({len(vals)} warm runs)", style="bold")]
    for i, c in enumerate(counts):
        a = lo + i * step
        bar = "█" * max(1 if c else 0, round(c / top * width))
        rows.append(Text.assemble(f"{a:8.1f}-{a + step:<8.1f} ", (bar, "cyan"), f" {c}"))
    return Group(*rows)


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


def history_table(entries: list[dict[str, Any]], metrics: Sequence[str]) -> Table:
    """Per metric: trend sparkline of p50, first/previous/latest p50 and p95, change vs previous."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col, just in (("metric", "left"), ("trend (p50)", "left"), ("first p50", "right"), ("prev p50", "right"),
                      ("latest p50", "right"), ("latest p95", "right"), ("change", "right")):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for m in metrics:
        p50s = [e["metrics"].get(m, {}).get("p50") for e in entries]
        known = [v for v in p50s if isinstance(v, (int, float))]
        if not known:
            continue
        latest = entries[-1]["metrics"].get(m, {})
        prev = known[-2] if len(known) > 1 else None
        change = ""
        if prev and isinstance(latest.get("p50"), (int, float)):
            pct = (latest["p50"] - prev) / prev * 100.0
            change = Text(f"{pct:+.0f}%", style="red" if pct > 10 else "green" if pct < -10 else "")
        table.add_row(
            LABELS.get(m, m), spark(p50s), _fmt(known[0], m), _fmt(prev, m), _fmt(latest.get("p50"), m),
            _fmt(latest.get("p95"), m), change,
        )
    return table
