"""Fill ledger terms from this machine (`voxcli ledger --measured`).

Each term says where its number came from, because a ledger mixing
measured and assumed figures is only honest if the reader can tell them apart:

- TTS first audio: a quick warm TTFA measurement on the local voice (median of
  a few runs of one sentence), else the latest `voxcli bench` history entry.
- ASR tail: the streaming ASR's final commit, i.e. one decode of the whole
  utterance buffer (what the streamer runs at the endpoint), timed on real
  speech (beckett.wav, 10 s); median of 3. Skipped when the ASR is missing.
- Endpoint hold: the configured `[asr] endpoint_ms` (else `[ledger]`).
- LLM first token: median `llm_ttft_ms` of the last turns in chat's turn log.
"""
from __future__ import annotations

import importlib.util
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from voxcli.errors import VoxError

Note = Callable[[str], None]


@dataclass(frozen=True)
class Measurement:
    value_ms: float
    source: str
    """Short tag for the table: measured | bench history | config | turn log."""
    detail: str
    """One sentence: how it was obtained."""

    def to_dict(self) -> dict[str, Any]:
        return {"value_ms": round(self.value_ms, 2), "source": self.source, "detail": self.detail}


def measure_tts_first_audio(runs: int = 5, voice: str | None = None) -> Measurement:
    """Warm TTFA of one sentence on the local voice (1 warm-up, median of `runs`)."""
    import voxcli
    from voxcli.bench.ttfa import DEFAULT_TEXTS, run_once

    item = DEFAULT_TEXTS[1]
    v = voxcli.load_voice(voice)
    run_once(v, item)
    ttfa = [run_once(v, item).ttfa_ms for _ in range(runs)]
    return Measurement(statistics.median(ttfa), "measured",
                       f"median warm TTFA of {runs} runs of a {len(item.text)}-char sentence on this machine")


def tts_from_history() -> Measurement | None:
    from voxcli.bench.report import latest_metric

    found = latest_metric("ttfa_ms", "p50")
    if found is None:
        return None
    value, entry = found
    return Measurement(value, "bench history", f"TTFA p50 of the bench run at {entry.get('timestamp')}")


def measure_asr_tail(runs: int = 3, offline: bool | None = None) -> Measurement | None:
    """Time of the final decode of a 10 s real utterance (None when the ASR is not available)."""
    if importlib.util.find_spec("voxcli.asr.streamer") is None:
        return None
    from voxcli.audio.files import read_audio
    from voxcli.asr.models import load_asr
    from voxcli.hub.resolve import resolve_model

    model, _vad = load_asr(offline=offline)
    wav = resolve_model("speech-samples", kind="data", offline=offline).file("beckett.wav")
    audio, _ = read_audio(wav, rate=16000)
    model.transcribe(audio[:16000])  # warm-up: first call allocates
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        model.transcribe(audio)
        times.append((time.perf_counter() - t0) * 1000.0)
    return Measurement(statistics.median(times), "measured",
                       f"median of {runs} final decodes of a {audio.size / 16000:.1f} s utterance (beckett.wav)")


def llm_ttft_from_turn_log(last: int = 20) -> Measurement | None:
    if importlib.util.find_spec("voxcli.chat.turnlog") is None:
        return None
    from voxcli.chat.turnlog import read_turns

    values = [
        float(t["terms"]["llm_ttft_ms"])
        for t in read_turns(last=last)
        if isinstance(t.get("terms"), dict) and isinstance(t["terms"].get("llm_ttft_ms"), (int, float))
    ]
    if not values:
        return None
    return Measurement(statistics.median(values), "turn log", f"median LLM first token of the last {len(values)} chat turns")


def measure_terms(cfg: Any, on_note: Note = lambda s: None, offline: bool | None = None) -> dict[str, Measurement]:
    """Every term we can measure or read here; the others stay assumed (the caller marks them)."""
    out: dict[str, Measurement] = {}
    try:
        out["tts_first_audio_ms"] = measure_tts_first_audio(voice=cfg.tts.voice)
    except (VoxError, ImportError) as e:
        hist = tts_from_history()
        if hist is not None:
            out["tts_first_audio_ms"] = hist
        on_note(f"TTS first audio not measured ({e}); " + ("using the bench history" if hist else "assumed"))
    try:
        asr = measure_asr_tail(offline=offline)
        if asr is not None:
            out["asr_tail_ms"] = asr
        else:
            on_note("ASR tail assumed: the streaming ASR is not installed")
    except (VoxError, ImportError) as e:
        on_note(f"ASR tail assumed: {e}")
    endpoint = cfg.asr.endpoint_ms if cfg.asr.endpoint_ms is not None else cfg.ledger.endpoint_ms
    if endpoint is not None:
        section = "asr" if cfg.asr.endpoint_ms is not None else "ledger"
        out["endpoint_ms"] = Measurement(endpoint, "config", f"[{section}] endpoint_ms in {cfg.path}")
    llm = llm_ttft_from_turn_log()
    if llm is not None:
        out["llm_ttft_ms"] = llm
    else:
        on_note("LLM first token assumed: no chat turns logged yet (run `voxcli chat`)")
    return out
