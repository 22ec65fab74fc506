"""Bench runner metrics and report/history shapes, driven by scripted chunks and clocks (pure)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from voxcli.bench import report as bench_report
from voxcli.bench.ttfa import AUDIBLE_AMPLITUDE, BenchText, TextReport, llm_deltas, measure_stream
from voxcli.events import AudioChunk, StreamStats

SR = 1000  # 1 sample = 1 ms keeps the arithmetic readable


def _chunk(i, n, level=0.5, lead_silence=0):
    a = np.full(n, level, np.float32)
    a[:lead_silence] = 0.0
    return AudioChunk(a, SR, i, synth_s=0.01)


def _clock(times):
    it = iter(times)
    return lambda: next(it)


def test_measure_stream_ttfa_audible_gaps_underruns():
    # chunk 0 (200 ms, first 50 ms silent) at t=0.1; chunk 1 (100 ms) at 0.25 (in time);
    # chunk 2 (100 ms) at 0.6 although chunk 1 ends at 0.4: a 200 ms hole.
    stats = StreamStats(ttfa_s=0.099, rtf=0.2, audio_s=0.4, total_s=0.6, chunks=3, underruns=1)
    chunks = [_chunk(0, 200, lead_silence=50), _chunk(1, 100), _chunk(2, 100),
              AudioChunk(np.zeros(0, np.float32), SR, 3, is_final=True, kind="final", stats=stats)]
    r = measure_stream(chunks, t0=0.0, clock=_clock([0.1, 0.25, 0.6, 0.61, 0.62]))
    assert r.ttfa_ms == pytest.approx(100.0)
    assert r.audible_ttfa_ms == pytest.approx(150.0)  # play start of chunk 0 + 50 ms of leading silence
    assert r.max_gap_ms == pytest.approx(350.0)
    assert r.underruns == 1 and r.underrun_ms == pytest.approx(200.0)
    assert r.total_ms == pytest.approx(620.0)
    assert r.audio_s == pytest.approx(0.4) and r.chunks == 3
    assert r.rtf == 0.2 and r.stats_ttfa_ms == pytest.approx(99.0)


def test_audible_threshold_is_minus_40_dbfs():
    quiet = AUDIBLE_AMPLITUDE * 0.9
    chunks = [_chunk(0, 100, level=quiet), _chunk(1, 100, level=AUDIBLE_AMPLITUDE * 1.1)]
    r = measure_stream(chunks, t0=0.0, clock=_clock([0.05, 0.1, 0.2]))
    assert r.audible_ttfa_ms == pytest.approx(150.0)  # chunk 1 starts when chunk 0 ends (0.05 + 0.1)
    silent = measure_stream([_chunk(0, 100, level=0.0)], t0=0.0, clock=_clock([0.05, 0.1]))
    assert silent.audible_ttfa_ms is None


def test_llm_deltas_are_small_and_lossless():
    text = "Sure! The capital of France is Paris,  which sits on the Seine."
    d = llm_deltas(text)
    assert "".join(d) == text
    assert max(len(x) for x in d) <= 4 and len(d) > 15


def _report(name, ttfas):
    from voxcli.bench.ttfa import RunResult

    rep = TextReport(BenchText(name, "Hello there."))
    rep.runs = [RunResult(t, t + 5, 0.1, 20.0, 0, 0.0, t * 3, 1.0, 2) for t in ttfas]
    rep.batch_ms = [t * 4 for t in ttfas]
    return rep


def test_budgets_and_document_and_history(tmp_path):
    reports = [_report("a", [40.0, 50.0, 60.0]), _report("b", [100.0, 300.0])]
    overall = bench_report.summarize_runs([r for rep in reports for r in rep.runs])
    assert overall["ttfa_ms"]["p50"] == 60.0
    viol = bench_report.check_budgets(overall, max_p50_ms=100.0, max_p95_ms=200.0)
    assert [(v.stat, v.option) for v in viol] == [("p95", "--max-p95-ms")]
    assert "TTFA p95" in viol[0].message() and "> 200 ms" in viol[0].message()
    assert bench_report.check_budgets(overall, None, None) == []
    doc = bench_report.build_document(
        reports, voice="v", sample_rate=22050, runs=3, warmup=0, budgets={"max_p50_ms": 100.0, "max_p95_ms": 200.0},
        violations=viol, cold=False, compare="batch",
    )
    json.dumps(doc, allow_nan=False)  # strict JSON
    assert doc["schema"] == "voxcli.bench.ttfa/1" and not doc["budgets"]["ok"]
    assert doc["texts"][0]["batch"]["ratio_p50"] == pytest.approx(0.25)
    assert doc["compare"]["ratio_p50"] == {"a": 0.25, "b": 0.25}
    path = tmp_path / "h.jsonl"
    bench_report.append_history(bench_report.history_entry(doc), path)
    with open(path, "a") as f:
        f.write('{"torn": \n')
    bench_report.append_history(bench_report.history_entry(doc), path)
    entries = bench_report.read_history(path)
    assert len(entries) == 2 and entries[-1]["metrics"]["ttfa_ms"]["p50"] == 60.0
    assert bench_report.latest_metric("ttfa_ms", "p95", entries)[0] == overall["ttfa_ms"]["p95"]


def test_clean_turns_nan_into_null():
    assert bench_report.clean({"a": [math.nan, 1.0], "b": math.inf}) == {"a": [None, 1.0], "b": None}
