"""Changing the config file, and explaining where each effective value comes from.

`set_key`/`unset_key` read the file with tomllib, change one key and write it
back with tomli-w to a temp file in the same directory followed by
`os.replace`, so a crash never leaves half a config. Round-tripping through
tomli-w drops comments; unknown sections and keys are kept as they were.

`effective_settings()` is what `voxcli config show` prints: for every key the
value a command would use when no flag is given, and its source
(env > config > default). The built-in defaults here mirror the commands'
own defaults and exist to be shown, not to be applied.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxcli.config import config_keys, config_path, load_config, parse_value, toml_error_line
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

    return {
        "tts.voice": model("tts"),
        "asr.model": model("asr"),
        "asr.endpoint_ms": 500.0,
        "chat.barge_in_ms": 300.0,
        "bench.runs": 5,
        "bench.warmup": 1,
        "ledger.preset": "default",
    }


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


def _read_raw(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError:
        raise UsageError(f"{path}: config file is not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read config file: {e.strerror or e}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = toml_error_line(e)
        raise UsageError(f"{path}: invalid TOML: {e}", hint=f"fix line {line} by hand first (`voxcli config path`)"
                         if line else "fix the file by hand first") from None


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            tomli_w.dump(data, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def set_key(key: str, text: str, path: Path | None = None) -> Any:
    """Type-check `text` for `key`, write it, and return the parsed value."""
    check_key(key)
    path = path or config_path()
    value = parse_value(config_keys()[key], text)
    data = _read_raw(path)
    section, _, name = key.partition(".")
    table = data.setdefault(section, {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: {section} must be a [{section}] table", hint="fix the file by hand first")
    table[name] = value
    _write_atomic(path, data)
    return value


def unset_key(key: str, path: Path | None = None) -> bool:
    """Remove `key` from the file (and its table when empty); False if it was not set."""
    check_key(key)
    path = path or config_path()
    data = _read_raw(path)
    section, _, name = key.partition(".")
    table = data.get(section)
    if not isinstance(table, dict) or name not in table:
        return False
    del table[name]
    if not table:
        del data[section]
    _write_atomic(path, data)
    return True
