"""The bench JSON document, budget checks and the JSON-lines history.

Kept apart from the runner so a CI script, the CLI and `voxcli ledger
--measured` read and write the same shapes (schema `voxcli.bench.ttfa/1`,
documented in docs/bench.md).
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Iterable

from voxcli.bench.ttfa import TextReport, summarize_runs
from voxcli.bench.metrics import summarize

SCHEMA: Final = "voxcli.bench.ttfa/1"
HISTORY_SCHEMA: Final = "voxcli.bench.history/1"
#: Metrics kept per history entry (p50 and p95 of each).
HISTORY_METRICS: Final = ("ttfa_ms", "audible_ttfa_ms", "rtf", "max_gap_ms", "underrun_ms", "total_ms")


def clean(value: Any) -> Any:
    """NaN/inf -> None recursively, so the document is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


@dataclass(frozen=True)
class Violation:
    metric: str
    stat: str
    value_ms: float
    limit_ms: float
    option: str

    def message(self) -> str:
        return (
            f"budget exceeded: TTFA {self.stat} {self.value_ms:.1f} ms > {self.limit_ms:g} ms "
            f"({self.option}; metric {self.metric}.{self.stat})"
        )


def check_budgets(overall: dict[str, dict[str, Any]], max_p50_ms: float | None, max_p95_ms: float | None) -> list[Violation]:
    """Compare the pooled warm TTFA p50/p95 with the budgets (None = no budget)."""
    out = []
    for stat, limit, option in (("p50", max_p50_ms, "--max-p50-ms"), ("p95", max_p95_ms, "--max-p95-ms")):
        value = overall.get("ttfa_ms", {}).get(stat)
        if limit is not None and value is not None and math.isfinite(value) and value > limit:
            out.append(Violation("ttfa_ms", stat, float(value), float(limit), option))
    return out


def build_document(
    reports: list[TextReport],
    *,
    voice: str,
    sample_rate: int | None,
    runs: int,
    warmup: int,
    budgets: dict[str, float | None],
    violations: list[Violation],
    cold: bool,
    compare: str | None,
) -> dict[str, Any]:
    """The one JSON document `voxcli bench ttfa --json` prints."""
    from voxcli import __version__

    all_runs = [r for rep in reports for r in rep.runs]
    overall: dict[str, Any] = summarize_runs(all_runs)
    cold_ms = [v for rep in reports for v in rep.cold_ms]
    batch_ms = [v for rep in reports for v in rep.batch_ms]
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "voxcli_version": __version__,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "voice": voice,
        "sample_rate": sample_rate,
        "runs": runs,
        "warmup": warmup,
        "texts": [rep.to_dict() for rep in reports],
        "overall": overall,
    }
    if compare == "batch" and batch_ms:
        ratios = [t["batch"]["ratio_p50"] for t in doc["texts"] if t.get("batch") and t["batch"]["ratio_p50"]]
        doc["compare"] = {
            "baseline": "batch",
            "batch_ttfa_ms": summarize(batch_ms).to_dict(),
            "ratio_p50": {t["name"]: t["batch"]["ratio_p50"] for t in doc["texts"] if t.get("batch")},
            "ratio_p50_max": max(ratios) if ratios else None,
        }
    if cold:
        doc["cold"] = {"ttfa_ms": summarize(cold_ms).to_dict(), "runs": len(cold_ms)}
    doc["budgets"] = {
        **{k: v for k, v in budgets.items()},
        "ok": not violations,
        "violations": [
            {"metric": v.metric, "stat": v.stat, "value_ms": round(v.value_ms, 2), "limit_ms": v.limit_ms,
             "option": v.option}
            for v in violations
        ],
    }
    return clean(doc)


def history_entry(doc: dict[str, Any]) -> dict[str, Any]:
    """A compact line for the history: p50/p95 per metric, cold and batch ratio if measured."""
    entry: dict[str, Any] = {
        "schema": HISTORY_SCHEMA,
        "timestamp": doc["timestamp"],
        "voxcli_version": doc["voxcli_version"],
        "voice": doc["voice"],
        "texts": [t["name"] for t in doc["texts"]],
        "runs": doc["runs"],
        "metrics": {m: {s: doc["overall"][m][s] for s in ("p50", "p95")} for m in HISTORY_METRICS},
        "budgets_ok": doc["budgets"]["ok"],
    }
    if "cold" in doc:
        entry["metrics"]["cold_ttfa_ms"] = {s: doc["cold"]["ttfa_ms"][s] for s in ("p50", "p95")}
    if "compare" in doc:
        entry["batch_ratio_p50"] = doc["compare"]["ratio_p50_max"]
    return entry


def append_history(entry: dict[str, Any], path: Path | None = None) -> Path:
    """Append one JSON line (O_APPEND: concurrent benches never interleave a line)."""
    from voxcli.config import bench_history_path

    from voxcli.fsutil import append_line

    return append_line(path or bench_history_path(), json.dumps(clean(entry), ensure_ascii=False))


def read_history(path: Path | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """History entries, oldest first; lines that are not valid entries (a torn write) are skipped."""
    from voxcli.config import bench_history_path

    from voxcli.fsutil import read_records

    return read_records(path or bench_history_path(),
                        lambda e: e.get("schema") == HISTORY_SCHEMA and isinstance(e.get("metrics"), dict), limit)


def latest_metric(metric: str, stat: str = "p50", entries: Iterable[dict[str, Any]] | None = None) -> tuple[float, dict] | None:
    """The newest history value of metric.stat, with its entry (for `ledger --measured`)."""
    for e in reversed(list(entries if entries is not None else read_history())):
        v = e["metrics"].get(metric, {}).get(stat)
        if isinstance(v, (int, float)):
            return float(v), e
    return None
