"""Which ASR models keep real time on *this* machine: measured once per model and machine, cached.

Why: the accurate tier (Whisper base, Moonshine base) is live on a free
fast CPU and falls behind on a busy 2-core one, and only a measurement on the
user's machine can tell. `voxcli doctor --measure` streams about 12 s of
speech through each installed recognizer in lockstep (every re-decode is
run, as a live stream demands when it keeps up) and records the worker RTF
(model seconds per audio second); plain `voxcli doctor` reads the cache, so it
stays fast. A model is "live" at RTF <= 0.5 (the issue's target: 2x headroom
for the VAD, the TTS of a chat reply and other programs), "tight" below 0.9
(keeps up on an idle machine, falls behind under load), else "files".

The cache (`asr-tier.json` in the data dir) is keyed by model, model files,
machine (CPU model, cores) and method version, so new weights or a new
machine are measured again rather than trusted.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Literal, Sequence

Tier = Literal["live", "tight", "files"]
LIVE_RTF: Final = 0.5
TIGHT_RTF: Final = 0.9
METHOD: Final = "lockstep-v3"
"""Bump when the measurement changes, so old cached figures are not mixed with new ones.
v2: each model at its own step (catalog `step_ms`), moonshine-base-en on its int8 graphs.
v3: moonshine-base-en re-decodes every 750 ms (was 1 s), and its figure now picks the default recognizer."""
CACHE_FILE: Final = "asr-tier.json"
#: What the default voice reads for the measurement (about 12 s; real speech, any voice will do for timing).
SCRIPT: Final = ("The meeting moved to Thursday at ten, so please bring the budget notes and the draft of "
                 "the report. We will start with the numbers from the last quarter, then talk about hiring, "
                 "and finish early if nobody has questions.")


@dataclass(frozen=True)
class Measurement:
    model: str
    worker_rtf: float
    """Model seconds per second of audio, every re-decode run (lockstep)."""
    audio_s: float
    decode_s: float
    measured_at: str
    machine: str
    key: str

    @property
    def tier(self) -> Tier:
        return tier_of(self.worker_rtf)


def tier_of(rtf: float) -> Tier:
    """"live" with 2x headroom, "tight" (real time only on an idle machine), else "files"."""
    if rtf <= LIVE_RTF:
        return "live"
    return "tight" if rtf < TIGHT_RTF else "files"


def machine_id() -> str:
    """CPU model and the cores this process may use: what the RTF depends on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return f"{cpu} x{cores}"


def cache_key(model: str, files_digest: str, machine: str) -> str:
    return hashlib.sha256(f"{METHOD}|{model}|{files_digest}|{machine}".encode()).hexdigest()[:16]


def files_digest(bundle: Any) -> str:
    """The catalog's sha256 of the model's files (their names and sizes for a model with no entry)."""
    if bundle.entry is not None:
        return hashlib.sha256("".join(f"{f.name}:{f.sha256}" for f in bundle.entry.files).encode()).hexdigest()
    parts = sorted(f"{p.name}:{p.stat().st_size}" for p in Path(bundle.path).iterdir() if p.is_file())
    return hashlib.sha256("".join(parts).encode()).hexdigest()


def cache_path() -> Path:
    from voxcli.config import data_dir

    return data_dir() / CACHE_FILE


def load_cached() -> dict[str, Measurement]:
    """Cached measurements by key ({} when none or unreadable: they are measured again)."""
    try:
        raw = json.loads(cache_path().read_text(encoding="utf-8"))
        return {k: Measurement(**{**v, "worker_rtf": float(v["worker_rtf"])})
                for k, v in raw.get("measurements", {}).items()}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):  # a file that is not ours: measure again
        return {}


def save(measurements: dict[str, Measurement]) -> None:
    from voxcli.config import data_dir
    from voxcli.fsutil import atomic_write

    data_dir(create=True)
    doc = {"method": METHOD, "measurements": {k: asdict(m) for k, m in measurements.items()}}
    atomic_write(cache_path(), json.dumps(doc, indent=1) + "\n")


def speech() -> Any:
    """About 12 s of 16 kHz speech from the default voice (it ships in a package, so it is always here)."""
    from voxcli.audio.pcm import resample
    from voxcli.hub.resolve import resolve_model
    from voxcli.runtimes.piper.voice import PiperVoice

    bundle = resolve_model(None, kind="tts", offline=True)
    onnx = bundle.find(".onnx")[0]
    voice = PiperVoice.load(onnx, derived_dir=bundle.derived_dir)
    audio = voice.synthesize(SCRIPT)
    return resample(audio, voice.sample_rate, 16000)


def measure_model(bundle: Any, audio: Any, *, step_ms: int | None = None) -> Measurement:
    """Stream `audio` through the bundle's recognizer in lockstep; the worker RTF it took."""
    from voxcli.asr.models import load_engine
    from voxcli.asr.streamer import ASRStreamer
    from voxcli.runtimes.silero_vad import SileroVAD

    engine = load_engine(bundle)  # step_ms None: the model's own step (catalog `step_ms`), as chat streams it
    engine.transcribe(audio[:32000])  # warm-up: a fresh session's first runs size its arena, not the model's speed
    s = ASRStreamer(engine, SileroVAD.resolve(offline=True), step_ms=step_ms, lockstep=True)
    for i in range(0, audio.size, 1600):
        s.send(audio[i:i + 1600])
    s.finish()
    machine = machine_id()
    return Measurement(model=bundle.name, worker_rtf=round(s.stats.rtf, 3), audio_s=round(s.stats.audio_s, 2),
                       decode_s=round(s.stats.decode_s, 2), measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       machine=machine, key=cache_key(bundle.name, files_digest(bundle), machine))


@dataclass(frozen=True)
class TierReport:
    """What `voxcli doctor`'s asr-tier check says (doctor wraps it in a CheckResult)."""

    status: Literal["ok", "warn"]
    summary: str
    fix: str | None
    details: dict[str, Any]


def installed_asr(only: Sequence[str] | None = None) -> list[Any]:
    """Bundles of the catalog's ASR models that are on disk (nothing is downloaded), or of `only` those."""
    from voxcli.hub.catalog import load_catalog
    from voxcli.hub.resolve import installed_bundle

    found = (installed_bundle(e.name) for e in load_catalog().values()
             if e.kind == "asr" and (only is None or e.name in only))
    return [b for b in found if b is not None]


def _card_wer(bundle: Any) -> float | None:
    """The dev-set WER on the model's card (parsed and checked once, with the catalog)."""
    card = bundle.entry.card if bundle.entry is not None else None
    return card.wer if card is not None else None


def measurements(measure: bool = False, only: Sequence[str] | None = None,
                 ) -> tuple[list[tuple[Any, Measurement | None, bool]], list[str]]:
    """(bundle, its measurement or None, measured now?) per installed ASR model, and the errors met.

    With `measure`, every installed model is measured again and the cache is
    rewritten; without it only cached figures for this machine are used.
    """
    bundles = installed_asr(only)
    cached = load_cached()
    machine = machine_id()
    rows: list[tuple[Any, Measurement | None, bool]] = []
    errors: list[str] = []
    audio = speech() if measure and bundles else None
    for b in bundles:
        key = cache_key(b.name, files_digest(b), machine)
        if audio is not None:
            try:
                cached[key] = m = measure_model(b, audio)
                rows.append((b, m, True))
                continue
            except Exception as e:  # noqa: BLE001 - one broken model must not hide the others' figures
                errors.append(f"{b.name}: {type(e).__name__}: {e}")
        rows.append((b, cached.get(key), False))
    if audio is not None:
        save(cached)
    return rows, errors


def report(measure: bool = False, configured: str | None = None, only: Sequence[str] | None = None) -> TierReport:
    """Which installed recognizers run `transcribe --live` in real time here, from cache or measured now.

    `configured` is the model the user's config selects (asr.model); a warning
    when it was measured too slow for live use here. `only`: these models only.
    """
    rows, errors = measurements(measure, only)
    measured = [(b, m) for b, m, _ in rows if m is not None]
    details: dict[str, Any] = {
        "live_rtf_max": LIVE_RTF, "tight_rtf_max": TIGHT_RTF, "machine": machine_id(), "errors": errors,
        "cache": str(cache_path()),
        "models": [{"model": b.name, "worker_rtf": m.worker_rtf if m else None, "tier": m.tier if m else None,
                    "measured_at": m.measured_at if m else None, "measured_now": now, "dev_set_wer": _card_wer(b)}
                   for b, m, now in rows],
    }
    if not rows:
        return TierReport("ok", "no ASR model installed (the default is pulled on first use)", None, details)
    if not measured:
        return TierReport("ok", f"{len(rows)} ASR model(s) installed, not measured on this machine: "
                          "`voxcli doctor --measure` (10-40 s per model)", None, details)
    live = [(b, m) for b, m in measured if m.tier == "live"]
    best = min(live, key=lambda bm: (_card_wer(bm[0]) is None, _card_wer(bm[0]) or 0.0), default=None)
    details["recommended_live"] = best[0].name if best else None
    groups = {t: ", ".join(f"{b.name} (RTF {m.worker_rtf:.2f})" for b, m in measured if m.tier == t)
              for t in ("live", "tight", "files")}
    parts = [f"live: {groups['live'] or 'none'}"]
    parts += [f"{label}: {groups[t]}" for t, label in (("tight", "live only on an idle CPU"), ("files", "files only"))
              if groups[t]]
    if best:
        parts.append(f"most accurate live: {best[0].name}")
    unmeasured = [b.name for b, m, _ in rows if m is None]
    if unmeasured:
        parts.append(f"not measured: {', '.join(unmeasured)}")
    summary = "; ".join(parts)
    slow = next((m for b, m in measured if b.name == configured and m.tier != "live"), None)
    if slow is not None:
        from voxcli.asr.models import DEFAULT_ASR

        alt = best[0].name if best else DEFAULT_ASR
        fix = (f"asr.model {configured} needs RTF {slow.worker_rtf:.2f} here (live wants <= {LIVE_RTF}): "
               f"`transcribe --live` may fall behind; use --model {alt} live, or "
               f"`voxcli config set asr.model {alt}`")
        return TierReport("warn", summary, fix, details)
    if errors:
        return TierReport("warn", summary, "could not measure " + "; ".join(errors), details)
    return TierReport("ok", summary, None, details)
