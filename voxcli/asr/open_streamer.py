"""`open_asr_streamer`: the library's entry point to streaming ASR, models resolved by name.

Kept apart from `voxcli.asr.streamer` (the streamer itself, which takes loaded models): resolving and
loading models by name is the cache's business (`voxcli.asr.models`).
"""
from __future__ import annotations

from voxcli.asr.endpointer import VADConfig
from voxcli.asr.models import load_asr, load_named
from voxcli.asr.streamer import ASRStreamer, HoldFrom
from voxcli.config import DEFAULT_ENDPOINT_MS
from voxcli.errors import UsageError


def open_asr_streamer(
    model: str | None = None,
    language: str = "en",
    agreement: int | None = None,
    step_ms: int | None = None,
    *,
    endpoint_ms: float = DEFAULT_ENDPOINT_MS,
    lockstep: bool = False,
    max_buffer_s: float = 20.0,
    max_pending_s: float = 10.0,
    offline: bool | None = None,
    threads: int | None = None,
    speculative: bool = True,
    hold_from: HoldFrom = "vad",
    tail_from_speech: bool = False,
    final_model: str | None = None,
) -> ASRStreamer:
    """The library entry point: resolve the models by name and start a streamer.

    `threads`: the model's intra-op threads (None: the session policy's). `step_ms`, `agreement` None: the model's.
    `tail_from_speech` (with hold_from="speech", as chat runs): the final's end pad counts from the last
    speech sample too, so the speculative final is ready ~a VAD decay earlier; its span then differs from
    `voxcli transcribe`'s, whose pad counts from the VAD's silence onset. `final_model`: a second recognizer for the
    finals and cuts (`ASRStreamer.final_model`: chat's two passes)."""
    if language not in ("en", "english"):
        raise UsageError(f"language {language!r} is not supported by {model or 'moonshine-tiny-en'} (English only)")
    asr, vad = load_asr(model, offline=offline, threads=threads)
    final = load_named(final_model, offline=offline, threads=threads) if final_model else None
    return ASRStreamer(
        asr, vad, agreement=agreement, step_ms=step_ms, vad_config=VADConfig(endpoint_ms=endpoint_ms),
        max_buffer_s=max_buffer_s, lockstep=lockstep, max_pending_s=max_pending_s, speculative=speculative,
        hold_from=hold_from, tail_from_speech=tail_from_speech, final_model=final)
