"""Progress figures: throughput on audio seconds, ETA from the audio still to do (pure: a fake clock)."""
from __future__ import annotations

import json

from voxcli.corpus.progress import FileResult, Progress


def test_throughput_eta_and_the_plain_line(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("voxcli.corpus.progress.time.monotonic", lambda: now[0])
    p = Progress(total=4, todo_audio_s=3600.0, started=100.0)
    p.count(FileResult("s", "s.wav", "skipped"))
    assert p.eta_s is None  # nothing processed yet: no rate to extrapolate
    now[0] = 110.0
    p.count(FileResult("a", "a.wav", "done", audio_s=1200.0))
    assert p.throughput == 120.0 and p.eta_s == 20.0  # 2400 s of audio left at 120 audio-s/s
    now[0] = 111.0
    p.count(FileResult("b", "b.wav", "failed", error="bad"))
    assert p.line() == "3/4 files, 0.333 h audio, 109.1 audio-s/s, ETA 0:22, 1 failed, 1 skipped"
    ev = json.loads(p.to_json())
    assert ev["event"] == "progress" and ev["done"] == 1 and ev["failed"] == 1 and ev["skipped"] == 1
    assert json.loads(FileResult("a", "a.wav", "done", result=[object()]).to_json())["status"] == "done"


def test_eta_by_count_without_durations(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("voxcli.corpus.progress.time.monotonic", lambda: now[0])
    p = Progress(total=3, started=0.0)  # text items: no header durations
    now[0] = 10.0
    p.count(FileResult("x", "hello", "failed", error="nothing speakable"))
    assert p.eta_s == 20.0
