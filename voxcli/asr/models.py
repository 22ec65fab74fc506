"""Which recognizer a model name means, and loading it with the VAD.

One place decides how a bundle becomes an `ASREngine`, so adding a runtime
touches this file and the catalog, never the streamer: the streamer only
calls `transcribe(audio, prompt)`. The catalog entry says which runtime
(`runtime = "moonshine" | "whisper-ct2"`); a model pulled from a URL or a
path has no entry, so its files decide (`model.bin` -> CTranslate2 Whisper,
`.ort` graphs -> Moonshine).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from voxcli.errors import UsageError

if TYPE_CHECKING:
    from voxcli.asr.endpointer import FrameScorer
    from voxcli.asr.engine import ASREngine
    from voxcli.hub.resolve import ModelBundle

DEFAULT_ASR: Final = "moonshine-tiny-en"
"""The fast tier: real time with room to spare on 2 cores; the default wherever the accurate tier is not."""
ACCURATE_ASR: Final = "moonshine-base-en"
"""The accurate tier (issue 16: batch WER -31 % on human speech, streamed within 1 point of it)."""
RUNTIMES: Final = ("moonshine", "whisper-ct2")


def runtime_of(bundle: "ModelBundle") -> str:
    """The runtime a bundle needs: the catalog's `runtime`, else guessed from its files."""
    declared = bundle.entry.extra.get("runtime") if bundle.entry is not None else None
    if declared:
        if declared not in RUNTIMES:
            raise UsageError(f"{bundle.name}: unknown ASR runtime {declared!r} (known: {', '.join(RUNTIMES)})")
        return str(declared)
    names = set(bundle.files)
    if "model.bin" in names or "model.bin.part1" in names:
        return "whisper-ct2"
    return "moonshine"


def load_engine(bundle: "ModelBundle", *, threads: int | None = None) -> "ASREngine":
    """The `ASREngine` of a resolved ASR bundle.

    The catalog's `step_ms` becomes the engine's `step_ms`: the re-decode interval the streamer
    uses when its caller gives none (a slower model re-decodes less often to keep real time);
    its `agreement` likewise the LocalAgreement n (a model that commits words heard late in a
    short buffer waits for one more hypothesis).
    """
    engine = _load_engine(bundle, threads)
    for key in ("step_ms", "agreement"):
        value = bundle.entry.extra.get(key) if bundle.entry is not None else None
        if value is not None:
            setattr(engine, key, int(value))
    return engine


def _load_engine(bundle: "ModelBundle", threads: int | None) -> "ASREngine":
    if runtime_of(bundle) == "whisper-ct2":
        try:
            import ctranslate2  # noqa: F401
        except ImportError:
            raise UsageError(
                f"{bundle.name} needs the CTranslate2 runtime, which is not installed",
                hint="pip install 'voxcli[whisper]'",
            ) from None
        from voxcli.runtimes.whisper_ct2 import WhisperCT2
        from voxcli.runtimes.whisper_parts import model_dir

        return WhisperCT2.load(model_dir(bundle.path, bundle.derived_dir), name=bundle.name, threads=threads)
    from voxcli.runtimes.moonshine import MoonshineASR
    from voxcli.runtimes.moonshine_int8 import DERIVE_KEY

    derive = bundle.entry.extra.get("derive") if bundle.entry is not None else None
    if derive not in (None, DERIVE_KEY):
        raise UsageError(f"{bundle.name}: unknown derive {derive!r} in the catalog (known: {DERIVE_KEY})")
    int8_dir = bundle.derived_dir if derive == DERIVE_KEY else None
    return MoonshineASR.load(bundle.path, name=bundle.name, threads=threads, int8_dir=int8_dir)


def load_named(model: str, *, offline: bool | None = None, threads: int | None = None) -> "ASREngine":
    """Resolve and load one ASR model by name, without a VAD (a second pass's: `ASRStreamer.final_model`)."""
    from voxcli.hub.resolve import resolve_model

    return load_engine(resolve_model(model, kind="asr", offline=offline), threads=threads)


def load_asr(model: str | None = None, *, offline: bool | None = None,
             threads: int | None = None) -> tuple["ASREngine", "FrameScorer"]:
    """Resolve and load the ASR model and the VAD (both through the registry)."""
    from voxcli.runtimes.silero_vad import SileroVAD

    return load_named(model or default_asr(), offline=offline, threads=threads), SileroVAD.resolve(offline=offline)


def chat_asr(configured: str | None = None) -> str:
    """The recognizer `voxcli chat` runs, and so what the ledger and the chat benchmarks measure: the one
    configured, else the fast tier (the turn's budget, issue 13, shares 2 cores with the LLM and the voice)."""
    return configured or DEFAULT_ASR


NO_FINAL: Final = ("none", "off")
"""`chat.final_asr` values that turn the second pass off."""


def chat_final_asr(configured: str | None, chat_model: str) -> str | None:
    """The recognizer that decodes the finals of chat's utterances (`ASRStreamer.final_model`), or None.

    Why: the fast tier mishears a barging-in user's first words rebuilt from under the echo ("It was best at
    times"); the accurate tier, decoding only each utterance's final inside the endpoint hold, hears them
    (issue 14: WER 0.135 -> 0.016 over 16 interleaved barge-ins through the room fixture, README "Two
    passes"). Unset: the accurate tier where it is this machine's default recognizer (installed and timed
    live: `default_asr`) and chat runs the fast one; "none" (or "off", or chat's own model) turns it off; any
    other value names the model.
    """
    if configured is not None:
        name = configured.strip()
        return None if not name or name.lower() in NO_FINAL or name.lower() == chat_model.lower() else name
    return ACCURATE_ASR if chat_model == DEFAULT_ASR and default_asr() == ACCURATE_ASR else None


def default_asr() -> str:
    """The recognizer used when none is named: the accurate tier where this machine runs it live, else the fast one.

    Why a measurement decides: Moonshine base keeps real time with room to
    spare on a free laptop CPU and falls behind on a busy or slow one, which
    only a run on the user's machine can tell. `voxcli pull moonshine-base-en`
    (and `voxcli doctor --measure`) stream ~12 s of speech through it and
    record the worker RTF; when that says "live" (RTF <= 0.5) and the model is
    still installed, it is the default. Nothing is downloaded or measured here:
    a lookup in the cached record, a few milliseconds. `asr.model` or
    `--model` always win over this.
    """
    from voxcli.asr import live_tier

    try:
        machine = live_tier.machine_id()
        if not any(m.model == ACCURATE_ASR and m.machine == machine and m.tier == "live"
                   for m in live_tier.load_cached().values()):
            return DEFAULT_ASR  # the common case: no catalog parsed, no model directory looked at
        rows, _ = live_tier.measurements(False, [ACCURATE_ASR])
    except Exception as e:  # noqa: BLE001 - an unreadable catalog or record must not stop the fast tier
        logging.getLogger("voxcli").debug("default_asr: the fast tier (%s: %s)", type(e).__name__, e)
        return DEFAULT_ASR
    return ACCURATE_ASR if any(m is not None and m.tier == "live" for _b, m, _now in rows) else DEFAULT_ASR
