"""The TTFA benchmark runner behind `voxcli bench ttfa` (engine side: no rich, no typer).

Why this exists next to the streamer's own stats: CI needs a repeatable
number with a distribution (p50/p95), on a fixed text set that covers the
cases that behave differently (a short phrase is one block, a long sentence
is several vocoder blocks, a paragraph has sentence seams, and LLM-like
deltas exercise the text chunker's wait for a clause). Every figure is
computed with `voxcli.bench.metrics` so it means what `speak` reports.

Metrics per run, all from the moment the first text is handed over:
ttfa_ms (first audio chunk out), audible_ttfa_ms (first sample above -40 dBFS
on a simulated real-time player: leading silence is not audio to a
listener), rtf, max_gap_ms (longest wait between chunks), underruns and
underrun_ms (holes a real-time player would have heard), total_ms.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Final, Iterable, Iterator

import numpy as np

from voxcli.bench.metrics import chunk_gaps, summarize
from voxcli.tts.playback import PlaybackClock, rtf as rtf_of
from voxcli.errors import UsageError

#: A sample this loud or louder counts as audible (-40 dBFS).
AUDIBLE_DBFS: Final = -40.0
AUDIBLE_AMPLITUDE: Final = 10 ** (AUDIBLE_DBFS / 20.0)

#: Metrics reported per run, in display order; all but rtf/underruns are milliseconds.
METRICS: Final = ("ttfa_ms", "audible_ttfa_ms", "rtf", "max_gap_ms", "underruns", "underrun_ms", "total_ms")


@dataclass(frozen=True)
class BenchText:
    """One entry of the text set."""

    name: str
    text: str
    push: bool = False
    """Fed as small deltas at `delta_rate` per second, the way an LLM streams, instead of all at once."""


DEFAULT_TEXTS: Final = (
    BenchText("short", "Hello there."),
    BenchText("sentence", "The quick brown fox jumps over the lazy dog while the farmer watches from the porch."),
    BenchText(
        "paragraph",
        "Streaming speech starts talking before the whole answer exists. The first clause is spoken "
        "while the rest is still being synthesized. If each chunk is ready before the previous one "
        "ends, the listener never hears a gap.",
    ),
    BenchText(
        "llm-push",
        "Sure! The capital of France is Paris, which sits on the Seine. It has been the country's "
        "capital for most of the last thousand years. Would you like to know more about its history?",
        push=True,
    ),
)


def llm_deltas(text: str, max_chars: int = 4) -> list[str]:
    """Cut text into LLM-token-like deltas: words with their trailing space, long words split."""
    out: list[str] = []
    for piece in re.findall(r"\S+\s*|\s+", text):
        out.extend(piece[i : i + max_chars] for i in range(0, len(piece), max_chars))
    return out


@dataclass
class RunResult:
    ttfa_ms: float
    audible_ttfa_ms: float | None
    rtf: float
    max_gap_ms: float
    underruns: int
    underrun_ms: float
    total_ms: float
    audio_s: float
    chunks: int
    stats_ttfa_ms: float | None = None
    """The streamer's own StreamStats.ttfa_s, for cross-checking with `speak`."""

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def measure_stream(chunks: Iterable[Any], t0: float, clock: Callable[[], float] = time.perf_counter) -> RunResult:
    """Consume an AudioChunk iterator, timestamping each chunk on arrival (t0 = first text handed over)."""
    arrivals: list[float] = []
    durations: list[float] = []
    synth = 0.0
    first_audible: tuple[int, float] | None = None
    stats = None
    for ch in chunks:
        now = clock() - t0
        kind = getattr(ch, "kind", "audio")
        if kind == "cancelled":
            raise UsageError("the stream was cancelled during the benchmark")
        if ch.audio.size:
            if first_audible is None:
                loud = np.flatnonzero(np.abs(ch.audio) >= AUDIBLE_AMPLITUDE)
                if loud.size:
                    first_audible = (len(arrivals), float(loud[0]) / ch.sample_rate)
            arrivals.append(now)
            durations.append(ch.audio.size / ch.sample_rate)
            synth += float(getattr(ch, "synth_s", 0.0) or 0.0)
        if getattr(ch, "stats", None) is not None:
            stats = ch.stats
    total = clock() - t0
    if not arrivals:
        raise UsageError("the voice produced no audio for the benchmark text")
    player = PlaybackClock()
    audible = None
    for i, (t, d) in enumerate(zip(arrivals, durations)):
        player.add(t, d)
        if first_audible is not None and first_audible[0] == i:
            audible = (player.end_s - d + first_audible[1]) * 1000.0  # play start of that chunk + offset
    audio_s = sum(durations)
    gaps = chunk_gaps(arrivals)
    rtf = float(stats.rtf) if stats is not None and stats.rtf else rtf_of(synth or total, audio_s)
    return RunResult(
        ttfa_ms=arrivals[0] * 1000.0,
        audible_ttfa_ms=audible,
        rtf=rtf,
        max_gap_ms=max(gaps) * 1000.0 if gaps else 0.0,
        underruns=player.underruns,
        underrun_ms=player.underrun_s * 1000.0,
        total_ms=total * 1000.0,
        audio_s=audio_s,
        chunks=len(arrivals),
        stats_ttfa_ms=(stats.ttfa_s * 1000.0) if stats is not None and stats.ttfa_s is not None else None,
    )


def run_once(voice: Any, item: BenchText, delta_rate: float = 50.0) -> RunResult:
    """One warm run on an already-loaded voice: whole text at once, or paced deltas (push mode)."""
    import voxcli

    streamer = voxcli.open_tts_streamer(voice=voice)
    if not item.push:
        try:
            t0 = time.perf_counter()
            streamer.send(item.text)
            streamer.finish()
            return measure_stream(streamer.output, t0)
        finally:
            streamer.cancel()  # a no-op once the sentinel was delivered
    deltas = llm_deltas(item.text)
    t0 = time.perf_counter()
    stop = threading.Event()

    def feed() -> None:
        # Paced like an LLM: delta k is handed over at t0 + k / delta_rate.
        for k, d in enumerate(deltas):
            wait = t0 + k / delta_rate - time.perf_counter()
            if wait > 0 and stop.wait(wait):
                return
            streamer.send(d)
        streamer.finish()

    feeder = threading.Thread(target=feed, name="voxcli-bench-feed", daemon=True)
    feeder.start()
    try:
        return measure_stream(streamer.output, t0)
    finally:
        stop.set()
        streamer.cancel()
        feeder.join(timeout=5)


def run_batch(voice: Any, item: BenchText) -> float:
    """Milliseconds to synthesize the whole text at once: the first audio of a non-streaming TTS."""
    t0 = time.perf_counter()
    audio = voice.synthesize(item.text)
    ms = (time.perf_counter() - t0) * 1000.0
    if np.asarray(audio).size == 0:
        raise UsageError(f"the voice produced no audio for {item.name!r}")
    return ms


@dataclass
class TextReport:
    """All runs of one text, warm and (optionally) cold and batch."""

    item: BenchText
    runs: list[RunResult] = field(default_factory=list)
    batch_ms: list[float] = field(default_factory=list)
    cold_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, float]]:
        return summarize_runs(self.runs)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.item.name,
            "mode": "push" if self.item.push else "whole",
            "chars": len(self.item.text),
            "runs": [r.to_dict() for r in self.runs],
            "summary": self.summary(),
        }
        if self.batch_ms:
            b = summarize(self.batch_ms).to_dict()
            p50 = d["summary"]["ttfa_ms"]["p50"]
            d["batch"] = {"ttfa_ms": b, "ratio_p50": round(p50 / b["p50"], 4) if b["p50"] else None}
        if self.cold_ms:
            d["cold"] = {"ttfa_ms": summarize(self.cold_ms).to_dict(), "runs": [round(v, 3) for v in self.cold_ms]}
        return d


def summarize_runs(runs: list[RunResult]) -> dict[str, dict[str, float]]:
    """min/mean/p50/p95/p99/max of every metric over the runs (None values left out)."""
    out: dict[str, dict[str, float]] = {}
    for m in METRICS:
        values = [float(getattr(r, m)) for r in runs if getattr(r, m) is not None]
        out[m] = summarize(values).to_dict(digits=4 if m == "rtf" else 2)
    return out


def run_warm(
    voice: Any,
    texts: Iterable[BenchText],
    runs: int,
    warmup: int,
    *,
    batch: bool = False,
    delta_rate: float = 50.0,
    on_run: Callable[[BenchText, str, int, float], None] | None = None,
) -> list[TextReport]:
    """Warm-up runs (discarded), then `runs` measured runs per text; batch baseline interleaved."""
    reports: list[TextReport] = []
    for item in texts:
        rep = TextReport(item)
        for _ in range(warmup):
            run_once(voice, item, delta_rate)
        for i in range(runs):
            r = run_once(voice, item, delta_rate)
            rep.runs.append(r)
            if on_run:
                on_run(item, "warm", i, r.ttfa_ms)
            if batch:
                ms = run_batch(voice, item)
                rep.batch_ms.append(ms)
                if on_run:
                    on_run(item, "batch", i, ms)
        reports.append(rep)
    return reports


def iter_texts(text: str | None, file_text: str | None) -> Iterator[BenchText]:
    """The text set: one user text (whole), or the default set."""
    if text is not None or file_text is not None:
        t = (text if text is not None else file_text) or ""
        if not t.strip():
            raise UsageError("the benchmark text is empty")
        yield BenchText("custom", t.strip())
        return
    yield from DEFAULT_TEXTS


def run_cold(text: str, voice: str | None = None, timeout_s: float = 120.0) -> float:
    """Milliseconds from spawning `python -m voxcli speak TEXT --raw` to its first PCM byte.

    Includes interpreter start, imports and model load: what a shell user
    waits for on a one-off `voxcli speak`. Runs with the caller's environment
    (cache, offline flag) so it measures the same installation.
    """
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "voxcli", "speak", text, "--raw", "--quiet"]
    if voice:
        cmd += ["--voice", voice]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    first: list[float] = []
    try:
        assert proc.stdout is not None
        data = proc.stdout.read(1)  # blocks until the first PCM byte (or EOF)
        if data:
            first.append((time.perf_counter() - t0) * 1000.0)
        proc.stdout.read()  # drain so the child is not blocked on a full pipe
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise UsageError(f"cold run timed out after {timeout_s:.0f} s: {' '.join(cmd[2:4])} ...") from None
    if proc.returncode != 0 or not first:
        last = (err or b"").decode("utf-8", "replace").strip().splitlines()
        raise UsageError(
            "cold run failed (exit %d): %s" % (proc.returncode, last[-1] if last else "no audio on stdout")
        )
    return first[0]
