"""The user config file and the user data directory.

Config: TOML at `platformdirs.user_config_dir("voxcli")/config.toml`, or the
file named by `VOXCLI_CONFIG`. Every value is optional; precedence is
flag > environment > config file > built-in default, so commands ask the
config only for what no flag gave. `load_config()` already lays the
environment over the file: every key `section.name` can be set for one
process as `VOXCLI_SECTION_NAME` (e.g. `VOXCLI_TTS_VOICE`,
`VOXCLI_BENCH_MAX_P95_MS`), and `Config.sources` says where each value came
from. Unknown sections/keys are kept out of the
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
    sources: dict[str, str] = field(default_factory=dict)
    """dotted key -> "env" or "config" for every value that is set."""

    def get(self, dotted: str) -> Any:
        """`cfg.get("bench.max_p95_ms")` -> the value or None."""
        section, _, key = dotted.partition(".")
        return getattr(getattr(self, section), key)


@dataclass(frozen=True)
class KeySpec:
    """One settable key: `voxcli config set KEY VALUE` and `VOXCLI_SECTION_KEY`."""

    key: str
    """Dotted name, e.g. "tts.voice"."""
    type: type
    """str, float or int: what `set` and the environment are parsed as."""
    env: str
    doc: str


# Field docstrings are not introspectable; one line per key for `config show` and the man page.
_DOCS: Final = {
    "tts.voice": "default voice for speak, bench and chat",
    "asr.model": "default ASR model for transcribe and chat",
    "asr.endpoint_ms": "silence hold before a spoken turn ends (chat, ledger)",
    "devices.input": "microphone: device index or name substring",
    "devices.output": "speaker: device index or name substring",
    "chat.llm_url": "OpenAI-compatible server base URL (…/v1); unset = on-device LLM",
    "chat.llm_model": "model name sent to the LLM server",
    "chat.system": "system prompt for chat",
    "chat.barge_in_ms": "speech needed to interrupt the assistant",
    "bench.max_p50_ms": "CI budget: fail bench ttfa if warm TTFA p50 exceeds this",
    "bench.max_p95_ms": "CI budget: fail bench ttfa if warm TTFA p95 exceeds this",
    "bench.runs": "timed runs per text",
    "bench.warmup": "discarded runs per text",
    "ledger.preset": "ledger preset name",
}


def config_keys() -> dict[str, KeySpec]:
    """Every valid dotted key, in section order."""
    out: dict[str, KeySpec] = {}
    for section, cls in _SECTIONS.items():
        hints = get_type_hints(cls)
        for f in fields(cls):
            want = [t for t in getattr(hints[f.name], "__args__", (hints[f.name],)) if t is not type(None)][0]
            key = f"{section}.{f.name}"
            doc = _DOCS.get(key) or (f"ledger term {f.name}" if section == "ledger" else "")
            out[key] = KeySpec(key, want, f"VOXCLI_{section}_{f.name}".upper(), doc)
    return out


def parse_value(spec: KeySpec, text: str, where: str = "") -> Any:
    """Parse a command-line or environment string as the key's type (UsageError names `where`)."""
    import math

    where = f"{where}: " if where else ""

    text = text.strip()
    if spec.type is str:
        if not text:
            raise UsageError(f"{where}{spec.key} must not be empty")
        return text
    try:
        value: Any = spec.type(text)
    except ValueError:
        kind = "a number" if spec.type is float else "an integer"
        raise UsageError(f"{where}{spec.key} must be {kind}, got {text!r}") from None
    if (spec.type is float and not math.isfinite(value)) or value < 0:
        raise UsageError(f"{where}{spec.key} must be a finite number >= 0, got {text!r}")
    return value


def _env_overlay(sections: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    # Environment beats the file: replace each section field whose VOXCLI_* variable is non-empty.
    from dataclasses import replace

    for spec in config_keys().values():
        raw = os.environ.get(spec.env, "")
        if not raw.strip():
            continue
        section, _, name = spec.key.partition(".")
        current = sections.get(section) or _SECTIONS[section]()
        sections[section] = replace(current, **{name: parse_value(spec, raw, f"${spec.env}")})
        sources[spec.key] = "env"
    return sections


def toml_error_line(e: Exception) -> int | None:
    """The 1-based line of a TOMLDecodeError (an attribute only since 3.14; else in the message)."""
    import re

    line = getattr(e, "lineno", None)
    if line is None:
        m = re.search(r"line (\d+)", str(e))
        line = int(m.group(1)) if m else None
    return line


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
    sources: dict[str, str] = {}
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        return Config(path=path, sources=sources, **_env_overlay({}, sources))
    except IsADirectoryError:
        raise UsageError(f"{path}: config file is a directory") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read config file: {e.strerror or e}") from None
    try:
        raw = tomllib.loads(raw_bytes.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: config file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        line = toml_error_line(e)
        lines = raw_bytes.decode("utf-8").splitlines()
        quoted = f": {lines[line - 1].strip()!r}" if line and 0 < line <= len(lines) else ""
        raise UsageError(
            f"{path}: invalid TOML: {e}",
            hint=f"line {line}{quoted}; fix it, or run `voxcli config path` to find the file" if line
            else f"fix the file or point {ENV_CONFIG} elsewhere",
        ) from None

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
            sources[f"{name}.{key}"] = "config"
        sections[name] = cls(**kwargs)
    sections = _env_overlay(sections, sources)
    return Config(path=path, exists=True, warnings=tuple(warnings), sources=sources, **sections)
