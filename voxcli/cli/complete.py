"""Dynamic shell completion: model names, device names, config keys.

The committed scripts in `completions/` call back into `voxcli` on every Tab
(`_VOXCLI_COMPLETE=complete_bash voxcli ...`); typer then runs the callback
attached to the option being completed. Attach one with
`typer.Option(..., autocompletion=complete_tts_model)`.

Completion must never print a traceback into the user's prompt and never
download anything, so every callback reads only the catalog, the cache and
PortAudio's device list, and returns nothing on any error.
"""
from __future__ import annotations

from typing import Callable

Items = list[tuple[str, str]]


def _short(text: str, width: int = 60) -> str:
    # typer renders zsh help through rich, which wraps at 80 columns and breaks the line.
    return text if len(text) <= width else text[: width - 1] + "…"


def _models(kind: str | None, incomplete: str, *, installed_only: bool = False) -> Items:
    try:
        from voxcli.hub.cache import Cache
        from voxcli.hub.catalog import load_catalog
        from voxcli.hub.resolve import status

        cache = Cache.default()
        out: dict[str, str] = {}
        for name, entry in load_catalog().items():
            if kind and entry.kind != kind:
                continue
            st = status(entry, cache)
            if installed_only and st == "missing":
                continue
            out[name] = _short(f"{entry.kind}, {st}: {entry.description}")
        for name, manifest in cache.installed().items():
            if name not in out and (kind is None or manifest.get("kind") == kind):
                out[name] = f"{manifest.get('kind', 'data')}, installed"
        return [(n, h) for n, h in sorted(out.items()) if n.startswith(incomplete or "")]
    except Exception:  # noqa: BLE001 - see module docstring
        return []


def complete_model(incomplete: str) -> Items:
    """Any model in the catalog or the cache (pull)."""
    return _models(None, incomplete)


def complete_installed_model(incomplete: str) -> Items:
    """Models that are on disk now (rm, models --path)."""
    return _models(None, incomplete, installed_only=True)


def complete_tts_model(incomplete: str) -> Items:
    return _models("tts", incomplete)


def complete_asr_model(incomplete: str) -> Items:
    return _models("asr", incomplete)


def _devices(direction: str, incomplete: str) -> Items:
    # Offer the index and the full name; --device accepts either (and substrings).
    try:
        from voxcli.audio.devices import list_devices

        found = list_devices()
    except Exception:  # noqa: BLE001 - no PortAudio, no devices module yet: no suggestions
        return []
    out: Items = []
    for d in found:
        channels = d.max_output_channels if direction == "output" else d.max_input_channels
        if channels <= 0:
            continue
        default = d.default_output if direction == "output" else d.default_input
        help_ = f"{d.hostapi}, {channels} ch, {d.default_samplerate:.0f} Hz" + (", default" if default else "")
        for candidate in (str(d.index), d.name):
            if candidate.lower().startswith((incomplete or "").lower()):
                out.append((candidate, _short(f"{d.name} ({help_})" if candidate == str(d.index) else help_)))
    return out


def complete_output_device(incomplete: str) -> Items:
    return _devices("output", incomplete)


def complete_input_device(incomplete: str) -> Items:
    return _devices("input", incomplete)


def complete_config_key(incomplete: str) -> Items:
    try:
        from voxcli.config import config_keys

        return [(k, _short(s.doc)) for k, s in config_keys().items() if k.startswith(incomplete or "")]
    except Exception:  # noqa: BLE001
        return []


#: Callback by name, for scripts and tests that check every callback is wired.
CALLBACKS: dict[str, Callable[[str], Items]] = {
    f.__name__: f for f in (complete_model, complete_installed_model, complete_tts_model, complete_asr_model,
                            complete_output_device, complete_input_device, complete_config_key)
}
