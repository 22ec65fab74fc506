"""The TTS block knobs as `speak` options (the "Advanced" help panel), and how they are resolved.

Each knob (first_frames, frames, lookback, lookahead, overlap; see
`voxcli.runtimes.piper.voice.StreamConfig`) comes from, in order: the flag,
`VOXCLI_TTS_<KNOB>`, the config file's `[tts]` table (all three through
`voxcli.config.resolve`), the device profile written by `voxcli bench ttfa
--calibrate` (`tts.profile` picks another file or `none`), else the voice's
built-in value. Only knobs someone set change anything: with none set and no
profile the stream runs exactly as before.
"""
from __future__ import annotations

import logging
from typing import Annotated, Any, Optional

import typer

from voxcli.errors import UsageError

PANEL = "Advanced"
_LOG = logging.getLogger(__name__)


def _opt(name: str, what: str, minimum: int) -> Any:
    return typer.Option(f"--{name.replace('_', '-')}", min=minimum, show_default=False, rich_help_panel=PANEL,
                        help=f"{what}; frames of 11.6 ms (default: config tts.{name}, else the profile's "
                             "from `bench ttfa --calibrate`, else the voice's).")


FirstFramesOpt = Annotated[Optional[int], _opt("first_frames", "First block of a sentence (lower: earlier audio)", 1)]
FramesOpt = Annotated[Optional[int], _opt("frames", "Largest later block (fewer decoder calls)", 1)]
LookbackOpt = Annotated[Optional[int], _opt("lookback", "Context decoded before each block and dropped", 0)]
LookaheadOpt = Annotated[Optional[int], _opt("lookahead", "Context decoded after each block and dropped", 0)]
OverlapOpt = Annotated[Optional[int], _opt("overlap", "Cross-faded between consecutive blocks", 0)]


def resolve_knobs(cfg: Any, **flags: int | None) -> dict[str, Any]:
    """Each knob through the one resolver (flag > env > config), plus the `tts.profile` setting.

    Called before the voice loads, so `--verbose` names every value even when the load fails.
    """
    from voxcli.config import resolve

    values: dict[str, Any] = {name: resolve(f"tts.{name}", flag, config=cfg) for name, flag in flags.items()}
    values["profile"] = resolve("tts.profile", None, config=cfg)
    return values


def active_profile(voice_name: str, setting: str | None) -> Any:
    """The device profile for this voice (None: none); a broken default file is a warning, a named one an error."""
    from voxcli.tts.profile import ProfileError, active_profile as find

    try:
        profile = find(voice_name, setting)
    except ProfileError as e:
        if setting:
            raise UsageError(str(e), hint="recalibrate with `voxcli bench ttfa --calibrate`, "
                                          "or `voxcli config unset tts.profile`") from None
        from voxcli.cli.errors import err

        err(f"voxcli: warning: {e}; using the built-in knobs (recalibrate: voxcli bench ttfa --calibrate)")
        return None
    if profile is not None:
        _LOG.info("TTS profile %s (safety %.1fx, %s)", profile.path, profile.safety, profile.created)
    return profile


def stream_knobs(voice: Any, resolved: dict[str, Any]) -> Any:
    """A StreamerConfig carrying the knobs (`resolve_knobs`' values over the profile's), or None when
    nothing differs from the voice's own."""
    from voxcli.tts.profile import knobs_config
    from voxcli.tts.streamer import StreamerConfig

    base = getattr(voice.engine, "config", None)
    if base is None:  # an engine without block knobs
        return None
    values = {k: v for k, v in resolved.items() if k != "profile"}
    profile = active_profile(voice.name, resolved.get("profile"))
    if profile is not None:
        values = {k: (profile.knobs()[k] if v is None else v) for k, v in values.items()}
    if all(v is None for v in values.values()):
        return None
    try:
        blocks = knobs_config(base, **values)
    except ValueError as e:
        raise UsageError(f"TTS knobs: {e}") from None
    safety = profile.safety if profile is not None else StreamerConfig.safety
    return StreamerConfig(blocks=blocks, safety=safety)
