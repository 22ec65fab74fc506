"""Every config key is honoured by every command that has the matching flag: flag > env > config.

The issue: `chat` opened the mic with `devices.output` and ignored
`asr.model`, `bench asr` ignored every `asr.*` key, because each command
applied the precedence by hand. Now all of them call `voxcli.config.resolve`,
which says under `--verbose` which value won and where it came from:
`voxcli: asr.endpoint_ms = 702.0 (env VOXCLI_ASR_ENDPOINT_MS)`.

For every (command, key) row the test runs the real command three times:
the key set in the config file only; config + environment; config +
environment + the command's flag; and checks the value and source the
command used. Model and voice names are set to names that do not exist, so
the command stops at the model lookup (cheap, nothing is downloaded: the
run is --offline) and the error must name the winning value: the value
really reached the loader. `ledger` needs no model: its --json output must
show the winning term value.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from voxcli.cli.app import app
from voxcli.config import DEFAULTS, config_keys

# A model name that does not exist stops a command right after it resolved its settings.
STOP_ENV = {
    "VOXCLI_TTS_VOICE": "no-such-voice-stop",
    "VOXCLI_ASR_MODEL": "no-such-asr-stop",
    "VOXCLI_CHAT_LLM_URL": "http://127.0.0.1:9/v1",  # never the on-device LLM (nothing to load)
    "VOXCLI_OFFLINE": "1",
}
LINE = re.compile(r"^voxcli: (?P<key>[a-z_]+\.[a-z0-9_]+) = (?P<value>.*) \((?P<source>flag|default|env \S+|config .*)\)$")


@dataclass(frozen=True)
class Row:
    args: tuple[str, ...]
    """The command line; {wav} and {tmp} are filled in."""
    key: str
    flag: str | None
    """The command's flag for this key (None: config/env only)."""


def _rows() -> list[Row]:
    speak = ("speak", "Hello.", "-o", "{tmp}/out.wav")
    transcribe = ("transcribe", "{wav}")
    chat = ("chat", "--input", "{wav}", "-o", "{tmp}/replies.wav", "--no-log")
    ttfa = ("bench", "ttfa", "--no-history", "--text", "Hello.")
    bench_asr = ("bench", "asr", "{wav}")
    ledger = ("ledger", "--json")
    rows = [
        Row(speak, "tts.voice", "--voice"),
        Row(speak, "devices.output", "--device"),
        Row(speak, "tts.max_buffer_flush_ms", "--max-buffer-flush-ms"),
        *(Row(speak, f"tts.{k}", f"--{k.replace('_', '-')}")
          for k in ("first_frames", "frames", "lookback", "lookahead", "overlap")),
        Row(speak, "tts.profile", None),
        Row(transcribe, "asr.model", "--model"),
        Row(transcribe, "asr.endpoint_ms", "--endpoint-ms"),
        Row(("transcribe", "--live"), "devices.input", "--device"),
        Row(chat, "tts.voice", "--voice"),
        Row(chat, "asr.model", "--model"),
        Row(chat, "asr.endpoint_ms", "--endpoint-ms"),
        Row(chat, "asr.endpoint", "--endpoint"),
        Row(chat, "devices.input", "--device"),
        Row(chat, "devices.output", "--device"),
        Row(chat, "chat.llm_url", "--llm-url"),
        Row(chat, "chat.llm_model", "--llm-model"),
        Row(chat, "chat.system", "--system"),
        Row(chat, "chat.barge_in_ms", "--barge-in-ms"),
        Row(chat, "chat.final_asr", "--final-model"),
        Row(ttfa, "tts.voice", "--voice"),
        Row(ttfa, "bench.runs", "--runs"),
        Row(ttfa, "bench.warmup", "--warmup"),
        Row(ttfa, "bench.max_p50_ms", "--max-p50-ms"),
        Row(ttfa, "bench.max_p95_ms", "--max-p95-ms"),
        Row(bench_asr, "asr.model", "--model"),
        Row(bench_asr, "asr.endpoint_ms", "--endpoint-ms"),
        Row(ledger, "ledger.preset", "--preset"),
    ]
    rows += [Row(ledger, k, "--" + k.split(".")[1].replace("_", "-"))
             for k in DEFAULTS if k.startswith("ledger.") and k != "ledger.preset"]
    return rows


ROWS = _rows()


def _values(key: str) -> dict[str, Any]:
    """Three distinct valid values per key: what the config file, the environment and the flag say."""
    kind = config_keys()[key].type
    if key == "ledger.preset":
        return {"config": "webrtc", "env": "telephony", "flag": "default"}
    if key == "chat.llm_url":
        return {src: f"http://127.0.0.1:9/{src}/v1" for src in ("config", "env", "flag")}
    if kind is str:
        return {src: f"no-such-{key.split('.')[1].replace('_', '-')}-{src}" for src in ("config", "env", "flag")}
    base = {"bench.runs": 3, "bench.warmup": 2}.get(key, 700)
    return {"config": base + 1, "env": base + 2, "flag": base + 3}


def _config_toml(key: str, value: Any) -> str:
    section, _, name = key.partition(".")
    return f"[{section}]\n{name} = {json.dumps(value)}\n"


@pytest.fixture
def wav(tmp_path: Path) -> Path:
    path = tmp_path / "in.wav"
    sf.write(path, np.zeros(16000, np.float32), 16000)
    (tmp_path / "in.txt").write_text("silence\n")  # bench asr's reference transcript
    return path


def _run(row: Row, scenario: str, tmp: Path, wav: Path) -> tuple[Any, dict[str, tuple[Any, str]]]:
    values = _values(row.key)
    spec = config_keys()[row.key]
    (tmp / "config.toml").write_text(_config_toml(row.key, values["config"]))
    env = {k: v for k, v in STOP_ENV.items() if k != spec.env}
    if scenario in ("env", "flag"):
        env[spec.env] = str(values["env"])
    args = [a.format(tmp=tmp, wav=wav) for a in row.args] + ["--verbose"]
    if scenario == "flag":
        args += [row.flag, str(values["flag"])]
    r = CliRunner().invoke(app, args, env=env)
    seen = {}
    for line in r.stderr.splitlines():
        m = LINE.match(line)
        if m:
            seen[m["key"]] = (ast.literal_eval(m["value"]), m["source"])
    return r, seen


SCENARIOS = ("config", "env", "flag")


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{' '.join(r.args[:2]).split(' {')[0]}:{r.key}")
def test_key_is_honoured_with_flag_over_env_over_config(row: Row, scenario: str, tmp_path: Path, wav: Path):
    if scenario == "flag" and row.flag is None:
        pytest.skip("no flag for this key")
    want = _values(row.key)[scenario]
    r, seen = _run(row, scenario, tmp_path, wav)
    assert row.key in seen, f"`voxcli {' '.join(row.args)}` never resolved {row.key}:\n{r.stderr}"
    value, source = seen[row.key]
    assert value == want or (isinstance(want, (int, float)) and float(value) == float(want)), (value, want, r.stderr)
    expected_source = {"config": "config ", "env": f"env {config_keys()[row.key].env}", "flag": "flag"}[scenario]
    assert source.startswith(expected_source), (source, r.stderr)
    if row.key in ("tts.voice", "asr.model"):  # the value reached the model lookup
        assert r.exit_code == 3 and f"'{want}'" in r.stderr, r.stderr
    if row.args[0] == "ledger":  # the value is the one the ledger used
        doc = json.loads(r.stdout)
        if row.key == "ledger.preset":
            assert doc["preset"] == want
        else:
            assert float(doc["terms"][row.key.split(".")[1]]) == float(want)


def test_every_key_is_in_the_defaults_table_and_the_table_test():
    """A new config key must get a built-in default and a row here (or be explicitly command-less)."""
    assert set(DEFAULTS) == set(config_keys())
    assert set(DEFAULTS) == {row.key for row in ROWS}


def test_resolve_order_without_a_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from voxcli.config import DEFAULT_ENDPOINT_MS, resolve

    assert resolve("asr.endpoint_ms") == DEFAULT_ENDPOINT_MS
    (tmp_path / "config.toml").write_text("[asr]\nendpoint_ms = 600\n")
    assert resolve("asr.endpoint_ms") == 600.0
    monkeypatch.setenv("VOXCLI_ASR_ENDPOINT_MS", "650")
    assert resolve("asr.endpoint_ms") == 650.0
    assert resolve("asr.endpoint_ms", 700) == 700
    with pytest.raises(KeyError):
        resolve("asr.no_such_key")
