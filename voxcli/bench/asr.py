"""`bench asr` measurements: batch vs streaming WER, retractions, commit delay, end of speech -> final, RTF, memory.

Commit delay of a word = audio time of the caption where it became stable
minus audio time of the caption where it first appeared (stable or
volatile), by word position within its utterance. Measured with paced input
(speed 1 = real time) so skipped re-decodes show up as they would live;
speed 0 feeds unpaced in lockstep (every step decoded: the algorithm's own
delay, without CPU contention).
"""
from __future__ import annotations

import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from voxcli.asr.agreement import normalize_word
from voxcli.asr.streamer import ASREngine, ASRStreamer
from voxcli.asr.batch import transcribe_audio
from voxcli.bench.metrics import percentile
from voxcli.asr.endpointer import SAMPLE_RATE, FrameScorer, VADConfig
from voxcli.bench.wer import WER, word_errors
from voxcli.config import DEFAULT_ENDPOINT_MS
from voxcli.events import Caption, SpeculationEnd


def commit_delays(captions: Sequence[Caption]) -> list[float]:
    """Seconds of audio between a word's first appearance and its commit, per committed word.

    A word "appears" at the first caption whose word at the same position of
    the same utterance is that word (normalized), so a hallucinated longer
    hypothesis does not count as an early sighting of later words.
    """
    history: dict[int, list[tuple[float, list[str]]]] = {}
    committed: set[tuple[int, int]] = set()
    delays: list[float] = []
    for c in captions:
        stable = c.stable.split()
        words = [normalize_word(w) for w in stable + c.volatile.split()]
        history.setdefault(c.utterance, []).append((c.t_audio, words))
        for k in range(len(stable)):
            if (c.utterance, k) in committed:
                continue
            committed.add((c.utterance, k))
            first = next(t for t, ws in history[c.utterance] if len(ws) > k and ws[k] == words[k])
            delays.append(max(0.0, c.t_audio - first))
    return delays


def peak_rss_mb() -> float:
    """Peak resident memory of this process since start or since `reset_peak_rss` (Linux VmHWM)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss() -> bool:
    """Restart the peak at the current RSS (Linux: "5" > clear_refs), so each model gets its own peak."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


@dataclass
class FileResult:
    """One file's figures (text kept for the report)."""

    path: str
    audio_s: float
    batch: WER
    stream: WER
    retractions: int
    delays: list[float]
    worker_rtf: float
    batch_rtf: float
    max_lag_s: float
    skipped: int
    max_buffer_s: float
    batch_text: str = ""
    stream_text: str = ""
    emitted: WER | None = None
    """WER of the final captions as they were emitted (the stream a live viewer saw)."""
    final_delays: list[float] = field(default_factory=list)
    """End of speech -> final caption, seconds, per utterance (paced runs only)."""
    step_ms: int | None = None
    """The re-decode step the streamer ran at (the model's own when the config gives none)."""
    agreement: int | None = None
    """The LocalAgreement n it ran with (likewise)."""

    def to_dict(self) -> dict:
        return {
            "file": self.path, "audio_s": round(self.audio_s, 2),
            "batch_wer": round(self.batch.rate, 4), "stream_wer": round(self.stream.rate, 4),
            "ref_words": self.batch.ref_words, "retractions": self.retractions,
            "commit_delay_p50_s": _r(percentile(self.delays, 50)), "commit_delay_p95_s": _r(percentile(self.delays, 95)),
            "worker_rtf": round(self.worker_rtf, 3), "batch_rtf": round(self.batch_rtf, 3),
            "max_lag_s": round(self.max_lag_s, 2), "skipped_redecodes": self.skipped,
            "max_buffer_s": round(self.max_buffer_s, 2), "step_ms": self.step_ms, "agreement": self.agreement,
            "batch_text": self.batch_text, "stream_text": self.stream_text,
            "emitted_wer": round((self.emitted or self.stream).rate, 4),
            "final_delay_p50_s": _r(percentile(self.final_delays, 50)),
        }


def _r(v: float) -> float | None:
    return None if v != v else round(v, 3)


@dataclass
class BenchConfig:
    """How each file is streamed; the ASR defaults are the same ones `transcribe --live` uses."""

    speed: float = 1.0
    """Feed rate relative to real time (0 = lockstep: every step decoded before the next, no skips)."""
    step_ms: int | None = None
    """Re-decode step; None: each model's own (catalog `step_ms`, else DEFAULT_STEP_MS)."""
    agreement: int | None = None
    """LocalAgreement n; None: each model's own (catalog `agreement`, else DEFAULT_AGREEMENT)."""
    endpoint_ms: float = DEFAULT_ENDPOINT_MS
    chunk_s: float = 0.1
    """Size of each piece of audio sent to the streamer."""


def stream_file(model: ASREngine, vad: FrameScorer, audio: np.ndarray,
                cfg: BenchConfig) -> tuple[str, list[Caption], ASRStreamer, dict[int, float]]:
    """Feed one recording through a streamer, paced at cfg.speed; collect the captions and the speech ends."""
    s = ASRStreamer(model, vad, agreement=cfg.agreement, step_ms=cfg.step_ms,
                    vad_config=VADConfig(endpoint_ms=cfg.endpoint_ms), lockstep=cfg.speed == 0)
    caps: list[Caption] = []
    ends: dict[int, float] = {}  # utterance -> stream seconds of its last speech sample (confirmed endpoints)
    s.subscribe(lambda e: ends.__setitem__(e.utterance, e.speech_end) if isinstance(e, SpeculationEnd)
                and e.outcome == "confirmed" else None)
    reader = threading.Thread(target=lambda: caps.extend(s.captions), daemon=True)
    reader.start()
    n, t0 = int(cfg.chunk_s * SAMPLE_RATE), time.monotonic()
    for i in range(0, audio.size, n):
        if cfg.speed > 0:
            delay = t0 + i / SAMPLE_RATE / cfg.speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        s.send(audio[i : i + n])
    text = s.finish()
    reader.join(10)
    return text, caps, s, ends


def final_delays(captions: Sequence[Caption], speech_ends: dict[int, float], speed: float) -> list[float]:
    """Wall seconds from the end of speech to its final caption, per utterance with a confirmed endpoint.

    Paced input only (speed > 0): the last speech sample was sent `speech_end / speed`
    seconds after the start, on the clock the captions' `t_emit` uses.
    """
    if speed <= 0:
        return []
    return [max(0.0, c.t_emit - speech_ends[c.utterance] / speed)
            for c in captions if c.is_final and c.utterance in speech_ends]


def bench_file(model: ASREngine, vad: FrameScorer, path: str, audio: np.ndarray, reference: str, cfg: BenchConfig) -> FileResult:
    t = time.monotonic()
    batch = " ".join(u.text for u in transcribe_audio(model, vad, audio, VADConfig(endpoint_ms=cfg.endpoint_ms)))
    batch_s = time.monotonic() - t
    text, caps, s, ends = stream_file(model, vad, audio, cfg)
    audio_s = audio.size / SAMPLE_RATE
    emitted = " ".join(c.stable for c in caps if c.is_final)
    return FileResult(
        path=path, audio_s=audio_s, batch=word_errors(reference, batch), stream=word_errors(reference, text),
        emitted=word_errors(reference, emitted), final_delays=final_delays(caps, ends, cfg.speed),
        retractions=s.stats.retractions, delays=commit_delays(caps), worker_rtf=s.stats.rtf,
        batch_rtf=batch_s / audio_s if audio_s else 0.0, max_lag_s=s.stats.max_lag_s, skipped=s.stats.skipped,
        max_buffer_s=s.stats.max_buffer_s, batch_text=batch, stream_text=text.replace("\n", " "),
        step_ms=s.step * 1000 // SAMPLE_RATE, agreement=s.agreement.n,
    )


@dataclass
class BenchResult:
    files: list[FileResult] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    config: BenchConfig = field(default_factory=BenchConfig)

    def summary(self) -> dict:
        batch = sum((f.batch for f in self.files), WER(0, 0, 0, 0))
        stream = sum((f.stream for f in self.files), WER(0, 0, 0, 0))
        delays = [d for f in self.files for d in f.delays]
        emitted = sum((f.emitted or f.stream for f in self.files), WER(0, 0, 0, 0))
        finals = [d for f in self.files for d in f.final_delays]
        audio = sum(f.audio_s for f in self.files) or 1.0
        return {
            "event": "bench_asr", "files": len(self.files), "audio_s": round(audio, 2), "ref_words": batch.ref_words,
            "batch_wer": round(batch.rate, 4), "stream_wer": round(stream.rate, 4),
            "emitted_wer": round(emitted.rate, 4),
            "final_delay_p50_s": _r(percentile(finals, 50)), "final_delay_p95_s": _r(percentile(finals, 95)),
            "retractions": sum(f.retractions for f in self.files),
            "commit_delay_p50_s": _r(percentile(delays, 50)), "commit_delay_p95_s": _r(percentile(delays, 95)),
            "worker_rtf": round(sum(f.worker_rtf * f.audio_s for f in self.files) / audio, 3),
            "max_lag_s": round(max((f.max_lag_s for f in self.files), default=0.0), 2),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "speed": self.config.speed, "step_ms": next((f.step_ms for f in self.files if f.step_ms), self.config.step_ms), "agreement": next((f.agreement for f in self.files if f.agreement), self.config.agreement),
            "endpoint_ms": self.config.endpoint_ms,
        }


def run_bench(model: ASREngine, vad: FrameScorer, items: Iterable[tuple[str, np.ndarray, str]], cfg: BenchConfig,
              on_file: Callable[[FileResult], None] | None = None) -> BenchResult:
    """Bench each (path, 16 kHz audio, reference) in turn; `items` may be lazy, so only one file is in memory."""
    result = BenchResult(config=cfg)
    for path, audio, ref in items:
        fr = bench_file(model, vad, str(Path(path).name), audio, ref, cfg)
        result.files.append(fr)
        if on_file:
            on_file(fr)
    result.peak_rss_mb = peak_rss_mb()
    return result


@dataclass
class ModelRun:
    """One model's bench in a side-by-side comparison."""

    model: str
    load_s: float
    result: BenchResult
    peak_is_own: bool = True
    """False where the peak could not be reset between models (then it is the process's peak so far)."""

    def to_dict(self) -> dict:
        return {"model": self.model, "load_s": round(self.load_s, 2), "peak_is_own": self.peak_is_own,
                "summary": self.result.summary(), "files": [f.to_dict() for f in self.result.files]}


def run_models(models: Sequence[str], load: Callable[[str], tuple[ASREngine, FrameScorer]],
               items: Callable[[], Iterable[tuple[str, np.ndarray, str]]], cfg: BenchConfig,
               on_file: Callable[[str, FileResult], None] | None = None) -> list[ModelRun]:
    """Bench several models on the same recordings in one run, one model loaded at a time.

    `items()` is called once per model (a fresh, lazy pass over the files).
    The previous model is released before the next one loads, and the memory
    peak restarts, so each model's `peak_rss_mb` is its own (with the VAD
    and the interpreter, which every model carries alike).
    """
    import gc

    runs: list[ModelRun] = []
    for name in models:
        gc.collect()
        own = reset_peak_rss()
        t = time.monotonic()
        engine, vad = load(name)
        load_s = time.monotonic() - t
        callback = (lambda fr, _n=name: on_file(_n, fr)) if on_file else None
        result = run_bench(engine, vad, items(), cfg, on_file=callback)
        runs.append(ModelRun(getattr(engine, "name", name) or name, load_s, result, own))
        del engine, vad
    return runs
