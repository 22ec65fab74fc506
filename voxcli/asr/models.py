"""Which recognizer a model name means, and loading it with the VAD.

One place decides how a bundle becomes an `ASREngine` (today Moonshine, by
the bundle's kind), so adding a runtime touches this file and the catalog,
never the streamer: the streamer only calls `transcribe(audio, prompt)`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voxcli.asr.endpointer import FrameScorer
    from voxcli.asr.streamer import ASREngine


def load_asr(model: str | None = None, *, offline: bool | None = None,
             threads: int | None = None) -> tuple["ASREngine", "FrameScorer"]:
    """Resolve and load the ASR model and the VAD (both through the registry)."""
    from voxcli.hub.resolve import resolve_model
    from voxcli.runtimes.moonshine import MoonshineASR
    from voxcli.runtimes.silero_vad import SileroVAD

    bundle = resolve_model(model or "moonshine-tiny-en", kind="asr", offline=offline)
    return MoonshineASR.load(bundle.path, name=bundle.name, threads=threads), SileroVAD.resolve(offline=offline)
