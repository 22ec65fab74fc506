"""`voxcli config`: set/unset round trips, precedence and sources, errors naming the line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app
from voxcli.config import config_keys, load_config
from voxcli.errors import ExitCode

runner = CliRunner()


def vox(*args: str, env: dict[str, str] | None = None):
    return runner.invoke(app, list(args), env=env, catch_exceptions=False)


def test_path_prints_the_env_path(isolated_env):
    r = vox("config", "path")
    assert r.exit_code == 0 and r.stdout.strip() == str(isolated_env / "config.toml")
    assert not (isolated_env / "config.toml").exists()  # asking where it is creates nothing


def test_set_writes_typed_toml_and_keeps_other_content(isolated_env):
    path = isolated_env / "config.toml"
    path.write_text('[ledger]\npreset = "webrtc"\n[myplugin]\nx = 1\n')
    assert vox("config", "set", "bench.max_p95_ms", "250").exit_code == 0
    assert vox("config", "set", "bench.runs", "7").exit_code == 0
    assert vox("config", "set", "tts.voice", "piper-joe-medium").exit_code == 0
    raw = tomllib.loads(path.read_text())
    assert raw["bench"] == {"max_p95_ms": 250.0, "runs": 7}
    assert isinstance(raw["bench"]["runs"], int) and isinstance(raw["bench"]["max_p95_ms"], float)
    assert raw["ledger"] == {"preset": "webrtc"} and raw["myplugin"] == {"x": 1}
    assert [p.name for p in isolated_env.iterdir() if p.name.startswith(".config.")] == []  # no temp left
    cfg = load_config()
    assert cfg.bench.max_p95_ms == 250.0 and cfg.tts.voice == "piper-joe-medium"


def test_unset_removes_the_key_and_the_empty_table(isolated_env):
    path = isolated_env / "config.toml"
    vox("config", "set", "chat.llm_url", "http://127.0.0.1:8080/v1")
    r = vox("config", "unset", "chat.llm_url")
    assert r.exit_code == 0 and "removed" in r.stderr
    assert "chat" not in tomllib.loads(path.read_text())
    r = vox("config", "unset", "chat.llm_url")
    assert r.exit_code == 0 and "was not set" in r.stderr


def test_unknown_key_exits_2_listing_valid_keys(isolated_env):
    r = vox("config", "set", "tts.voise", "x")
    assert r.exit_code == ExitCode.USAGE
    assert "unknown config key 'tts.voise'" in r.stderr and "did you mean 'tts.voice'" in r.stderr
    for key in ("tts.voice", "asr.model", "asr.endpoint_ms", "devices.input", "devices.output",
                "chat.llm_url", "chat.llm_model", "bench.max_p50_ms", "bench.max_p95_ms"):
        assert key in r.stderr
    assert not (isolated_env / "config.toml").exists()


@pytest.mark.parametrize("key, value, fragment", [
    ("bench.max_p95_ms", "fast", "must be a number"),
    ("bench.runs", "2.5", "must be an integer"),
    ("asr.endpoint_ms", "-5", ">= 0"),
    ("asr.endpoint_ms", "nan", ">= 0"),
    ("tts.voice", " ", "must not be empty"),
])
def test_values_are_type_checked(isolated_env, key, value, fragment):
    r = vox("config", "set", "--", key, value)  # `--` so "-5" is a value, not an option
    assert r.exit_code == ExitCode.USAGE and fragment in r.stderr and "Traceback" not in r.stderr
    assert not (isolated_env / "config.toml").exists()


def test_show_reports_value_and_source_with_precedence(isolated_env):
    vox("config", "set", "tts.voice", "from-config")
    vox("config", "set", "asr.model", "asr-from-config")
    env = {"VOXCLI_ASR_MODEL": "asr-from-env", "VOXCLI_BENCH_MAX_P50_MS": "90"}
    r = vox("config", "show", "--json", env=env)
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    v = doc["values"]
    assert set(v) == set(config_keys())
    assert v["tts.voice"] == {"value": "from-config", "source": "config", "env": "VOXCLI_TTS_VOICE", "type": "str"}
    assert v["asr.model"]["value"] == "asr-from-env" and v["asr.model"]["source"] == "env"
    assert v["bench.max_p50_ms"]["value"] == 90.0 and v["bench.max_p50_ms"]["source"] == "env"
    assert v["asr.endpoint_ms"] == {"value": 500.0, "source": "default", "env": "VOXCLI_ASR_ENDPOINT_MS", "type": "float"}
    assert v["bench.max_p95_ms"]["source"] == "unset" and v["bench.max_p95_ms"]["value"] is None
    assert doc["path"] == str(isolated_env / "config.toml") and doc["exists"] is True
    # Plain view: one line per key with the source; the file's path on stderr.
    r = vox("config", "show", env=env)
    lines = {ln.split()[0]: ln for ln in r.stdout.splitlines()}
    assert "env VOXCLI_ASR_MODEL" in lines["asr.model"] and "config file" in lines["tts.voice"]
    assert str(isolated_env / "config.toml") in r.stderr
    assert vox("config", "get", "asr.model", env=env).stdout == "asr-from-env\n"
    assert vox("config", "get", "tts.voice").stdout == "from-config\n"


def test_env_overrides_reach_commands_that_read_the_config(isolated_env, monkeypatch):
    # flag > env > config: the env value replaces the file's in the typed view every command reads.
    (isolated_env / "config.toml").write_text("[bench]\nmax_p95_ms = 100\nruns = 3\n")
    monkeypatch.setenv("VOXCLI_BENCH_MAX_P95_MS", "120")
    cfg = load_config()
    assert cfg.bench.max_p95_ms == 120.0 and cfg.sources["bench.max_p95_ms"] == "env"
    assert cfg.bench.runs == 3 and cfg.sources["bench.runs"] == "config"
    monkeypatch.setenv("VOXCLI_BENCH_RUNS", "many")
    r = vox("config", "show")
    assert r.exit_code == ExitCode.USAGE and "$VOXCLI_BENCH_RUNS: bench.runs must be an integer" in r.stderr


def test_malformed_file_names_the_line(isolated_env):
    path = isolated_env / "config.toml"
    path.write_text('[tts]\nvoice = "joe"\n[bench]\nmax_p95_ms = = 3\n')
    for args in (("config", "show"), ("config", "set", "tts.voice", "x")):
        r = vox(*args)
        assert r.exit_code == ExitCode.USAGE, args
        assert str(path) in r.stderr and "line 4" in r.stderr and "Traceback" not in r.stderr
    assert "max_p95_ms = = 3" in vox("config", "show").stderr  # the offending line is quoted
    assert path.read_text().endswith("= = 3\n")  # a broken file is never overwritten


def test_console_script_exit_code(isolated_env):
    # Through the real entry point (not CliRunner): usage error -> exit 2, one line, no traceback.
    env = {**os.environ, "VOXCLI_CONFIG": str(isolated_env / "config.toml")}
    p = subprocess.run([sys.executable, "-m", "voxcli", "config", "set", "nope", "1"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and p.stderr.startswith("voxcli: error: unknown config key 'nope'")


def test_set_and_unset_keep_the_users_comments_and_layout(isolated_env):
    """`config set` used to rewrite the file with tomli-w and delete every comment."""
    cfg = isolated_env / "config.toml"
    original = (
        "# my voxcli settings\n"
        "\n"
        "[bench]\n"
        "# CI budget, agreed with the team\n"
        "max_p95_ms = 300.0  # ms\n"
        "runs = 5\n"
        "\n"
        "[my_plugin]  # not ours: kept as is\n"
        "x = 1\n"
    )
    cfg.write_text(original)
    assert vox("config", "set", "bench.max_p95_ms", "250").exit_code == 0
    assert cfg.read_text() == original.replace("max_p95_ms = 300.0", "max_p95_ms = 250.0")
    assert vox("config", "set", "asr.endpoint_ms", "400").exit_code == 0
    text = cfg.read_text()
    assert text.startswith(original.replace("max_p95_ms = 300.0", "max_p95_ms = 250.0"))
    assert tomllib.loads(text)["asr"] == {"endpoint_ms": 400.0}
    assert vox("config", "unset", "asr.endpoint_ms").exit_code == 0
    assert vox("config", "unset", "bench.runs").exit_code == 0
    assert cfg.read_text() == original.replace("max_p95_ms = 300.0", "max_p95_ms = 250.0").replace("runs = 5\n", "")
