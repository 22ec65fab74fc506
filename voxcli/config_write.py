"""Changing the config file, and explaining where each effective value comes from.

`set_key`/`unset_key` edit the file with tomlkit, which changes one key and
keeps everything else byte for byte: the user's comments, blank lines, key
order and unknown sections (tomli-w, used before, rewrote the whole file and
deleted every comment). The file is replaced atomically (`fsutil.atomic_write`),
so a crash never leaves half a config.

`effective_settings()` is what `voxcli config show` prints: for every key the
value a command would use when no flag is given, and its source
(env > config > default). The built-in values come from `voxcli.config.DEFAULTS`, the same table
`resolve()` applies; only the default model names are looked up in the catalog.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxcli.config import DEFAULTS, config_keys, config_path, load_config, parse_value, toml_error_line
from voxcli.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def builtin_defaults() -> dict[str, Any]:
    """What commands use when neither flag, environment nor config says otherwise (None = none)."""
    from voxcli.hub.catalog import default_model

    def model(kind: str) -> str | None:
        try:
            return default_model(kind).name
        except Exception:  # noqa: BLE001 - a broken user catalog must not break `config show`
            return None

    from voxcli.asr.models import default_asr  # never raises: the fast tier when anything is off

    # asr.model unset: the recognizer `transcribe` runs (the accurate tier where it was measured live here)
    return {**DEFAULTS, "tts.voice": model("tts"), "asr.model": default_asr()}


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    source: str
    """"env", "config", "default" or "unset"."""
    env: str
    type: str
    doc: str


def effective_settings() -> list[Setting]:
    """Every key with the value a command would use without flags, and where it came from."""
    cfg = load_config()
    defaults = builtin_defaults()
    out = []
    for key, spec in config_keys().items():
        value = cfg.get(key)
        source = cfg.sources.get(key)
        if source is None:
            value = defaults.get(key)
            source = "default" if value is not None else "unset"
        out.append(Setting(key, value, source, spec.env, spec.type.__name__, spec.doc))
    return out


def check_key(key: str) -> None:
    keys = config_keys()
    if key not in keys:
        import difflib

        close = difflib.get_close_matches(key, list(keys), n=1)
        raise UsageError(
            f"unknown config key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
            hint="valid keys: " + ", ".join(keys),
        )


def _read_doc(path: Path) -> Any:
    """The file as a tomlkit document (empty when missing); invalid TOML is a UsageError naming the line."""
    import tomlkit

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: config file is not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read config file: {e.strerror or e}") from None
    try:
        tomllib.loads(text)  # the same error message (and line) as every other command reading the file
    except tomllib.TOMLDecodeError as e:
        line = toml_error_line(e)
        raise UsageError(f"{path}: invalid TOML: {e}", hint=f"fix line {line} by hand first (`voxcli config path`)"
                         if line else "fix the file by hand first") from None
    return tomlkit.parse(text)


def _write(path: Path, doc: Any) -> None:
    from voxcli.fsutil import atomic_write, write_error

    text = doc.as_string()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A table added and later removed leaves tomlkit's separating blank line behind: end with one newline.
        atomic_write(path, text.rstrip("\n") + "\n" if text.strip() else "")
    except OSError as e:  # a read-only config directory: name the config file, not our temp file
        raise write_error(e, path) from None


def _table(doc: Any, section: str, path: Path, create: bool) -> Any:
    from collections.abc import MutableMapping

    import tomlkit

    table = doc.get(section)
    if table is None and create:
        table = tomlkit.table()
        doc.add(section, table)
        table = doc[section]
    if table is not None and not isinstance(table, MutableMapping):
        raise UsageError(f"{path}: {section} must be a [{section}] table", hint="fix the file by hand first")
    return table


def set_key(key: str, text: str, path: Path | None = None) -> Any:
    """Type-check `text` for `key`, write it (comments and layout kept), and return the parsed value."""
    check_key(key)
    path = path or config_path()
    value = parse_value(config_keys()[key], text)
    doc = _read_doc(path)
    section, _, name = key.partition(".")
    _table(doc, section, path, create=True)[name] = value
    _write(path, doc)
    return value


def unset_key(key: str, path: Path | None = None) -> bool:
    """Remove `key` from the file (and its table when nothing, not even a comment, is left); False if not set."""
    check_key(key)
    path = path or config_path()
    doc = _read_doc(path)
    section, _, name = key.partition(".")
    table = _table(doc, section, path, create=False)
    if table is None or name not in table:
        return False
    del table[name]
    if not table and "#" not in doc[section].as_string():
        del doc[section]
    _write(path, doc)
    return True
