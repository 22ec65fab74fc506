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

Keys: `KEYS` is the one table of settable keys (type, built-in default,
one-line doc); the typed sections (`cfg.tts.voice`), `DEFAULTS`, `config
show`, the man page and the environment variable names all come from it.
`resolve(key, flag_value)` is the one place that applies flag > env > config
> default; every command asks it (before, each command did it by hand, and
`chat` and `bench asr` ignored some keys). Engine modules import the
`DEFAULT_*` constants instead of writing the literals again.
"""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field, make_dataclass
from pathlib import Path
from typing import Any, Final, Optional

from voxcli.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_CONFIG: Final = "VOXCLI_CONFIG"
ENV_DATA_DIR: Final = "VOXCLI_DATA_DIR"
APP: Final = "voxcli"

# Built-in values used in more than one module (the key table below and the engine).
DEFAULT_ENDPOINT_MS: Final = 500.0  # silence hold (VAD) before a spoken turn or utterance ends
DEFAULT_BARGE_IN_MS: Final = 300.0  # speech needed to interrupt the assistant in chat
DEFAULT_STEP_MS: Final = 500  # streaming ASR re-decode interval while speech continues
DEFAULT_AGREEMENT: Final = 2  # LocalAgreement n: hypotheses that must agree before a word is stable

log = logging.getLogger(__name__)

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


# --- the one table of keys ------------------------------------------------------------


@dataclass(frozen=True)
class KeySpec:
    """One settable key: `voxcli config set KEY VALUE`, `VOXCLI_SECTION_KEY`, `resolve(KEY, flag)`."""

    key: str
    """Dotted name, e.g. "tts.voice"."""
    type: type
    """str, float or int: what the file must hold and `set` and the environment are parsed as."""
    default: Any
    """The built-in value; None means "none" (e.g. the catalog's default model, no budget)."""
    doc: str
    """One line for `config show` and the man page."""

    @property
    def env(self) -> str:
        return "VOXCLI_" + self.key.replace(".", "_").upper()


def _ledger_terms() -> tuple[KeySpec, ...]:
    # Unset: the preset's value (voxcli.bench.ledger); names as the ledger's --<term> flags.
    names = ("uplink", "endpoint", "asr_tail", "hops", "llm_ttft", "tts_first_audio", "downlink")
    return tuple(KeySpec(f"ledger.{n}_ms", float, None, f"ledger term {n}_ms (unset: the preset's)") for n in names)


def _tts_knobs() -> tuple[KeySpec, ...]:
    # Unset: the calibrated profile's, else the voice's StreamConfig (voxcli.tts.profile).
    docs = {"first_frames": "first block of a sentence", "frames": "largest later block",
            "lookback": "context decoded before a block", "lookahead": "context decoded after a block",
            "overlap": "cross-faded between blocks"}
    return tuple(KeySpec(f"tts.{n}", int, None, f"{d}, in latent frames (unset: profile's, else the voice's)")
                 for n, d in docs.items())


KEYS: Final[tuple[KeySpec, ...]] = (
    KeySpec("tts.voice", str, None, "default voice for speak, bench and chat (unset: the catalog's)"),
    KeySpec("tts.max_buffer_flush_ms", float, 1500.0, "speak text stalled this long without a boundary (0 = off)"),
    *_tts_knobs(),
    KeySpec("tts.profile", str, None, "TTS profile file, or none (unset: the one `bench ttfa --calibrate` wrote)"),
    KeySpec("asr.model", str, None, "default ASR model for transcribe, bench asr and chat (unset: moonshine-base-en where "
            "`voxcli pull`/`doctor --measure` timed it live here, else moonshine-tiny-en; chat: moonshine-tiny-en)"),
    KeySpec("asr.endpoint_ms", float, DEFAULT_ENDPOINT_MS, "silence hold before a spoken turn ends"),
    KeySpec("asr.endpoint", str, "vad", "chat's end of turn: vad (silence hold) or semantic (SmolLM2 end-of-turn score)"),
    KeySpec("devices.input", str, None, "microphone: device index or name substring (unset: the system's)"),
    KeySpec("devices.output", str, None, "speaker: device index or name substring (unset: the system's)"),
    KeySpec("chat.llm_url", str, None, "OpenAI-compatible server base URL (…/v1); unset = on-device LLM"),
    KeySpec("chat.llm_model", str, None, "model name sent to the LLM server"),
    KeySpec("chat.system", str, None, "system prompt for chat"),
    KeySpec("chat.barge_in_ms", float, DEFAULT_BARGE_IN_MS, "speech needed to interrupt the assistant"),
    KeySpec("chat.final_asr", str, None, "recognizer of the finals of chat's utterances, or none (unset: "
            "moonshine-base-en where it is the default recognizer here and chat runs moonshine-tiny-en)"),
    KeySpec("bench.max_p50_ms", float, None, "CI budget: fail bench ttfa if warm TTFA p50 exceeds this"),
    KeySpec("bench.max_p95_ms", float, None, "CI budget: fail bench ttfa if warm TTFA p95 exceeds this"),
    KeySpec("bench.runs", int, 5, "timed runs per text"),
    KeySpec("bench.warmup", int, 1, "discarded runs per text"),
    KeySpec("ledger.preset", str, "default", "ledger preset name"),
    *_ledger_terms(),
)

DEFAULTS: Final[dict[str, Any]] = {k.key: k.default for k in KEYS}
"""Every key's built-in value: what `resolve()` falls back to and `config show` reports."""


def config_keys() -> dict[str, KeySpec]:
    """Every valid dotted key, in table order."""
    return {k.key: k for k in KEYS}


def _section_classes() -> dict[str, type]:
    # The typed view (`cfg.bench.max_p95_ms`): one frozen dataclass per section, fields from KEYS.
    sections: dict[str, list[KeySpec]] = {}
    for k in KEYS:
        sections.setdefault(k.key.partition(".")[0], []).append(k)
    return {name: make_dataclass(f"{name.title()}Section",
                                 [(k.key.partition(".")[2], Optional[k.type], field(default=None)) for k in keys],
                                 frozen=True)
            for name, keys in sections.items()}


_SECTIONS: Final = _section_classes()


@dataclass(frozen=True)
class Config:
    """The config file with the environment laid over it; a key not set in either is None."""

    path: Path
    exists: bool = False
    values: dict[str, Any] = field(default_factory=dict)
    """dotted key -> value, for every key that is set."""
    warnings: tuple[str, ...] = ()
    """Unknown sections/keys, one sentence each, for the CLI to print."""
    sources: dict[str, str] = field(default_factory=dict)
    """dotted key -> "env" or "config" for every value that is set."""

    def get(self, dotted: str) -> Any:
        """`cfg.get("bench.max_p95_ms")` -> the value or None."""
        return self.values.get(dotted)

    def __getattr__(self, section: str) -> Any:
        """`cfg.tts.voice`: a typed, frozen view of one section."""
        cls = _SECTIONS.get(section)
        if cls is None:
            raise AttributeError(section)
        prefix = section + "."
        return cls(**{k[len(prefix):]: v for k, v in self.values.items() if k.startswith(prefix)})


def resolve(key: str, flag_value: Any = None, *, config: Config | None = None) -> Any:
    """The value a command uses for `key`: flag > env (VOXCLI_*) > config file > `DEFAULTS`.

    `flag_value` None means "not given on the command line". Pass `config`
    when resolving several keys so the file is read once. With --verbose
    the CLI shows one line per key saying where the value came from.
    """
    if key not in DEFAULTS:
        raise KeyError(f"unknown config key {key!r}")
    if flag_value is not None:
        value, where = flag_value, "flag"
    else:
        cfg = config if config is not None else load_config()
        value = cfg.get(key)
        if value is None:
            value, where = DEFAULTS[key], "default"
        elif cfg.sources.get(key) == "env":
            where = f"env {config_keys()[key].env}"
        else:
            where = f"config {cfg.path}"
    log.info("%s = %r (%s)", key, value, where)
    return value


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


def _env_overlay(values: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    # Environment beats the file: every key whose VOXCLI_* variable is non-empty.
    for spec in KEYS:
        raw = os.environ.get(spec.env, "")
        if raw.strip():
            values[spec.key] = parse_value(spec, raw, f"${spec.env}")
            sources[spec.key] = "env"
    return values


def toml_error_line(e: Exception) -> int | None:
    """The 1-based line of a TOMLDecodeError (an attribute only since 3.14; else in the message)."""
    import re

    line = getattr(e, "lineno", None)
    if line is None:
        m = re.search(r"line (\d+)", str(e))
        line = int(m.group(1)) if m else None
    return line


def _coerce(value: Any, want: type, where: str, path: Path) -> Any:
    # One-line type check per key: str | float | int (bool is not a number here).
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
        return Config(path=path, values=_env_overlay({}, sources), sources=sources)
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
    values: dict[str, Any] = {}
    keys = config_keys()
    for name, table in raw.items():
        if name not in _SECTIONS:
            warnings.append(f"{path}: unknown section [{name}] ignored (known: {', '.join(_SECTIONS)})")
            continue
        if not isinstance(table, dict):
            raise UsageError(f"{path}: {name} must be a [{name}] table")
        for key, v in table.items():
            spec = keys.get(f"{name}.{key}")
            if spec is None:
                known = sorted(k.partition(".")[2] for k in keys if k.startswith(name + "."))
                warnings.append(f"{path}: unknown key {key!r} in [{name}] ignored (known: {', '.join(known)})")
                continue
            values[spec.key] = _coerce(v, spec.type, f"[{name}] {key}", path)
            sources[spec.key] = "config"
    return Config(path=path, exists=True, values=_env_overlay(values, sources), warnings=tuple(warnings),
                  sources=sources)
