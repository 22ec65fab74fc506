"""The user config file and the user data directory.

Config: TOML at `platformdirs.user_config_dir("voxcli")/config.toml`, or the
file named by `VOXCLI_CONFIG`. Every value is optional; precedence is
flag > environment > config file > built-in default, so commands ask the
config only for what no flag gave. Unknown sections/keys are kept out of the
typed view and reported as warnings (a typo must not silently do nothing);
malformed TOML or a wrong type is a `UsageError` naming the file (and line).

Data dir: `platformdirs.user_data_dir("voxcli")`, or `VOXCLI_DATA_DIR`: the
bench history and the chat turn log (JSON lines) live there.

Both environment variables are read when the functions are called, never at
import time, so tests can point them at a tmp dir per test.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final, get_type_hints

from voxcli.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_CONFIG: Final = "VOXCLI_CONFIG"
ENV_DATA_DIR: Final = "VOXCLI_DATA_DIR"
APP: Final = "voxcli"

BENCH_HISTORY: Final = "bench_history.jsonl"
TURN_LOG: Final = "turns.jsonl"


def config_path() -> Path:
    """Where the config file is (it may not exist)."""
    env = os.environ.get(ENV_CONFIG)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP, appauthor=False)) / "config.toml"


def data_dir(create: bool = False) -> Path:
    """The per-user data directory; created only when `create` (reading never makes directories)."""
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        path = Path(env).expanduser()
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir(APP, appauthor=False))
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def bench_history_path() -> Path:
    """JSON lines, one per `voxcli bench` run."""
    return data_dir() / BENCH_HISTORY


def turn_log_path() -> Path:
    """JSON lines, one per `voxcli chat` turn (read by `voxcli ledger --measured`)."""
    return data_dir() / TURN_LOG


# --- typed sections -------------------------------------------------------------------


@dataclass(frozen=True)
class TTSSection:
    voice: str | None = None
    """Default voice for speak/bench/chat."""


@dataclass(frozen=True)
class ASRSection:
    model: str | None = None
    endpoint_ms: float | None = None
    """Silence hold before a turn ends (the ledger's endpoint term)."""


@dataclass(frozen=True)
class DevicesSection:
    input: str | None = None
    output: str | None = None


@dataclass(frozen=True)
class ChatSection:
    llm_url: str | None = None
    llm_model: str | None = None
    system: str | None = None
    barge_in_ms: float | None = None


@dataclass(frozen=True)
class BenchSection:
    max_p50_ms: float | None = None
    """CI budget on warm TTFA p50 (same as --max-p50-ms)."""
    max_p95_ms: float | None = None
    """CI budget on warm TTFA p95 (same as --max-p95-ms)."""
    runs: int | None = None
    warmup: int | None = None


@dataclass(frozen=True)
class LedgerSection:
    preset: str | None = None
    uplink_ms: float | None = None
    endpoint_ms: float | None = None
    asr_tail_ms: float | None = None
    hops_ms: float | None = None
    llm_ttft_ms: float | None = None
    tts_first_audio_ms: float | None = None
    downlink_ms: float | None = None


_SECTIONS: Final = {
    "tts": TTSSection,
    "asr": ASRSection,
    "devices": DevicesSection,
    "chat": ChatSection,
    "bench": BenchSection,
    "ledger": LedgerSection,
}


@dataclass(frozen=True)
class Config:
    """The typed view of the config file; every field defaults to None (= not set)."""

    path: Path
    exists: bool = False
    tts: TTSSection = field(default_factory=TTSSection)
    asr: ASRSection = field(default_factory=ASRSection)
    devices: DevicesSection = field(default_factory=DevicesSection)
    chat: ChatSection = field(default_factory=ChatSection)
    bench: BenchSection = field(default_factory=BenchSection)
    ledger: LedgerSection = field(default_factory=LedgerSection)
    warnings: tuple[str, ...] = ()
    """Unknown sections/keys, one sentence each, for the CLI to print."""

    def get(self, dotted: str) -> Any:
        """`cfg.get("bench.max_p95_ms")` -> the value or None."""
        section, _, key = dotted.partition(".")
        return getattr(getattr(self, section), key)


def _coerce(value: Any, hint: Any, where: str, path: Path) -> Any:
    # One-line type check per declared field: str | float | int (bool is not a number here).
    want = [t for t in getattr(hint, "__args__", (hint,)) if t is not type(None)][0]
    if want is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if want is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if want is str and isinstance(value, str):
        return value
    kind = {float: "a number", int: "an integer", str: "a string"}[want]
    raise UsageError(f"{path}: {where} must be {kind}, got {value!r}", hint="fix or remove that key")


def load_config(path: Path | None = None) -> Config:
    """Read and type-check the config file; a missing file is an empty config."""
    path = path or config_path()
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        return Config(path=path)
    except IsADirectoryError:
        raise UsageError(f"{path}: config file is a directory") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read config file: {e.strerror or e}") from None
    try:
        raw = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: config file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: invalid TOML: {e}", hint=f"fix the file or point {ENV_CONFIG} elsewhere") from None

    warnings: list[str] = []
    sections: dict[str, Any] = {}
    for name, value in raw.items():
        cls = _SECTIONS.get(name)
        if cls is None:
            warnings.append(f"{path}: unknown section [{name}] ignored (known: {', '.join(_SECTIONS)})")
            continue
        if not isinstance(value, dict):
            raise UsageError(f"{path}: {name} must be a [{name}] table")
        hints = get_type_hints(cls)
        known = {f.name for f in fields(cls)}
        kwargs = {}
        for key, v in value.items():
            if key not in known:
                warnings.append(f"{path}: unknown key {key!r} in [{name}] ignored (known: {', '.join(sorted(known))})")
                continue
            kwargs[key] = _coerce(v, hints[key], f"[{name}] {key}", path)
        sections[name] = cls(**kwargs)
    return Config(path=path, exists=True, warnings=tuple(warnings), **sections)
