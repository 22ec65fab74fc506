"""A device's TTS profile: block knobs measured on this machine, and the proof they never starve playback.

Why: the built-in knobs (`StreamConfig`) were measured on one 2-core machine;
a slower board needs a larger first block, a faster one can start with a
smaller one. `voxcli bench ttfa --calibrate` (voxcli.bench.calibrate)
measures what one decoder call and one latent frame cost here, and the
context that keeps blocks within a chosen SNR of whole decoding, and writes
a profile that `speak` uses by default (a flag, VOXCLI_TTS_* or the config
file still win, knob by knob).

The guarantee: a chunk schedule A(0), A(1), ... (frames) never underruns if
every block is computed before the audio queued ahead of it has played. Right
after block k is emitted at least A(k) frames are queued, so it suffices that

    factor * (call_s + frame_s * (A(k+1) + context)) <= A(k) * hop / rate

for every k, where `context` are the frames decoded and thrown away
(lookback + lookahead + overlap) and `factor` is the stated safety factor
(2 = still holds on a device twice as slow as the one measured).
`schedule()` builds the largest such schedule, `violations()` checks any.
Scope: blocks within a sentence (the next sentence's front part is prepared
ahead by the producer's front stage).
"""
from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Final

KNOBS: Final = ("first_frames", "frames", "lookback", "lookahead", "overlap")
"""The block knobs (voxcli.runtimes.piper.voice.StreamConfig's fields), in order."""
PROFILE_VERSION: Final = 1
DEFAULT_SAFETY: Final = 2.0
"""Calibrated schedules keep up on a device this many times slower than the one measured."""
DEFAULT_SNR_DB: Final = 90.0
"""Default calibration target: blocks within 90 dB of whole decoding, i.e. exact to within rounding
(issue 15's target for the block decoder); a lower target buys a smaller context, so cheaper blocks."""
MAX_SCHEDULE: Final = 64
"""Blocks checked by `violations` (the schedule is constant once it reaches `frames`)."""


@dataclass(frozen=True)
class Costs:
    """Decoder cost model measured on a device: one call of n frames takes call_s + frame_s * n."""

    call_s: float
    """Fixed seconds per decoder call (model call overhead)."""
    frame_s: float
    """Seconds per decoded latent frame, context frames included."""
    audio_frame_s: float
    """Seconds of audio in one latent frame (hop / sample rate)."""

    def block_s(self, frames: int, context: int) -> float:
        """Predicted seconds to compute a block of `frames` with `context` extra frames."""
        return self.call_s + self.frame_s * (frames + context)


@dataclass(frozen=True)
class Profile:
    """What `bench ttfa --calibrate` wrote: the knobs, the measured costs, and the promise they keep."""

    voice: str
    first_frames: int
    frames: int
    lookback: int
    lookahead: int
    overlap: int
    safety: float
    """The factor the schedule is proven for (it survives a device this many times slower)."""
    snr_db: float
    """Target SNR of blocked vs whole decoding the context was chosen for."""
    measured_snr_db: float
    """Worst SNR measured with the chosen context."""
    costs: Costs
    created: str = ""
    """ISO time of the calibration."""
    device: str = ""
    """Machine description (platform, cores) for `doctor`."""
    path: Path | None = None
    """Where it was read from (not written)."""

    @property
    def context(self) -> int:
        return self.lookback + self.lookahead + self.overlap

    def knobs(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in KNOBS}


def schedule(costs: Costs, first_frames: int, frames: int, context: int, factor: float,
             n: int = MAX_SCHEDULE) -> list[int]:
    """Block sizes A(0..n-1): A(0) = first_frames, then each as large as the rule allows, at most `frames`."""
    sizes = [first_frames]
    for _ in range(n - 1):
        budget = sizes[-1] * costs.audio_frame_s / factor - costs.call_s - costs.frame_s * context
        grow = math.floor(budget / costs.frame_s) if costs.frame_s > 0 else frames
        sizes.append(max(1, min(frames, grow)))
    return sizes


def violations(costs: Costs, sizes: list[int], context: int, factor: float) -> list[int]:
    """Indices k where block k+1 is not ready before block k has played ([] = underrun-free)."""
    return [k for k in range(len(sizes) - 1)
            if factor * costs.block_s(sizes[k + 1], context) > sizes[k] * costs.audio_frame_s]


def smallest_first(costs: Costs, context: int, factor: float, frames: int) -> int | None:
    """The smallest first block whose schedule is underrun-free and grows to `frames` (None: no such block).

    Growing matters: a block that only just pays for the next one of the same size
    is a fixed point, safe but stuck at small, context-heavy blocks."""
    for first in range(1, frames + 1):
        sizes = schedule(costs, first, frames, context, factor)
        if sizes[-1] == frames and sizes == sorted(sizes) and not violations(costs, sizes, context, factor):
            return first
    return None


def profile_path(voice: str) -> Path:
    """Where `voice`'s profile lives in the user's data dir (it may not exist)."""
    from voxcli.config import data_dir

    return data_dir() / "profiles" / f"{voice}.toml"


def write_profile(profile: Profile, path: Path | None = None) -> Path:
    """Write `profile` as TOML, atomically; returns the path."""
    from voxcli.fsutil import atomic_write

    path = path or profile_path(profile.voice)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, _to_toml(profile).encode("utf-8"))
    return path


def _to_toml(p: Profile) -> str:
    def val(v: Any) -> str:
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(float(v)) if isinstance(v, float) else str(v)

    top = {f.name: getattr(p, f.name) for f in fields(p) if f.name not in ("costs", "path")}
    lines = ["# voxcli TTS profile, written by `voxcli bench ttfa --calibrate`.",
             f"version = {PROFILE_VERSION}", *(f"{k} = {val(v)}" for k, v in top.items()), "", "[costs]"]
    lines += [f"{k} = {val(float(v))}" for k, v in asdict(p.costs).items()]
    return "\n".join(lines) + "\n"


class ProfileError(ValueError):
    """A profile file that cannot be used (the message names the file)."""


def read_profile(path: Path) -> Profile:
    """Parse and check a profile (ProfileError on anything wrong: it is then not used)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        if raw.get("version") != PROFILE_VERSION:
            raise ValueError(f"version {raw.get('version')!r}, expected {PROFILE_VERSION}")
        costs = Costs(**{f.name: float(raw["costs"][f.name]) for f in fields(Costs)})
        ints = {k: int(raw[k]) for k in KNOBS}
        p = Profile(voice=str(raw["voice"]), **ints, safety=float(raw["safety"]), snr_db=float(raw["snr_db"]),
                    measured_snr_db=float(raw["measured_snr_db"]), costs=costs,
                    created=str(raw.get("created", "")), device=str(raw.get("device", "")), path=Path(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise ProfileError(f"{path}: not a usable TTS profile ({e})") from None
    if p.first_frames < 1 or p.frames < p.first_frames or min(p.lookback, p.lookahead, p.overlap) < 0:
        raise ProfileError(f"{path}: knobs out of range {p.knobs()}")
    return p


def active_profile(voice: str, setting: str | None = None) -> Profile | None:
    """The profile `speak` uses for `voice`: `setting` (config tts.profile) names a file or "none";
    unset means the calibrated one in the data dir if there is one. A broken file is a ProfileError."""
    if setting is not None and setting.strip().lower() == "none":
        return None
    path = Path(setting).expanduser() if setting else profile_path(voice)
    if not setting and not path.is_file():
        return None
    return read_profile(path)


def knobs_config(base: Any, **knobs: int | None) -> Any:
    """`base` (a voice's StreamConfig) with the given knobs replaced (None = keep); ValueError when out of range.

    For `StreamerConfig(blocks=knobs_config(voice.engine.config, lookback=12))`.
    """
    from dataclasses import replace

    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise ValueError(f"unknown block knob(s) {sorted(unknown)}; known: {', '.join(KNOBS)}")
    cfg = replace(base, **{k: int(v) for k, v in knobs.items() if v is not None})
    if cfg.first_frames < 1 or cfg.frames < 1:
        raise ValueError(f"first_frames and frames must be at least 1, got {cfg.first_frames} and {cfg.frames}")
    if min(cfg.lookback, cfg.lookahead, cfg.overlap) < 0:
        raise ValueError("lookback, lookahead and overlap must be >= 0")
    return cfg


def describe(voice: str, setting: str | None) -> tuple[str, str, str | None, dict[str, Any]]:
    """(status, summary, fix, details) of the profile `speak` would use for `voice` (for `voxcli doctor`)."""
    try:
        p = active_profile(voice, setting)
    except ProfileError as e:
        if setting:  # a file the user named: speak refuses to run (cli/tts_knobs.active_profile)
            return ("fail", f"{e}; speak stops with this error",
                    "voxcli bench ttfa --calibrate, or voxcli config unset tts.profile", {})
        return "warn", f"{e}; speak uses the built-in knobs", "voxcli bench ttfa --calibrate", {}
    if p is None:
        why = "tts.profile = none" if setting else f"none calibrated for {voice}"
        return "ok", f"built-in knobs ({why})", None, {"path": None, "voice": voice}
    details = {"path": str(p.path), "voice": p.voice, **p.knobs(), "safety": p.safety,
               "measured_snr_db": p.measured_snr_db, "created": p.created, "device": p.device}
    knobs = " ".join(f"{k}={v}" for k, v in p.knobs().items())
    return "ok", f"{p.path} ({knobs}; underrun-free at {p.safety:g}x slower; {p.created[:10]})", None, details
